#!/usr/bin/env node
// update_gen.js - generates random update cases for the differential test against mingo, as
// JSON Lines of canonical Extended JSON (the urun input format):
//   node update_gen.js [--seed S] [--n N] [--pipelines P] > cases.jsonl
//   (defaults: seed 1, 6000 operator cases, then 1500 update pipeline cases)
// Documents: fields a b c d (often missing) holding nested documents, arrays of scalars or of
// documents, nulls, int32, int64, double and decimal128 numbers, strings, booleans, dates.
// Updates: one to three of $set $unset $inc $mul $min $max $rename $push ($each $slice $sort
// $position) $addToSet ($each) $pop $pull (values, conditions, document conditions) $pullAll,
// on top-level, dotted and numeric paths, '$[]', '$[<id>]' with arrayFilters and '$' with a
// filter; some replacement documents. Then update pipelines (issue 27): one to three stages of
// $set/$addFields, $unset, $project, $replaceWith/$replaceRoot with expressions chosen by the
// kind of the field they read, from their own random stream (so the operator cases stay as
// they were).
//
// Each shape on which mingo departs from MongoDB's documented behaviour is avoided under a
// named flag below; every flag is listed, with the manual's wording, in ../ORACLE_UPDATE.md.
// They are constants, not options: turning one off makes the run report mingo's divergence.
"use strict";
const { rng: makeRng, fromEJSON } = require("./ejson");

const AVOID = {
  NON_NUMERIC_INC: true,     // $inc/$mul only where the target is a number or missing
  NON_ARRAY_ARRAY_OPS: true, // $push $addToSet $pop $pull $pullAll only on arrays or missing
  PUSH_MISSING_MODIFIERS: true, // $push with $slice/$sort/$position only on existing arrays
  ADDTOSET_MISSING_DUPS: true,  // $addToSet $each on a missing field has no duplicates
  ADDTOSET_EXISTING_DUPS: true, // $addToSet only on arrays without duplicate elements
  PUSH_SORT_MIXED: true,     // $push $sort only over numbers, or documents with a numeric key
  BLOCKED_PATHS: true,       // no path going on below a scalar or through an array by name
  ARRAY_PADDING: true,       // numeric components only within the array's length
  RENAME_ARRAYS: true,       // $rename never crosses an array or moves onto an existing path
  POSITIONAL_SELECTOR: true, // one positional path per array, never with a path inside it
  ID_UPDATES: true,          // no update names _id (mingo rejects even an unchanged _id)
  FIELD_ORDER: true,         // structural: results are compared with keys in any order
  NUMERIC_TYPES: true,       // structural: int32/int64/double/decimal compare as numbers
  REPLACEMENT: true,         // replacement documents are not given to mingo (no support)
  SET_ON_INSERT: true,       // structural: no $setOnInsert, no upserts (mingo has neither)
  CURRENT_DATE: true,        // structural: no $currentDate (the clock differs)
  MIN_MAX_CROSS_TYPE: true,  // $min/$max only between numbers, strings or dates of one kind
  PULL_DOC_SCALARS: true,    // $pull with a document condition only on arrays of documents
  PIPELINE_DROPS_ID: true,   // pipelines: $project/$replaceWith always keep _id (mingo drops it)
};

const args = process.argv.slice(2);
let seed = 1, n = 6000, npipe = 1500;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--seed") seed = Number(args[++i]);
  else if (args[i] === "--n") n = Number(args[++i]);
  else if (args[i] === "--pipelines") npipe = Number(args[++i]);
  else if (args[i] === "--allow" && AVOID[args[i + 1]] !== undefined) AVOID[args[++i]] = false;
  else { console.error("usage: update_gen.js [--seed S] [--n N] [--pipelines P] [--allow FLAG]"); process.exit(2); }
}
let R = makeRng(seed);

// ---- values (canonical EJSON) ----
const I = (v) => ({ $numberInt: String(v) });
const L = (v) => ({ $numberLong: String(v) });
const Dbl = (v) => ({ $numberDouble: Number.isInteger(v) ? v.toFixed(1) : String(v) });
const Dec = (v) => ({ $numberDecimal: String(v) });
const DateV = (ms) => ({ $date: { $numberLong: String(ms) } });

