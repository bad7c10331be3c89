#!/usr/bin/env node
// tests/bench/query_mingo.js - the mingo side of tests/bench/query.sh:
//   node query_mingo.js USERS.jsonl Q2_OUT
// Loads USERS.jsonl (the docfs export of the collection: one Extended JSON document per line)
// into memory (not timed), then for each query runs it once untimed (warm-up) and times the
// second run with process.hrtime.bigint():
//   Q1       new Query(Q1).find(docs).all()                       (all matching documents)
//   Q1count  new Query(Q1).find(docs).all().length                (mingo 7's cursor has no count)
//   Q2       new Query(Q2).find(docs).sort(S).limit(10).all()
// Prints shell assignments (LOAD_S, Q1_S, Q1_N, Q1C_S, Q1C_N, Q2_S, N) on stdout; writes the
// Q2 result to Q2_OUT as "age<TAB>last<TAB>_id" lines. _id {"$oid": hex} becomes the hex string
// (hex order is ObjectId byte order), so that the sort can end on _id ascending like docfs's
// tie-break; dates stay {"$date": "..."} objects (Q1 and Q2 do not touch them).
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
const { Query } = mingo;

const [file, q2out] = process.argv.slice(2);
if (!file || !q2out) {
  console.error("usage: query_mingo.js USERS.jsonl Q2_OUT");
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

const Q1 = { "user.address.city": "Beijing", "user.age": { $gt: 60 } };
const Q2 = { "user.gender": "female" };
const S2 = { "user.age": -1, "user.name.last": 1, _id: 1 };

const q1 = () => new Query(Q1).find(docs).all();
const q1c = () => new Query(Q1).find(docs).all().length;
const q2 = () => new Query(Q2).find(docs).sort(S2).limit(10).all();

function timed(fn) {
  fn(); // warm-up, untimed
  const t = process.hrtime.bigint();
  const r = fn();
  return [secs(t), r];
}

const [q1s, r1] = timed(q1);
const [q1cs, n1c] = timed(q1c);
const [q2s, r2] = timed(q2);
fs.writeFileSync(q2out, r2.map((d) => `${d.user.age}\t${d.user.name.last}\t${d._id}\n`).join(""));
console.log(`N=${docs.length}`);
console.log(`LOAD_S=${loadS}`);
console.log(`Q1_S=${q1s}`);
console.log(`Q1_N=${r1.length}`);
console.log(`Q1C_S=${q1cs}`);
console.log(`Q1C_N=${n1c}`);
console.log(`Q2_S=${q2s}`);
