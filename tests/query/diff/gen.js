#!/usr/bin/env node
// gen.js - generates random find() cases for the differential test against mingo, as JSON
// Lines of canonical Extended JSON (the qrun input format):
//   node gen.js [--seed S] [--n N] [--autoindex] > cases.jsonl   (defaults: seed 1, 10000 cases)
// Documents: nested documents, arrays of mixed types, nulls, missing fields, int32, int64,
// double and decimal128 numbers, strings, dates, ObjectIds. Filters: every operator of the
// filter language except those mingo cannot judge (see ORACLE.md), dotted paths and numeric
// path components; projections (inclusion, exclusion, dotted, $slice); sorts; skip; limit.
//
// Each shape on which mingo departs from MongoDB is avoided under a named flag below; every
// flag is listed, with the manual's wording, in ../ORACLE.md. They are constants, not
// options: turning one off makes the run report mingo's divergence, not a docfs bug.
"use strict";
const { rng: makeRng, fromEJSON } = require("./ejson");

const AVOID = {
  DOC_KEY_ORDER: true,       // embedded documents always have their keys in one order
  NESTED_ARRAYS: true,       // no array directly inside an array
  MOD_NON_INTEGERS: true,    // $mod only on paths holding integers (or nothing; no null)
  TYPE_NUMERIC_ALIASES: true,// $type never "int" "long" "double" "decimal" (16 18 1 19), "objectId"
  IN_ARRAY_VALUES: true,     // $in / $nin lists hold no arrays
  ALL_NON_ARRAY: true,       // $all only on paths holding an array (or nothing) in every document
  RANGE_NULL: true,          // $gt $gte $lt $lte never compare with null
  REGEX_X_FLAG: true,        // no "x" regex flag (JavaScript regexes have none)
  SORT_ARRAYS: true,         // sort only on fields holding scalars of the same order in both
  EXPR_ARRAYS: true,         // $expr only on fields holding scalars (see SORT_ARRAYS)
  EXPR_MISSING: true,        // $expr only on fields present in every document
  EXPR_CROSS_TYPE: true,     // $expr compares numbers with numbers only
  ELEMMATCH_SCALARS: true,   // query-form $elemMatch only on arrays of documents
  ARRAY_VALUES_THROUGH_ARRAYS: true, // equality to an array only on paths that cross no array
  SPECIAL_DOUBLES: true,     // no NaN, Infinity or -0.0
  UNDEFINED: true,           // no undefined values (MongoDB 8.0 changed null equality for it)
  NULL_THROUGH_ARRAYS: true, // null/missing predicates only on paths that cross no array
  SLICE_ALONE: true,         // a $slice projection always comes with an inclusion
  ARRAY_OPS_THROUGH_ARRAYS: true, // $size, $elemMatch, $all only on paths that cross no array
  TYPE_ARRAYS: true,         // $type only where no array is crossed; "array" alone at arrays
};

const args = process.argv.slice(2);
let seed = 1, n = 10000, autoindex = false;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--seed") seed = Number(args[++i]);
  else if (args[i] === "--n") n = Number(args[++i]);
  // the same cases, each asking qrun for its generated index set (single-field, multikey,
  // sparse, hashed, compound, partial) on the fields the case names
  else if (args[i] === "--autoindex") autoindex = true;
  else { console.error("usage: gen.js [--seed S] [--n N] [--autoindex]"); process.exit(2); }
}
const R = makeRng(seed);

// ---- values (canonical EJSON) ----
const I = (v) => ({ $numberInt: String(v) });
const L = (v) => ({ $numberLong: String(v) });
const Dbl = (v) => ({ $numberDouble: Number.isInteger(v) ? v.toFixed(1) : String(v) });
const Dec = (v) => ({ $numberDecimal: String(v) });
const DateV = (ms) => ({ $date: { $numberLong: String(ms) } });
const Oid = (h) => ({ $oid: h });
const Re = (p, o) => ({ $regularExpression: { pattern: p, options: o } });

const STRINGS = ["", "a", "ab", "abc", "b", "B", "ba", "x y", "é", "A1", "zz"];
const DATES = [0, 86400000, 1577836800000, 1609459200000, -86400000];
const OIDS = ["5f0000000000000000000001", "5f0000000000000000000002", "60000000000000000000000a"];

