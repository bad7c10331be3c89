#!/usr/bin/env node
// agg_gen.js - generates random aggregate() cases for the differential test against mingo, as
// JSON Lines of canonical Extended JSON (the arun input format):
//   node agg_gen.js [--seed S] [--n N] > cases.jsonl      (defaults: seed 1, 5000 cases)
// Each case: 1-10 documents (int _ids in ascending order, so natural order is _id order) and a
// chain of 1-4 random stages over what mingo supports: $match $project $addFields/$set $unset
// $group $sort $limit $skip $unwind $count $sortByCount $lookup $replaceRoot/$replaceWith
// $bucket $facet, with expressions of every family. A case also says whether its result order
// is fixed ("ordered"); agg_compare.js compares unordered results as multisets.
//
// The generator tracks the kind of every field of the current documents (always a number, a
// string, an array of numbers, a date, a document, or "any": possibly null or missing) and
// builds expressions only from fields whose kind the expression expects, so that a case
// tests semantics both sides document instead of error paths. Shapes where mingo departs
// from MongoDB are avoided under a named flag (AVOID below), each listed in ../ORACLE_AGG.md.
"use strict";
const { rng: makeRng } = require("./ejson");

const AVOID = {
  NUMERIC_TYPES: true,        // no int64/decimal values; int vs double is not compared (JS has one number type)
  TYPE_OF_NUMBERS: true,      // $type never applied to a number (mingo says "int" for 2.0)
  PUSH_MISSING: true,         // $push/$first/$last only over fields present in every document
  GROUP_DOC_KEYS: true,       // group keys and sort keys are scalars (mingo ignores field order in document keys)
  MOD_NULL: true,             // arithmetic only on fields that hold numbers (mingo's $mod throws on null)
  EXPR_CROSS_TYPE: true,      // expression comparisons only between numbers (mingo: "x" > 3 is false)
  ARRAY_TO_OBJECT_LIST: true, // $arrayToObject's operand is an expression, never a literal argument list
  SUM_PRECISION: true,        // no sums over inexact doubles ($avg results are carried, never added up again)
  LOOKUP_ARRAYS: true,        // $lookup localField never names an array (mingo adds an undefined per unmatched element)
  EMPTY_COUNT: true,          // no $count over a possibly empty input (mingo returns [{n: 0}])
  BUCKET_EMPTY: true,         // $bucket only as the last stage; agg_compare.js drops mingo's empty buckets
  TRUNC_ONE_ARG: true,        // $trunc always as [number, place] (mingo rejects the one-argument form)
  SUBSTR_PAST_END: true,      // $substrBytes stays inside its string (mingo throws past the end; MongoDB clamps)
  BUCKET_BOUNDS: true,        // $bucket boundaries no value can equal (mingo puts a value equal to a bound in the bucket below)
};

const args = process.argv.slice(2);
let seed = 1, n = 5000;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--seed") seed = Number(args[++i]);
  else if (args[i] === "--n") n = Number(args[++i]);
  else { console.error("usage: agg_gen.js [--seed S] [--n N]"); process.exit(2); }
}
const R = makeRng(seed);
// A second stream for the field names with '.' and '$' (below), so that adding them left
// every other generated case as it was.
const R2 = makeRng(seed * 7919 + 27);

const I = (v) => ({ $numberInt: String(v) });
const Dbl = (v) => ({ $numberDouble: Number.isInteger(v) ? v.toFixed(1) : String(v) });
const DateV = (ms) => ({ $date: { $numberLong: String(ms) } });
const STRS = ["a", "b", "ab", "xyz", "", "B", "ba"];
const DATES = [0, 86400000, 1577836800000, 1609459200000 + 3723004, 1615734566535];

function num() { return R.chance(0.7) ? I(R.int(-5, 12)) : Dbl(R.int(-10, 20) + R.pick([0.5, 0.25, 0.75])); }
function numArr() { const k = R.int(0, 4); const a = []; for (let i = 0; i < k; i++) a.push(I(R.int(-3, 9))); return a; }

