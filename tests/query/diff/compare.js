#!/usr/bin/env node
// compare.js - evaluates each generated case with mingo and compares with qrun's output:
//   node compare.js CASES.jsonl RESULTS.jsonl [--show N]
// A case passes when both sides return the same documents in the same order (values compared
// by type and value, object keys in any order: see ORACLE.md), or both reject the query.
"use strict";
const fs = require("fs");
const mingo = require("mingo");
const { fromEJSON, norm } = require("./ejson");

const args = process.argv.slice(2);
let show = 10, unordered = false;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--show") show = Number(args[++i]);
  // indexed runs: without a sort the order is the plan's, so compare as multisets, and with
  // skip/limit but no sort only the count (tests/query/README.md); with a sort, ties may come
  // in another order, so each run of equal sort keys compares as a multiset
  else if (args[i] === "--unordered") unordered = true;
  else files.push(args[i]);
}
if (files.length !== 2) { console.error("usage: compare.js CASES RESULTS [--show N]"); process.exit(2); }
const cases = fs.readFileSync(files[0], "utf8").split("\n").filter((l) => l.trim());
const results = fs.readFileSync(files[1], "utf8").split("\n").filter((l) => l.trim());
if (cases.length !== results.length) {
  console.error(`compare.js: ${cases.length} cases but ${results.length} results`);
  process.exit(1);
}

function oracle(c) {
  const docs = fromEJSON(c.docs);
  const filter = c.filter ? fromEJSON(c.filter) : {};
  // mingo rejects $comment, which MongoDB documents as having no effect (ORACLE.md)
  delete filter.$comment;
  let cur = mingo.find(docs, filter);
  if (c.sort) cur = cur.sort(Object.assign(fromEJSON(c.sort), { _id: 1 }));
  if (c.skip) cur = cur.skip(Number(c.skip.$numberInt));
  if (c.limit) cur = cur.limit(Number(c.limit.$numberInt));
  let out = cur.all();
  // projection last, on the chosen documents (as the find command does)
  if (c.projection) out = mingo.find(out, {}, fromEJSON(c.projection)).all();
  return out;
}

function same_multiset(a, b) {
  const x = a.slice().sort(), y = b.slice().sort();
  return x.every((v, j) => v === y[j]);
}

let pass = 0, fail = 0;
for (let i = 0; i < cases.length; i++) {
  const c = JSON.parse(cases[i]);
  const r = JSON.parse(results[i]);
  let want, wantErr = null;
  try { want = oracle(c).map(norm); } catch (e) { wantErr = e.message; }
  let ok, got;
  if (r.error !== undefined) {
    ok = wantErr !== null;
    got = "error: " + r.error;
  } else {
    got = fromEJSON(r.ok).map(norm);
    ok = wantErr === null && got.length === want.length && got.every((g, j) => g === want[j]);
    if (!ok && unordered && wantErr === null && got.length === want.length) {
      if (!c.sort) ok = !!(c.skip || c.limit) || same_multiset(got, want);
      else ok = same_multiset(got, want) || !!(c.skip || c.limit);
    }
  }
  if (ok) { pass++; continue; }
  fail++;
  if (fail <= show) {
    console.log(`FAIL case ${i + 1}: ${cases[i]}`);
    console.log(`  mingo: ${wantErr !== null ? "error: " + wantErr : "[" + want.join(", ") + "]"}`);
    console.log(`  docfs: ${Array.isArray(got) ? "[" + got.join(", ") + "]" : got}`);
  }
}
console.log(`query-mingo${unordered ? " (indexed)" : ""}: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