const STRINGS = ["", "a", "ab", "b", "B", "x y", "é"];
const DATES = [0, 86400000, 1577836800000, 1609459200000];

function number() {
  const k = R.int(-3, 9);
  switch (R.int(0, 4)) {
    case 0: case 1: return I(k);
    case 2: return L(k);
    case 3: return Dbl(R.chance(0.5) ? k : k + R.pick([0.5, 0.25, -0.5]));
    default: return Dec(R.chance(0.5) ? String(k) : String(k + R.pick([0.5, 0.25])));
  }
}
function scalar() {
  switch (R.int(0, 7)) {
    case 0: case 1: case 2: return number();
    case 3: case 4: return R.pick(STRINGS);
    case 5: return R.chance(0.5);
    case 6: return null;
    default: return DateV(R.pick(DATES));
  }
}
function subdoc(depth) {
  const d = {};
  for (const k of ["x", "y", "z"]) if (R.chance(0.6)) d[k] = value(depth + 1);
  return d;
}
function array(depth) {
  const out = [];
  const len = R.int(0, 4);
  const docs = R.chance(0.4) && depth < 2;
  for (let i = 0; i < len; i++) out.push(docs ? subdoc(depth + 1) : scalar());
  return out;
}
function value(depth = 0) {
  const r = R.next();
  if (depth >= 2 || r < 0.5) return scalar();
  if (r < 0.75) return subdoc(depth);
  return array(depth);
}
function makeDoc() {
  const d = { _id: I(1) };
  for (const f of ["a", "b", "c", "d"]) if (R.chance(0.8)) d[f] = value(0);
  return d;
}

// ---- looking at the document (canonical EJSON, before the update) ----
const isWrapped = (v) => v !== null && typeof v === "object" && !Array.isArray(v) &&
  Object.keys(v).length === 1 && Object.keys(v)[0].startsWith("$");
const isNum = (v) => isWrapped(v) && ["$numberInt", "$numberLong", "$numberDouble", "$numberDecimal"].includes(Object.keys(v)[0]);
const isDate = (v) => isWrapped(v) && Object.keys(v)[0] === "$date";
const isDoc = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !isWrapped(v);
const kindOf = (v) => v === undefined ? "missing" : v === null ? "null" : Array.isArray(v) ? "array" :
  isNum(v) ? "number" : isDate(v) ? "date" : typeof v === "string" ? "string" :
  typeof v === "boolean" ? "bool" : "doc";

// Resolves a concrete path: {kind, value} or {blocked: true} when it goes on below a scalar,
// through an array by a field name, or past an array's end (ARRAY_PADDING).
function at(doc, path) {
  let v = doc;
  for (const p of path.split(".")) {
    if (v === undefined) return { kind: "missing" };
    if (Array.isArray(v)) {
      if (!/^\d+$/.test(p)) return { blocked: true };
      if (Number(p) >= v.length) return AVOID.ARRAY_PADDING ? { blocked: true } : { kind: "missing" };
      v = v[Number(p)];
      continue;
    }
    if (!isDoc(v)) return { blocked: true };
    v = v[p];
  }
  return { kind: kindOf(v), value: v };
}

const PATHS = ["a", "b", "c", "d", "e", "a.x", "b.y", "c.z", "e.x", "a.x.y", "b.0", "a.1",
  "c.0.x", "d.1.y", "b.x.z"];

// ---- update pieces ----
function pick(doc, ok) {
  for (let i = 0; i < 8; i++) {
    const p = R.pick(PATHS);
    const r = at(doc, p);
    if (r.blocked && AVOID.BLOCKED_PATHS) continue;
    if (!ok || ok(r)) return p;
  }
  return null;
}
const numOrMissing = (r) => r.kind === "missing" || r.kind === "number";
const arrOrMissing = (r) => r.kind === "missing" || r.kind === "array";
const arrayOnly = (r) => r.kind === "array";

// equal elements in the BSON sense (numbers by value), as far as these documents go
const canon = (v) => JSON.stringify(v, (k, x) => isNum(x) ? { n: Number(Object.values(x)[0]) } : x);
const hasDups = (arr) => new Set(arr.map(canon)).size !== arr.length;