function makeDoc(id) {
  const d = { _id: I(id), n: I(R.int(-5, 12)), m: num(), s: R.pick(STRS), arr: numArr(), dt: DateV(R.pick(DATES)),
    dd: { x: I(R.int(0, 5)), y: R.pick(STRS) } };
  const a = R.int(0, 5);
  if (a <= 2) d.a = I(R.int(0, 4)); else if (a === 3) d.a = null;
  const b = R.int(0, 4);
  if (b <= 2) d.b = R.pick(["x", "y", "z"]); else if (b === 3) d.b = null;
  const c = R.int(0, 5);
  if (c <= 2) d.c = numArr(); else if (c === 3) d.c = null; else if (c === 4 && R.chance(0.5)) d.c = I(R.int(0, 3));
  d.k = I(R.int(0, 6));
  return d;
}

// ---- expressions: [expr, kind] over fields of the given kinds ----
function fieldOf(F, kind) {
  const fs = Object.keys(F).filter((f) => F[f] === kind);
  return fs.length ? "$" + R.pick(fs) : null;
}
function numExpr(F, depth) {
  const f = fieldOf(F, "num");
  const leaf = () => (f && R.chance(0.7) ? f : I(R.int(-4, 9)));
  if (depth > 1 || !f) return leaf();
  const x = () => numExpr(F, depth + 1);
  switch (R.int(0, 17)) {
    case 0: return { $add: [x(), x()] };
    case 1: return { $subtract: [x(), x()] };
    case 2: return { $multiply: [x(), x()] };
    case 3: return { $divide: [x(), R.pick([I(2), I(4), I(-2), Dbl(0.5)])] };
    case 4: return { $mod: [x(), R.pick([I(2), I(3), I(-4)])] };
    case 5: return { $abs: x() };
    case 6: return { $ceil: x() };
    case 7: return { $floor: x() };
    case 8: return { $trunc: [x(), I(0)] }; // TRUNC_ONE_ARG
    case 9: return { $max: [x(), x()] };
    case 10: return { $min: [x(), x(), x()] };
    case 11: return { $cond: [boolExpr(F, depth + 1), x(), x()] };
    case 12: return { $size: fieldOf(F, "arr") || { $literal: [] } };
    case 13: return { $strLenBytes: fieldOf(F, "str") || "abc" };
    case 14: { const d = fieldOf(F, "date"); return d ? { [R.pick(["$year", "$month", "$dayOfMonth", "$hour", "$minute", "$dayOfWeek", "$dayOfYear", "$second", "$millisecond"])]: d } : leaf(); }
    case 15: return R.pick([{ $sum: [x(), x()] }, { $let: { vars: { v: x() }, in: { $add: ["$$v", x()] } } },
      { $indexOfArray: [fieldOf(F, "arr") || [I(1)], x()] }, { $strcasecmp: [fieldOf(F, "str") || "a", R.pick(STRS)] },
      { $indexOfBytes: [fieldOf(F, "str") || "abc", R.pick(["a", "b", "x"])] },
      { $convert: { input: x(), to: R.pick(["int", "long", "double"]) } }, { $toInt: { $toString: x() } }]);
    case 16: { const a = fieldOf(F, "arr"); return a ? { $reduce: { input: a, initialValue: I(0), in: { $add: ["$$value", "$$this"] } } } : leaf(); }
    default: return { $ifNull: [F.a === "any" ? "$a" : x(), x()] }; // EXPR_CROSS_TYPE: a holds numbers or null
  }
}
function boolExpr(F, depth) {
  const x = () => numExpr(F, depth + 1);
  switch (R.int(0, 7)) {
    case 0: return { $eq: [x(), x()] };
    case 1: return { $gt: [x(), x()] };
    case 2: return { $lte: [x(), x()] };
    case 3: return { $and: [boolExpr(F, depth + 2), boolExpr(F, depth + 2)] };
    case 4: return { $or: [boolExpr(F, depth + 2), boolExpr(F, depth + 2)] };
    case 5: return { $not: [boolExpr(F, depth + 2)] };
    case 6: { const a = fieldOf(F, "arr"); return a ? { $in: [x(), a] } : { $ne: [x(), x()] }; }
    default: {
      const s = fieldOf(F, "str");
      if (!s) return { $gte: [x(), x()] };
      return R.pick([{ $eq: [s, R.pick(STRS)] }, { $regexMatch: { input: s, regex: R.pick(["^a", "b$", "^$", "y"]) } },
        { $regexMatch: { input: s, regex: "^A", options: "i" } }, { $toBool: x() }, { $isNumber: R.pick([s, x()]) },
        { $isArray: fieldOf(F, "arr") || s }]);
    }
  }
}
function strExpr(F) {
  const s = fieldOf(F, "str") || "abc";
  switch (R.int(0, 8)) {
    case 0: return { $concat: [s, "-", R.pick(STRS)] };
    case 1: return { $toUpper: s };
    case 2: return { $toLower: s };
    case 3: return { $substrBytes: [{ $concat: [s, "xyz"] }, I(R.int(0, 2)), I(R.int(0, 1))] }; // SUBSTR_PAST_END
    case 4: { const d = fieldOf(F, "date"); return d ? { $dateToString: { format: R.pick(["%Y-%m-%d", "%H:%M:%S", "%Y%j", "%d/%m %L"]), date: d } } : s; }
    case 5: return { $toString: numExpr(F, 2) };
    case 6: return { $type: R.pick([s, fieldOf(F, "arr") || s, fieldOf(F, "date") || s, fieldOf(F, "doc") || s]) };
    case 7: return R.pick([{ $switch: { branches: [{ case: boolExpr(F, 2), then: "one" }, { case: boolExpr(F, 2), then: s }], default: "none" } },
      { $trim: { input: { $concat: ["  ", s, " "] } } }, { $ltrim: { input: s, chars: "ab" } }, { $rtrim: { input: { $concat: [s, "xx"] }, chars: "x" } },
      { $convert: { input: numExpr(F, 2), to: "string" } }]);
    default: return { $cond: { if: boolExpr(F, 2), then: s, else: { $literal: "$lit" } } };
  }
}
function arrExpr(F) {
  const a = fieldOf(F, "arr");
  // every array built here holds numbers only (EXPR_CROSS_TYPE: $filter/$in compare elements)
  if (!a) return [numExpr(F, 1), numExpr(F, 2)];
  switch (R.int(0, 8)) {
    case 0: return { $filter: { input: a, as: "v", cond: { $gt: ["$$v", I(R.int(-2, 6))] } } };
    case 1: return { $map: { input: a, in: { $multiply: ["$$this", I(2)] } } };
    case 2: return { $slice: [a, I(R.int(-3, 3) || 1)] };
    case 3: return { $reverseArray: a };
    case 4: return { $concatArrays: [a, [numExpr(F, 2)]] };
    case 5: return { $range: [I(0), I(R.int(0, 5)), I(R.int(1, 2))] };
    case 6: return { $map: { input: { $split: [fieldOf(F, "str") || "a,b", R.pick(["a", "b", ","])] }, in: { $strLenBytes: "$$this" } } };
    case 7: return R.pick([{ $filter: { input: a, cond: { $eq: [{ $mod: ["$$this", I(2)] }, I(0)] }, limit: I(1) } },
      { $map: { input: { $objectToArray: { $arrayToObject: { $concatArrays: [[["p", { $size: a }]], [["q", I(2)]]] } } }, in: "$$this.v" } } /* ARRAY_TO_OBJECT_LIST */]);
    default: return [numExpr(F, 1), { $strLenBytes: fieldOf(F, "str") || "q" }];
  }
}
function anyExpr(F) {
  switch (R.int(0, 9)) {
    case 0: case 1: case 2: return [numExpr(F, 0), "num"];
    case 3: return [boolExpr(F, 0), "bool"];
    case 4: case 5: return [strExpr(F), "str"];
    case 6: return [arrExpr(F), "arr"];
    case 7: { const d = fieldOf(F, "doc"); return d ? [{ $mergeObjects: [d, { z: numExpr(F, 1) }] }, "doc"] : [numExpr(F, 0), "num"]; }
    case 8: { const a = fieldOf(F, "arr"); return a ? [{ $arrayElemAt: [a, I(0)] }, "any"] : [strExpr(F), "str"]; }
    default: { const d = fieldOf(F, "doc"); return d ? [{ $objectToArray: d }, "objarr"] : [numExpr(F, 0), "num"]; }
  }
}

