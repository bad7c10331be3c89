#!/usr/bin/env bash
# tests/query/diff/agg_run.sh - the aggregation differential test against mingo (meson test
# 'query-agg-mingo'): generates pipelines with a fixed seed, runs them through arun and
# compares with mingo's Aggregator.
#   ARUN=path/to/arun agg_run.sh [--seed S] [--n N]
# Fails (exit 1) when node or mingo is missing: install mingo with
#   npm ci --prefix tests/query/diff
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
	echo "query-agg-mingo: FAILED: node is not installed" >&2
	exit 1
fi
if [ ! -f "$here/node_modules/mingo/package.json" ]; then
	echo "query-agg-mingo: FAILED: mingo is not installed (run: npm ci --prefix tests/query/diff)" >&2
	exit 1
fi
arun=${ARUN:?ARUN must name the arun executable}
tmp=$(mktemp -d /tmp/docfs-aggmingo-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
node "$here/agg_gen.js" "$@" >"$tmp/cases.jsonl"
# arun does not know the generator's "ordered" flag: strip it for the driver
node -e '
const fs = require("fs");
for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n")) {
  if (!l.trim()) continue;
  const c = JSON.parse(l); delete c.ordered; delete c.bucket; process.stdout.write(JSON.stringify(c) + "\n");
}' "$tmp/cases.jsonl" >"$tmp/input.jsonl"
"$arun" "$tmp/input.jsonl" >"$tmp/results.jsonl" 2>"$tmp/stderr"
# arun is silent on stderr: anything there is a sanitizer report (UBSan goes on after one)
if [ -s "$tmp/stderr" ]; then
	echo "query-agg-mingo: FAILED: arun wrote to stderr:" >&2
	head -c 2000 "$tmp/stderr" >&2
	exit 1
fi
node "$here/agg_compare.js" "$tmp/cases.jsonl" "$tmp/results.jsonl" --show "${SHOW:-10}"
