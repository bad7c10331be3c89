#!/usr/bin/env node
// update_compare.js - applies each generated update case with mingo's updater and compares
// with urun's output:
//   node update_compare.js CASES.jsonl RESULTS.jsonl [--show N]
// An update that is an array is an update pipeline, given to mingo's updateOne.
// A case passes when both sides produce the same document (values compared by type and value,
// object keys in any order, numbers by value: see ../ORACLE_UPDATE.md) or both reject the
// update.
"use strict";
const fs = require("fs");
const { update } = require("mingo/updater");
const mingo = require("mingo"); // its updateMany has the expression operators pipelines need
const { fromEJSON, norm } = require("./ejson");

const args = process.argv.slice(2);
let show = 10;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--show") show = Number(args[++i]);
  else files.push(args[i]);
}
if (files.length !== 2) { console.error("usage: update_compare.js CASES RESULTS [--show N]"); process.exit(2); }
const cases = fs.readFileSync(files[0], "utf8").split("\n").filter((l) => l.trim());
const results = fs.readFileSync(files[1], "utf8").split("\n").filter((l) => l.trim());
if (cases.length !== results.length) {
  console.error(`update_compare.js: ${cases.length} cases but ${results.length} results`);
  process.exit(1);
}

function oracle(c) {
  const doc = fromEJSON(c.doc);
  if (Array.isArray(c.update)) {
    // an update pipeline: mingo's updateMany over [doc] (its updateOne asserts on a
    // pipeline that only reorders fields: "bug: failed to retrieve modified fields")
    const docs = [doc];
    mingo.updateMany(docs, {}, fromEJSON(c.update), {}, {});
    return docs[0];
  }
  const arrayFilters = c.arrayFilters ? fromEJSON(c.arrayFilters) : undefined;
  const condition = c.filter ? fromEJSON(c.filter) : undefined;
  update(doc, fromEJSON(c.update), arrayFilters, condition, { cloneMode: "deep" });
  return doc;
}

let pass = 0, fail = 0, bothErr = 0;
for (let i = 0; i < cases.length; i++) {
  const c = JSON.parse(cases[i]);
  const r = JSON.parse(results[i]);
  let want, wantErr = null;
  try { want = norm(oracle(c)); } catch (e) { wantErr = e.message; }
  let ok, got;
  if (r.error !== undefined) {
    ok = wantErr !== null;
    got = "error: " + r.error;
    if (ok) bothErr++;
  } else {
    got = norm(fromEJSON(r.ok));
    ok = wantErr === null && got === want;
  }
  if (ok) { pass++; continue; }
  fail++;
  if (fail <= show) {
    console.log(`FAIL case ${i + 1}: ${cases[i]}`);
    console.log(`  mingo: ${wantErr !== null ? "error: " + wantErr : want}`);
    console.log(`  docfs: ${got}`);
  }
}
console.log(`query-update-mingo: ${pass} passed (${bothErr} rejected by both), ${fail} failed`);
process.exit(fail ? 1 : 0);