// ---- stages ----
const NEWF = ["p", "q", "r"];
function matchStage(F) {
  const nf = fieldOf(F, "num"), sf = fieldOf(F, "str");
  const opts = [];
  if (nf) opts.push(() => ({ [nf.slice(1)]: { [R.pick(["$gt", "$gte", "$lt", "$lte", "$ne"])]: I(R.int(-3, 8)) } }));
  if (sf) opts.push(() => ({ [sf.slice(1)]: { $in: [R.pick(STRS), R.pick(STRS)] } }));
  if (nf) opts.push(() => ({ $expr: boolExpr(F, 0) }));
  if (F.b === "any") opts.push(() => ({ b: R.pick(["x", null]) }));
  if (!opts.length) return { $match: {} };
  return { $match: R.pick(opts)() };
}
function sortSpec(F, st) {
  const keys = Object.keys(F).filter((f) => F[f] === "num" || F[f] === "str" || F[f] === "date" || (F[f] === "any" && f !== "c"));
  const spec = {};
  const k = R.int(1, 2);
  for (let i = 0; i < k && keys.length; i++) spec[R.pick(keys)] = R.pick([I(1), I(-1)]);
  // MongoDB leaves the order of ties unspecified: a sort fixes the order only when it ends
  // with a unique field (_id, while it is unique); otherwise the result is compared as a set.
  if (F._id === "num" || F._id === "str") {
    if (st.idUnique !== false) { spec._id = I(1); st.fixed = true; } else st.fixed = false;
  } else st.fixed = false;
  return spec;
}

