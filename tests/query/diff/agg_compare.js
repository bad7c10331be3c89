#!/usr/bin/env node
// agg_compare.js - evaluates each generated aggregate() case with mingo's Aggregator and
// compares with arun's output:
//   node agg_compare.js CASES.jsonl RESULTS.jsonl [--show N]
// A case passes when both sides return the same documents (values compared by type and value,
// object keys in any order: ejson.js norm()), in the same order when the case says its order
// is fixed ("ordered"), as multisets otherwise; or when both reject the pipeline.
"use strict";
const fs = require("fs");
const mingo = require("mingo");
const { fromEJSON, norm } = require("./ejson");

const args = process.argv.slice(2);
let show = 10;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--show") show = Number(args[++i]);
  else files.push(args[i]);
}
if (files.length !== 2) { console.error("usage: agg_compare.js CASES RESULTS [--show N]"); process.exit(2); }
const cases = fs.readFileSync(files[0], "utf8").split("\n").filter((l) => l.trim());
const results = fs.readFileSync(files[1], "utf8").split("\n").filter((l) => l.trim());
if (cases.length !== results.length) {
  console.error(`agg_compare.js: ${cases.length} cases but ${results.length} results`);
  process.exit(1);
}

function oracle(c) {
  const docs = fromEJSON(c.docs);
  const colls = {};
  for (const k of Object.keys(c.colls || {})) colls[k] = fromEJSON(c.colls[k]);
  const agg = new mingo.Aggregator(fromEJSON(c.pipeline), { collectionResolver: (name) => colls[name] || [] });
  let out = agg.run(docs);
  // BUCKET_EMPTY (ORACLE_AGG.md): mingo emits a document for every bucket, MongoDB only for
  // buckets that received a document; the $bucket is the last stage of such a case.
  if (c.bucket) out = out.filter((d) => d.count !== 0 && d.c !== 0);
  return out;
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
    if (wantErr !== null) ok = false;
    else if (c.ordered) ok = got.length === want.length && got.every((g, j) => g === want[j]);
    else {
      const a = [...got].sort(), b = [...want].sort();
      ok = a.length === b.length && a.every((g, j) => g === b[j]);
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
console.log(`query-agg-mingo: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