function eachList(len) {
  const out = [];
  for (let i = 0; i < len; i++) out.push(scalar());
  return out;
}
function numList(len) {
  const out = [];
  for (let i = 0; i < len; i++) out.push(number());
  return out;
}

function operation(doc, used) {
  const fresh = (p) => p && !used.some((u) => u === p || u.startsWith(p + ".") || p.startsWith(u + "."));
  const take = (p) => { used.push(p); return p; };
  const op = R.pick(["$set", "$set", "$unset", "$inc", "$mul", "$min", "$max", "$rename",
    "$push", "$push", "$addToSet", "$pop", "$pull", "$pullAll"]);
  let p;
  switch (op) {
    case "$set": p = pick(doc); return fresh(p) && [op, take(p), value(1)];
    case "$unset": p = pick(doc); return fresh(p) && [op, take(p), ""];
    case "$inc": case "$mul":
      p = pick(doc, AVOID.NON_NUMERIC_INC ? numOrMissing : null);
      return fresh(p) && [op, take(p), R.chance(0.7) ? I(R.int(-3, 5)) : Dbl(R.pick([0.5, 1.5, -2.0, 2.0]))];
    case "$min": case "$max": {
      p = pick(doc);
      if (!fresh(p)) return null;
      const r = at(doc, p);
      let v;
      if (AVOID.MIN_MAX_CROSS_TYPE) {
        if (r.kind === "number" || r.kind === "missing") v = number();
        else if (r.kind === "string") v = R.pick(STRINGS);
        else if (r.kind === "date") v = DateV(R.pick(DATES));
        else return null;
      } else v = scalar();
      return [op, take(p), v];
    }
    case "$rename": {
      const from = R.pick(["a", "b", "c", "d", "a.x", "b.y"]);
      const to = R.pick(["e", "f", "g.h", "a.z", "b.w"]);
      if (from === to.split(".")[0] || to.startsWith(from + ".") || !fresh(from) || !fresh(to)) return null;
      const rf = at(doc, from), rt = at(doc, to);
      if (AVOID.RENAME_ARRAYS) {
        if (rf.blocked || rt.blocked || rt.kind !== "missing") return null;
        const parent = to.includes(".") ? at(doc, to.split(".")[0]) : { kind: "doc" };
        if (parent.kind !== "doc" && parent.kind !== "missing") return null;
      }
      take(from); take(to);
      return [op, from, to];
    }
    case "$push": {
      p = pick(doc, AVOID.NON_ARRAY_ARRAY_OPS ? arrOrMissing : null);
      if (!fresh(p)) return null;
      const r = at(doc, p);
      if (R.chance(0.4)) return [op, take(p), value(1)];
      const spec = { $each: R.chance(0.5) ? numList(R.int(0, 3)) : eachList(R.int(0, 3)) };
      const mods = !(AVOID.PUSH_MISSING_MODIFIERS && r.kind !== "array");
      if (mods && R.chance(0.4)) spec.$slice = I(R.int(-3, 3));
      if (mods && R.chance(0.3)) spec.$position = I(R.int(-3, 4));
      if (mods && R.chance(0.3)) {
        const all = (r.value || []).concat(spec.$each);
        if (all.every(isNum)) spec.$sort = I(R.pick([1, -1]));
        else if (all.every((e) => isDoc(e) && isNum(e.x))) spec.$sort = { x: I(R.pick([1, -1])) };
        else if (!AVOID.PUSH_SORT_MIXED) spec.$sort = I(1);
        if (spec.$sort && !spec.$each.length && R.chance(0.5)) spec.$each = [];
      }
      return [op, take(p), spec];
    }
    case "$addToSet": {
      p = pick(doc, AVOID.NON_ARRAY_ARRAY_OPS ? arrOrMissing : null);
      if (!fresh(p)) return null;
      const r = at(doc, p);
      if (AVOID.ADDTOSET_EXISTING_DUPS && r.kind === "array" && hasDups(r.value)) return null;
      if (R.chance(0.5)) return [op, take(p), scalar()];
      let each = eachList(R.int(0, 3));
      if (AVOID.ADDTOSET_MISSING_DUPS && r.kind === "missing") {
        const seen = new Set();
        each = each.filter((e) => { const k = JSON.stringify(fromEJSON(e)); if (seen.has(k)) return false; seen.add(k); return true; });
        // numbers of different types with one value are duplicates too
        const nums = new Set();
        each = each.filter((e) => { if (!isNum(e)) return true; const k = Number(Object.values(e)[0]); if (nums.has(k)) return false; nums.add(k); return true; });
      }
      return [op, take(p), { $each: each }];
    }
    case "$pop":
      p = pick(doc, AVOID.NON_ARRAY_ARRAY_OPS ? arrOrMissing : null);
      return fresh(p) && [op, take(p), I(R.pick([1, -1]))];
    case "$pull": {
      p = pick(doc, AVOID.NON_ARRAY_ARRAY_OPS ? arrOrMissing : null);
      if (!fresh(p)) return null;
      const r = at(doc, p);
      const elems = r.kind === "array" ? r.value : [];
      switch (R.int(0, 3)) {
        case 0: return [op, take(p), elems.length && R.chance(0.7) ? R.pick(elems) : scalar()];
        case 1: return [op, take(p), { [R.pick(["$gte", "$lt"])]: number() }];
        case 2: return [op, take(p), { $in: [scalar(), elems.length ? R.pick(elems) : scalar()] }];
        default:
          if (AVOID.PULL_DOC_SCALARS && !elems.every(isDoc)) return [op, take(p), { $gt: number() }];
          return [op, take(p), { x: { [R.pick(["$gte", "$lte"])]: number() } }];
      }
    }
    default: { // $pullAll
      p = pick(doc, AVOID.NON_ARRAY_ARRAY_OPS ? arrOrMissing : null);
      if (!fresh(p)) return null;
      const r = at(doc, p);
      const elems = r.kind === "array" ? r.value : [];
      const list = eachList(R.int(0, 2));
      if (elems.length) list.push(R.pick(elems));
      return [op, take(p), list];
    }
  }
}