function genPipeline(F, st, depth) {
  const out = [];
  const nstages = R.int(1, depth ? 2 : 4);
  for (let i = 0; i < nstages && !st.done; i++) {
    const kinds = ["match", "project", "addFields", "group", "sort", "limit", "skip", "unwind", "count", "sortByCount",
      "unset", "bucket", "replaceRoot", "lookup", "facet"];
    const k = R.pick(kinds);
    switch (k) {
      case "match": out.push(matchStage(F)); st.maybeEmpty = true; break;
      case "project": {
        const spec = {}; const nf = {};
        const keep = Object.keys(F).filter((f) => f !== "_id" && R.chance(0.4));
        for (const f of keep) { spec[f] = I(1); nf[f] = F[f]; }
        if (F._id !== undefined) { if (R.chance(0.2)) spec._id = I(0); else nf._id = F._id; }
        const c = R.int(keep.length ? 0 : 1, 2);
        for (let j = 0; j < c; j++) {
          let [e, kind] = anyExpr(F);
          // in $project a bare number or boolean means inclusion, not a value
          if (typeof e === "boolean" || (e && (e.$numberInt !== undefined || e.$numberDouble !== undefined))) e = { $literal: e };
          spec[NEWF[j]] = e; nf[NEWF[j]] = kind;
        }
        if (!Object.keys(spec).length || (Object.keys(spec).length === 1 && spec._id)) { spec.n1 = { $literal: I(1) }; nf.n1 = "num"; }
        out.push({ $project: spec });
        for (const f of Object.keys(F)) delete F[f];
        Object.assign(F, nf);
        break;
      }
      case "addFields": {
        const spec = {}; const c = R.int(1, 2);
        const added = {};
        for (let j = 0; j < c; j++) { const [e, kind] = anyExpr(F); const name = R.chance(0.3) && fieldOf(F, "num") ? fieldOf(F, "num").slice(1) : NEWF[j]; spec[name] = e; added[name] = kind; }
        if (spec._id) { delete spec._id; delete added._id; }
        if (!Object.keys(spec).length) break;
        out.push({ [R.pick(["$addFields", "$set"])]: spec });
        Object.assign(F, added);
        break;
      }
      case "unset": {
        const fs = Object.keys(F).filter((f) => f !== "_id");
        if (fs.length < 2) break;
        const f = R.pick(fs);
        out.push({ $unset: R.chance(0.5) ? f : [f] });
        delete F[f];
        break;
      }
      case "group": {
        const keyOpts = [["$k", "num"], [null, "null"]];
        if (F.b === "any") keyOpts.push(["$b", "key"]);
        if (F.a === "any") keyOpts.push(["$a", "key"]);
        const nf0 = fieldOf(F, "num"); if (nf0) keyOpts.push([{ $mod: [nf0, I(3)] }, "num"]);
        const sf0 = fieldOf(F, "str"); if (sf0) keyOpts.push([sf0, "str"]);
        if (F.k !== "num") keyOpts.splice(0, 1);
        const [key, kk] = R.pick(keyOpts);
        const spec = { _id: key }; const nf = { _id: kk === "null" ? "null" : kk === "num" ? "num" : kk === "str" ? "str" : "any" };
        const nfld = fieldOf(F, "num");
        const accs = [["cnt", { $sum: I(1) }, "num"], ["cnt2", { $count: {} }, "num"]];
        if (nfld) accs.push(["tot", { $sum: nfld }, "num"], ["avg", { $avg: nfld }, "fnum" /* SUM_PRECISION: not reused in arithmetic */], ["mn", { $min: nfld }, "num"],
          ["mx", { $max: nfld }, "num"], ["ex", { $sum: { $multiply: [nfld, I(2)] } }, "num"]);
        // $push/$first/$last see the documents in input order: only when that order is fixed
        if (nfld && st.ordered) accs.push(["all", { $push: nfld }, "arr"], ["fst", { $first: nfld }, "num"], ["lst", { $last: nfld }, "num"]);
        if (F.a === "any") accs.push(["sa", { $sum: "$a" }, "num"], ["ma", { $max: "$a" }, "any"]);
        const c = R.int(1, 3);
        for (let j = 0; j < c; j++) { const [name, e, kind] = R.pick(accs); spec[name] = e; nf[name] = kind; }
        out.push({ $group: spec });
        for (const f of Object.keys(F)) delete F[f];
        Object.assign(F, nf);
        st.ordered = false; st.idUnique = true;
        break;
      }
      case "sort": {
        const spec = sortSpec(F, st);
        if (!spec || !Object.keys(spec).length) break;
        out.push({ $sort: spec });
        st.ordered = st.fixed;
        break;
      }
      case "limit": if (st.ordered) out.push({ $limit: I(R.int(1, 5)) }); break;
      case "skip": if (st.ordered) { out.push({ $skip: I(R.int(0, 4)) }); st.maybeEmpty = true; } break;
      case "unwind": {
        if (F.c === "any" || F.c === "arr") {
          const opts = R.int(0, 3);
          if (opts === 0) out.push({ $unwind: "$c" });
          else out.push({ $unwind: Object.assign({ path: "$c" }, opts & 1 ? { preserveNullAndEmptyArrays: true } : {}, opts & 2 ? { includeArrayIndex: "idx" } : {}) });
          if (opts & 2) F.idx = "any";
          if (!(opts & 1)) st.maybeEmpty = true;
          F.c = "any"; st.idUnique = false;
        } else if (F.arr === "arr") {
          st.idUnique = false;
          out.push({ $unwind: "$arr" });
          st.maybeEmpty = true;
          F.arr = "num";
        }
        break;
      }
      case "count":
        if (st.maybeEmpty) break; // EMPTY_COUNT
        out.push({ $count: "total" });
        for (const f of Object.keys(F)) delete F[f];
        F.total = "num"; st.ordered = true; st.maybeEmptyCount = true;
        break;
      case "sortByCount": {
        const key = F.b === "any" ? "$b" : fieldOf(F, "str");
        if (!key) break;
        out.push({ $sortByCount: key });
        for (const f of Object.keys(F)) delete F[f];
        F._id = "any"; F.count = "num"; st.ordered = false; st.idUnique = true;
        break;
      }
      case "bucket": {
        const nf0 = fieldOf(F, "num");
        if (!nf0) break;
        const b = { groupBy: nf0, boundaries: [Dbl(-10.1), Dbl(-0.1), Dbl(4.9), Dbl(100.1)], default: "other" };
        if (R.chance(0.5)) b.output = { c: { $sum: I(1) }, t: { $sum: nf0 } };
        out.push({ $bucket: b });
        for (const f of Object.keys(F)) delete F[f];
        F._id = "any"; F.count = "num"; if (b.output) { delete F.count; F.c = "num"; F.t = "num"; }
        st.ordered = false; st.done = true; st.bucket = true; // BUCKET_EMPTY
        break;
      }
      case "replaceRoot": {
        const d = fieldOf(F, "doc");
        if (!d) break;
        out.push(R.chance(0.5) ? { $replaceRoot: { newRoot: d } } : { $replaceWith: { $mergeObjects: [d, { w: I(1) }] } });
        for (const f of Object.keys(F)) delete F[f];
        F.x = "num"; F.y = "str";
        if (out[out.length - 1].$replaceWith) F.w = "num";
        break;
      }
      case "lookup": {
        if (F.k !== "num" || F.a !== "any" || depth) break;
        out.push({ $lookup: { from: "o", localField: R.pick(["k", "a"]) /* LOOKUP_ARRAYS */, foreignField: "k", as: "j" } });
        F.j = "docarr";
        break;
      }
      case "facet": {
        if (depth) break;
        const f1 = JSON.parse(JSON.stringify(F)), f2 = JSON.parse(JSON.stringify(F));
        const s1 = { ordered: st.ordered, maybeEmpty: st.maybeEmpty, idUnique: st.idUnique }, s2 = { ordered: st.ordered, maybeEmpty: st.maybeEmpty, idUnique: st.idUnique };
        const p1 = genPipeline(f1, s1, 1), p2 = genPipeline(f2, s2, 1);
        // a facet's arrays are compared in order: each sub-pipeline must fix its order
        if (!s1.ordered) p1.push({ $sort: { _id: I(1) } });
        if (!s2.ordered) p2.push({ $sort: { _id: I(1) } });
        if ((!s1.ordered && (!["num", "str"].includes(f1._id) || s1.idUnique === false)) ||
            (!s2.ordered && (!["num", "str"].includes(f2._id) || s2.idUnique === false))) break;
        if (s1.bucket || s2.bucket) break;
        out.push({ $facet: { one: p1, two: p2 } });
        for (const f of Object.keys(F)) delete F[f];
        F.one = "docarr"; F.two = "docarr"; st.ordered = true; st.done = true;
        break;
      }
    }
  }
  return out;
}