function number() {
  const k = R.int(-3, 10);
  switch (R.int(0, 4)) {
    case 0: case 1: return I(k);
    case 2: return L(R.chance(0.2) ? k * 1000000000000 : k);
    case 3: return Dbl(R.chance(0.5) ? k : k + R.pick([0.5, 0.25, -0.5]));
    default: return Dec(R.chance(0.5) ? String(k) : String(k + R.pick([0.5, 0.25])));
  }
}
function scalar() {
  switch (R.int(0, 9)) {
    case 0: case 1: case 2: return number();
    case 3: case 4: return R.pick(STRINGS);
    case 5: return R.chance(0.5);
    case 6: return null;
    case 7: return DateV(R.pick(DATES));
    case 8: return Oid(R.pick(OIDS));
    default: return number();
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
  for (let i = 0; i < len; i++) out.push(R.chance(0.3) && depth < 2 ? subdoc(depth + 1) : scalar());
  return out;
}
function value(depth = 0) {
  const r = R.next();
  if (depth >= 2 || r < 0.6) return scalar();
  if (r < 0.8) return subdoc(depth);
  return array(depth);
}
function makeDocs() {
  const docs = [];
  const count = R.int(1, 8);
  for (let i = 1; i <= count; i++) {
    const d = { _id: I(i) };
    for (const f of ["a", "b", "c", "d"]) if (R.chance(0.75)) d[f] = value(0);
    docs.push(d);
  }
  return docs;
}

// ---- looking at documents (JavaScript values) ----
const isNum = (v) => typeof v === "number";
// the value at a path that traverses no array: {missing}, {value} or {array: true}
function plain(doc, path) {
  let v = doc;
  for (const p of path.split(".")) {
    if (Array.isArray(v)) return { array: true };
    if (v === null || typeof v !== "object" || v instanceof Date || !(p in v)) return { missing: true };
    v = v[p];
  }
  return Array.isArray(v) ? { array: true, value: v } : { value: v };
}
const sortScalar = (v) => v === null || isNum(v) || typeof v === "string" || typeof v === "boolean" || v instanceof Date;
function sortable(jsdocs, path) {
  return jsdocs.every((d) => { const r = plain(d, path); return r.missing || (!r.array && sortScalar(r.value)); });
}
function modable(jsdocs, path) {
  return jsdocs.every((d) => {
    const r = plain(d, path);
    if (r.missing) return true;
    if (r.array && r.value) return r.value.every((x) => isNum(x) && Number.isInteger(x));
    return !r.array && isNum(r.value) && Number.isInteger(r.value);
  });
}
// May a predicate that matches null or missing values be used on path? (NULL_THROUGH_ARRAYS)
function nullSafe(jsdocs, path) {
  if (!AVOID.NULL_THROUGH_ARRAYS) return true;
  if (path.split(".").some((p) => /^\d+$/.test(p))) return false;
  return jsdocs.every((d) => { const r = plain(d, path); return !r.array || r.value; });
}
const crossesNoArray = (jsdocs, path) => jsdocs.every((d) => { const r = plain(d, path); return !r.array || r.value; });
const noArrayAtAll = (jsdocs, path) => jsdocs.every((d) => !plain(d, path).array);
function allable(jsdocs, path) {
  return jsdocs.every((d) => { const r = plain(d, path); return r.missing || (r.array && r.value); });
}
// values found at a path (any depth of arrays), to build queries that match something
function valuesAt(doc, parts, out) {
  if (parts.length === 0) { out.push(doc); if (Array.isArray(doc)) for (const e of doc) out.push(e); return; }
  if (Array.isArray(doc)) {
    for (const e of doc) valuesAt(e, parts, out);
    if (/^\d+$/.test(parts[0]) && Number(parts[0]) < doc.length) valuesAt(doc[Number(parts[0])], parts.slice(1), out);
    return;
  }
  if (doc !== null && typeof doc === "object" && parts[0] in doc && !doc.$numberInt && !doc.$date) valuesAt(doc[parts[0]], parts.slice(1), out);
}

const PATHS = ["a", "b", "c", "d", "a.x", "a.y", "b.x", "c.z", "a.0", "b.1", "a.0.x", "c.x.y", "a.x.x"];
const TOP = ["a", "b", "c", "d"];

function isOperatorObject(v) { return v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).some((k) => k.startsWith("$")); }

function queryValue(docs, path) {
  if (R.chance(0.55)) {
    const found = [];
    for (const d of docs) valuesAt(d, path.split("."), found);
    if (found.length) return found[R.int(0, found.length - 1)];
  }
  return scalar();
}
function queryScalar(docs, path) {
  for (let i = 0; i < 4; i++) {
    const v = queryValue(docs, path);
    if (v === null || Array.isArray(v)) continue;
    if (typeof v === "object" && !isOperatorObject(v)) continue; // a subdocument
    return v;
  }
  return number();
}
function rangeValue(docs, path) {
  let v = queryScalar(docs, path);
  if (AVOID.RANGE_NULL && v === null) v = number();
  return v;
}
function regex() {
  const p = R.pick(["^a", "b", "a$", "^$", "A", "é", "x y", "^[ab]+$", "b.", "^.b"]);
  let o = "";
  for (const f of ["i", "m", "s"]) if (R.chance(0.25)) o += f;
  return { p, o };
}