// a positional operation over an array of the document: $[], $[e] or $
function positional(doc, used, c) {
  const arrays = ["a", "b", "c", "d"].filter((f) => Array.isArray(doc[f]) && doc[f].length &&
    !used.some((u) => u === f || u.startsWith(f + ".")));
  if (!arrays.length) return null;
  const f = R.pick(arrays);
  const arr = doc[f];
  const docs = arr.every(isDoc);
  const nums = arr.every(isNum);
  const form = R.pick(["$[]", "$[e]", "$"]);
  let sub = "";
  if (docs) sub = "." + R.pick(["x", "y"]);
  else if (!nums) return null;
  // the operation on each element (numbers: $inc or $set; documents: on a field)
  const opv = docs ? R.pick([["$set", scalar()], ["$unset", ""], ["$inc", I(R.int(1, 3))]]) :
    R.pick([["$set", scalar()], ["$inc", I(R.int(1, 3))], ["$mul", I(2)]]);
  if (docs && opv[0] === "$inc" && !arr.every((e) => e[sub.slice(1)] === undefined || isNum(e[sub.slice(1)]))) opv[0] = "$set";
  used.push(f);
  if (!AVOID.POSITIONAL_SELECTOR && docs && R.chance(0.5)) {
    // a second operation on another field of the same elements: no conflict in MongoDB
    const other = sub === ".x" ? ".y" : ".x";
    (c.extra ||= []).push(["$set", f + ".$[]" + other, I(7)]);
  }
  if (form === "$[]") return [opv[0], f + ".$[]" + sub, opv[1]];
  if (form === "$[e]") {
    if (docs) {
      c.arrayFilters = [{ "e.x": { [R.pick(["$gte", "$lt"])]: number() } }];
    } else {
      c.arrayFilters = [{ e: { [R.pick(["$gte", "$lt"])]: number() } }];
    }
    return [opv[0], f + ".$[e]" + sub, opv[1]];
  }
  // '$': the filter picks an element
  const e = R.pick(arr);
  c.filter = docs ? (isNum(e.x) ? { [f + ".x"]: e.x } : null) : { [f]: e };
  if (!c.filter) { delete c.filter; return [opv[0], f + ".$[]" + sub, opv[1]]; }
  return [opv[0], f + ".$" + sub, opv[1]];
}