for (let i = 0; i < n; i++) {
  const nd = R.int(0, 10);
  const docs = [];
  for (let j = 1; j <= nd; j++) docs.push(makeDoc(j));
  const other = [];
  for (let j = 1; j <= R.int(0, 4); j++) other.push({ _id: I(100 + j), k: I(R.int(0, 6)), v: R.pick(STRS) });
  const F = { _id: "num", n: "num", m: "num", s: "str", arr: "arr", dt: "date", dd: "doc", a: "any", b: "any", c: "any", k: "num" };
  const st = { ordered: true, maybeEmpty: nd === 0 };
  let pipeline = genPipeline(F, st, 0);
  if (!pipeline.length) pipeline = [matchStage(F)];
  if (R2.chance(0.3)) {
    // MongoDB 5.0+ field names: fields named "x.y" and "$z" (and "p.q" in dd), read and
    // written with $getField, $setField and $unsetField in a last $addFields
    for (const d of docs) {
      if (R2.chance(0.7)) d["x.y"] = I(R2.int(0, 5));
      if (R2.chance(0.7)) d["$z"] = R2.pick(STRS);
      if (R2.chance(0.5)) d.dd["p.q"] = I(R2.int(0, 3));
    }
    const name = () => { const f = R2.pick(["x.y", "$z", "p.q", "x", "y", "n", "nope"]); return f[0] === "$" ? { $literal: f } : f; };
    // (not a field that may be missing: mingo gives missing where the manual says null)
    const input = () => R2.pick(["$$ROOT", "$$CURRENT"]);
    const spec = {};
    spec.gf = R2.chance(0.3) ? { $getField: name() } : { $getField: { field: name(), input: input() } };
    if (R2.chance(0.6)) spec.sf = { $setField: { field: name(), input: input(), value: R2.chance(0.2) ? "$$REMOVE" : I(R2.int(0, 9)) } };
    if (R2.chance(0.4)) spec.uf = { $unsetField: { field: name(), input: input() } };
    pipeline.push({ $addFields: spec });
  }
  const c = { docs, colls: { o: other }, pipeline, ordered: st.ordered };
  if (st.bucket) c.bucket = true;
  process.stdout.write(JSON.stringify(c) + "\n");
}