function operatorPredicate(docs, jsdocs, path) {
  const ns = nullSafe(jsdocs, path);
  const ca = crossesNoArray(jsdocs, path);
  const nn = (v) => (v === null && !ns ? number() : Array.isArray(v) && !ca && AVOID.ARRAY_VALUES_THROUGH_ARRAYS ? number() : v);
  switch (R.int(0, 13)) {
    case 0: return { $eq: nn(queryValue(docs, path)) };
    case 1: return { $ne: nn(queryValue(docs, path)) };
    case 2: case 3: {
      const op = R.pick(["$gt", "$gte", "$lt", "$lte"]);
      const p = { [op]: rangeValue(docs, path) };
      if (R.chance(0.3)) p[R.pick(op.startsWith("$g") ? ["$lt", "$lte"] : ["$gt", "$gte"])] = rangeValue(docs, path);
      return p;
    }
    case 4: case 5: {
      const list = [];
      const len = R.int(0, 3);
      for (let i = 0; i < len; i++) {
        if (R.chance(0.15)) { const r = regex(); list.push(Re(r.p, r.o)); continue; }
        let v = queryValue(docs, path);
        if (AVOID.IN_ARRAY_VALUES && Array.isArray(v)) v = scalar();
        list.push(nn(v));
      }
      return { [R.pick(["$in", "$nin"])]: list };
    }
    case 6: return ns ? { $exists: R.chance(0.5) } : { $lt: number() };
    case 7: {
      if (AVOID.TYPE_ARRAYS && !noArrayAtAll(jsdocs, path))
        return crossesNoArray(jsdocs, path) ? { $type: R.pick(["array", 4]) } : { $gt: number() };
      const names = ["number", "string", "object", "array", "bool", "null", "date", 2, 3, 4, 8, 9, 10];
      return { $type: R.chance(0.2) ? [R.pick(names), R.pick(names)] : R.pick(names) };
    }
    case 8: {
      const r = regex();
      return R.chance(0.5) ? { $regex: r.p, $options: r.o } : { $regex: r.p };
    }
    case 9:
      if (AVOID.ARRAY_OPS_THROUGH_ARRAYS && !crossesNoArray(jsdocs, path)) return { $gte: number() };
      return { $size: I(R.int(0, 3)) };
    case 10: {
      if (AVOID.ARRAY_OPS_THROUGH_ARRAYS && !crossesNoArray(jsdocs, path)) return { $lte: rangeValue(docs, path) };
      if (R.chance(0.5)) {
        const p = { [R.pick(["$gt", "$gte"])]: rangeValue(docs, path) };
        if (R.chance(0.5)) p[R.pick(["$lt", "$lte"])] = rangeValue(docs, path);
        return { $elemMatch: p };
      }
      const sub = R.pick(["x", "y", "z"]);
      if (AVOID.ELEMMATCH_SCALARS && !jsdocs.every((d) => { const r = plain(d, path);
        return r.missing || (!r.array) || (r.value && r.value.every((e) => e !== null && typeof e === "object" && e.constructor === Object)); }))
        return { $elemMatch: { $lte: rangeValue(docs, path) } };
      return { $elemMatch: R.chance(0.5) ? { [sub]: queryScalar(docs, path + "." + sub) } :
        { [sub]: { [R.pick(["$gt", "$lte"])]: rangeValue(docs, path + "." + sub) } } };
    }
    case 11: {
      if (AVOID.ALL_NON_ARRAY && !allable(jsdocs, path)) return { $lt: number() };
      const list = [];
      for (let i = R.int(1, 2); i > 0; i--) {
        let v = queryScalar(docs, path);
        list.push(v);
      }
      return { $all: list };
    }
    case 12: {
      if (AVOID.MOD_NON_INTEGERS && !modable(jsdocs, path)) return { $gt: number() };
      const d = R.int(2, 5);
      return { $mod: [I(d), I(R.int(0, d - 1))] };
    }
    default: {
      let inner;
      do { inner = operatorPredicate(docs, jsdocs, path); } while (inner.$regex !== undefined || inner.$all);
      if (R.chance(0.3)) { const r = regex(); return { $not: Re(r.p, r.o) }; }
      return { $not: inner };
    }
  }
}

