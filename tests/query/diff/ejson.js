// ejson.js - shared by gen.js and compare.js: a seeded RNG, canonical Extended JSON <-> the
// JavaScript values mingo works with, and a type-aware, key-order-insensitive rendering used
// to compare results (see ORACLE.md for why key order is not compared here).
"use strict";

class ObjectId {
  constructor(hex) { this.hex = hex; }
  toString() { return this.hex; }
}

function rng(seed) { // mulberry32
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // inclusive
    pick: (xs) => xs[Math.floor(next() * xs.length)],
    chance: (p) => next() < p,
  };
}

// canonical EJSON (as qrun prints it) -> JS values for mingo
function fromEJSON(v) {
  if (Array.isArray(v)) return v.map(fromEJSON);
  if (v === null || typeof v !== "object") return v;
  const k = Object.keys(v);
  if (k.length === 1) {
    const x = v[k[0]];
    switch (k[0]) {
      case "$numberInt": case "$numberLong": case "$numberDouble": case "$numberDecimal":
        return Number(x);
      case "$oid": return new ObjectId(x);
      case "$date":
        if (typeof x === "string") return new Date(x);
        return new Date(Number(x.$numberLong));
      case "$regularExpression": return new RegExp(x.pattern, x.options);
    }
  }
  const o = {};
  for (const key of k) o[key] = fromEJSON(v[key]);
  return o;
}

// A rendering of a JS value that distinguishes types mingo distinguishes and ignores the
// order of object keys.
function norm(v) {
  if (v === undefined) return "U";
  if (v === null) return "null";
  if (typeof v === "number") return "N:" + (Object.is(v, -0) ? "0" : String(v));
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "boolean") return String(v);
  if (v instanceof Date) return "D:" + v.getTime();
  if (v instanceof ObjectId) return "O:" + v.hex;
  if (v instanceof RegExp) return "R:/" + v.source + "/" + v.flags;
  if (Array.isArray(v)) return "[" + v.map(norm).join(",") + "]";
  // a key holding undefined is how mingo leaves a missing field ($slice of a missing field)
  return "{" + Object.keys(v).filter((k) => v[k] !== undefined).sort().map((k) => JSON.stringify(k) + ":" + norm(v[k])).join(",") + "}";
}

module.exports = { ObjectId, rng, fromEJSON, norm };