// updates both sides must reject
function badUpdate() {
  switch (R.int(0, 4)) {
    case 0: return { $set: { a: I(1) }, $inc: { a: I(1) } };
    case 1: return { $set: { "a.x": I(1), a: I(2) } };
    case 2: return { $sett: { a: I(1) } };
    case 3: return { $inc: { a: "x" } };
    default: return { $push: { a: { $each: I(5) } } };
  }
}

function makeCase() {
  const doc = makeDoc();
  const c = { doc };
  if (R.chance(0.04)) {
    c.update = badUpdate();
    return c;
  }
  if (!AVOID.REPLACEMENT && R.chance(0.03)) {
    c.update = { a: value(1) };
    return c;
  }
  const used = AVOID.ID_UPDATES ? ["_id"] : [];
  const update = {};
  const add = (o) => {
    if (!o) return;
    const [op, path, v] = o;
    (update[op] ||= {})[path] = v;
  };
  if (R.chance(0.3)) add(positional(doc, used, c));
  for (const e of c.extra || []) if (!(update[e[0]] && update[e[0]][e[1]])) add(e);
  delete c.extra;
  if (!AVOID.ID_UPDATES && R.chance(0.1)) add(["$set", "_id", I(1)]); // unchanged _id
  for (let i = R.int(1, 3); i > 0; i--) add(operation(doc, used));
  if (!Object.keys(update).length) update.$set = { e: I(1) };
  c.update = update;
  return c;
}

// ---- update pipelines ----
const TOP = ["a", "b", "c", "d"];

// An expression over field f of doc whose value both sides define for f's kind.
function expr(doc, f) {
  const r = at(doc, f);
  const k = r.kind;
  switch (R.int(0, 5)) {
    case 0: return "$" + f;
    case 1: return { $ifNull: ["$" + f, scalar()] };
    case 2: return "$$ROOT." + f;
    default:
      if (k === "number" && R.chance(0.5)) return { $add: ["$" + f, I(R.int(-3, 3))] };
      if (k === "number") return { $cond: [{ $gt: ["$" + f, I(R.int(-2, 5))] }, "big", "small"] };
      if (k === "string") return { $concat: ["$" + f, R.pick(STRINGS)] };
      if (k === "array") return { $size: "$" + f };
      if (k === "doc") return { $mergeObjects: ["$" + f, { k: I(R.int(0, 9)) }] };
      return { $literal: scalar() };
  }
}

function stage(doc, first) {
  const f = R.pick(TOP), g = R.pick(TOP.concat(["e", "f"]).filter((x) => x !== f));
  // later stages see a changed document: they only copy, default or drop fields
  const ex = first ? expr(doc, f) : R.chance(0.5) ? "$" + f : { $ifNull: ["$" + f, scalar()] };
  switch (R.int(0, 6)) {
    case 0: case 1: return { $set: { [g]: ex } };
    case 2: return { $addFields: { [g]: ex, ["n" + g]: scalar() } };
    case 3: return { $unset: R.chance(0.5) ? f : [f, g] };
    case 4: {
      if (R.chance(0.5)) return { $project: { [f]: I(1), [g]: I(1) } };
      return { $project: { [f]: I(0) } };
    }
    case 5: {
      const keep = AVOID.PIPELINE_DROPS_ID ? { _id: "$_id" } : {};
      return { $replaceWith: { $mergeObjects: [keep, "$$ROOT", { [g]: ex }] } };
    }
    default: {
      const keep = AVOID.PIPELINE_DROPS_ID ? { _id: "$_id" } : {};
      return { $replaceRoot: { newRoot: { ...keep, v: ex } } };
    }
  }
}

function pipelineCase() {
  const doc = makeDoc();
  if (R.chance(0.04)) // both must reject: a stage an update cannot have
    return { doc, update: [{ $set: { a: I(1) } }, { $group: { _id: null } }] };
  const update = [];
  for (let i = R.int(1, 3); i > 0; i--) update.push(stage(doc, update.length === 0));
  return { doc, update };
}

const out = [];
for (let i = 0; i < n; i++) out.push(JSON.stringify(makeCase()));
R = makeRng(seed * 7919 + 17);
for (let i = 0; i < npipe; i++) out.push(JSON.stringify(pipelineCase()));
process.stdout.write(out.join("\n") + "\n");
