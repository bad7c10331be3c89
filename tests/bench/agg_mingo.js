#!/usr/bin/env node
// tests/bench/agg_mingo.js - the mingo side of tests/bench/agg.sh:
//   node agg_mingo.js USERS.jsonl OUT_PREFIX A1_JSON A2_JSON
// Loads USERS.jsonl (the docfs export of the collection: one Extended JSON document per line)
// into memory (not timed), then runs each pipeline once untimed (warm-up) and times the second
// run of new Aggregator(pipeline).run(docs) with process.hrtime.bigint(). The pipelines are
// given as strict JSON (the same stages docfs runs). Prints shell assignments (N, LOAD_S, A1_S,
// A2_S) on stdout; writes each result to OUT_PREFIX.a1 / .a2 as "_id<TAB>count<TAB>avg" lines
// (the comparison form of agg.sh: count is the field n or "-"; agg.sh rounds avg).
// mingo is found through NODE_PATH (tests/query/diff/node_modules) or next to this tree.
"use strict";
const fs = require("fs");
const path = require("path");
let mingo;
try {
  mingo = require("mingo");
} catch (e) {
  mingo = require(path.join(__dirname, "..", "query", "diff", "node_modules", "mingo"));
}
const { Aggregator } = mingo;

const [file, outPrefix, a1, a2] = process.argv.slice(2);
if (!file || !outPrefix || !a1 || !a2) {
  console.error("usage: agg_mingo.js USERS.jsonl OUT_PREFIX A1_JSON A2_JSON");
  process.exit(2);
}

const secs = (t0) => (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(3);

let t0 = process.hrtime.bigint();
const docs = [];
for (const line of fs.readFileSync(file, "utf8").split("\n")) {
  if (!line) continue;
  const d = JSON.parse(line);
  if (d._id && typeof d._id === "object" && typeof d._id.$oid === "string") d._id = d._id.$oid;
  docs.push(d);
}
const loadS = secs(t0);

function timed(pipeline) {
  new Aggregator(pipeline).run(docs); // warm-up, untimed
  const t = process.hrtime.bigint();
  const r = new Aggregator(pipeline).run(docs);
  return [secs(t), r];
}

const lines = (r) =>
  r.map((d) => `${d._id}\t${d.n === undefined ? "-" : d.n}\t${d.avgAge}\n`).join("");

const [s1, r1] = timed(JSON.parse(a1));
const [s2, r2] = timed(JSON.parse(a2));
fs.writeFileSync(`${outPrefix}.a1`, lines(r1));
fs.writeFileSync(`${outPrefix}.a2`, lines(r2));
console.log(`N=${docs.length}`);
console.log(`LOAD_S=${loadS}`);
console.log(`A1_S=${s1}`);
console.log(`A2_S=${s2}`);