function leaf(docs, jsdocs) {
  const path = R.pick(PATHS);
  const r = R.next();
  if (r < 0.2) {
    let v = queryValue(docs, path);
    if (isOperatorObject(v)) v = scalar();
    if (v === null && !nullSafe(jsdocs, path)) v = number();
    if (AVOID.ARRAY_VALUES_THROUGH_ARRAYS && Array.isArray(v) && !crossesNoArray(jsdocs, path)) v = number();
    return { [path]: v };
  }
  if (r < 0.25) { const x = regex(); return { [path]: Re(x.p, x.o) }; }
  return { [path]: operatorPredicate(docs, jsdocs, path) };
}

function exprFilter(docs, jsdocs) {
  const ok = TOP.filter((p) => sortable(jsdocs, p) &&
    (!AVOID.EXPR_MISSING || jsdocs.every((d) => !plain(d, p).missing)) &&
    (!AVOID.EXPR_CROSS_TYPE || jsdocs.every((d) => { const r = plain(d, p); return r.missing || isNum(r.value); })));
  if (AVOID.EXPR_ARRAYS && ok.length === 0) return null;
  const op = R.pick(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]);
  const lhs = "$" + R.pick(ok);
  const rhs = R.chance(0.5) ? "$" + R.pick(ok) :
    (AVOID.EXPR_CROSS_TYPE ? number() : R.pick([number(), R.pick(STRINGS), null]));
  return { $expr: { [op]: [lhs, rhs] } };
}

function filter(docs, jsdocs, depth = 0) {
  const r = R.next();
  if (depth < 2 && r < 0.2) {
    const op = R.pick(["$and", "$or", "$nor"]);
    const list = [];
    for (let i = R.int(1, 3); i > 0; i--) list.push(filter(docs, jsdocs, depth + 1));
    return { [op]: list };
  }
  if (r < 0.26) { const e = exprFilter(docs, jsdocs); if (e) return e; }
  const f = leaf(docs, jsdocs);
  if (R.chance(0.2)) Object.assign(f, leaf(docs, jsdocs));
  if (depth === 0 && R.chance(0.03)) f.$comment = "generated";
  return f;
}

function projection() {
  const r = R.next();
  if (r < 0.4) {
    const p = {};
    for (let i = R.int(1, 3); i > 0; i--) p[R.pick(["a", "b", "c", "d", "a.x", "b.y", "c.x.y"])] = I(1);
    if (R.chance(0.4)) p._id = I(0);
    return dropCollisions(p);
  }
  if (r < 0.8) {
    const p = {};
    for (let i = R.int(1, 2); i > 0; i--) p[R.pick(["a", "b", "c", "d", "a.x", "b.y", "_id"])] = I(0);
    return dropCollisions(p);
  }
  const f = R.pick(TOP);
  const s = R.chance(0.5) ? I(R.int(-3, 3)) : [I(R.int(-3, 3)), I(R.int(1, 3))];
  const p = { [f]: { $slice: s } };
  if (AVOID.SLICE_ALONE || R.chance(0.4)) p[R.pick(TOP.filter((x) => x !== f))] = I(AVOID.SLICE_ALONE ? 1 : R.pick([0, 1]));
  return p;
}
// a path and its prefix ("a" and "a.x") cannot both be projected
function dropCollisions(p) {
  const keys = Object.keys(p);
  for (const k of keys)
    if (keys.some((o) => o !== k && o.startsWith(k + "."))) delete p[k];
  return p;
}

function makeCase() {
  const docs = makeDocs();
  const jsdocs = fromEJSON(docs);
  const c = { docs, filter: filter(docs, jsdocs) };
  if (R.chance(0.4)) {
    const ok = TOP.filter((p) => !AVOID.SORT_ARRAYS || sortable(jsdocs, p));
    if (ok.length) {
      c.sort = {};
      for (let i = R.int(1, 2); i > 0; i--) c.sort[R.pick(ok)] = I(R.pick([1, -1]));
    }
  }
  if (R.chance(0.3)) c.projection = projection();
  if (R.chance(0.2)) c.skip = I(R.int(0, 3));
  if (R.chance(0.3)) c.limit = I(R.int(1, 4));
  return c;
}

const out = [];
for (let i = 0; i < n; i++) {
  const c = makeCase();
  if (autoindex) c.autoindex = true;
  out.push(JSON.stringify(c));
}
process.stdout.write(out.join("\n") + "\n");
