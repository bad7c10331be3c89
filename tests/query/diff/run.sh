#!/usr/bin/env bash
# tests/query/diff/run.sh - the differential test against mingo (meson test 'query-mingo'):
# generates cases with a fixed seed, runs them through qrun and compares with mingo.
#   QRUN=path/to/qrun run.sh [--seed S] [--n N]
# Exits 77 (skipped) when node or mingo is missing; the test command installs mingo with
#   npm ci --prefix tests/query/diff
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
	echo "query-mingo: skipped: node is not installed" >&2
	exit 77
fi
if [ ! -f "$here/node_modules/mingo/package.json" ]; then
	echo "query-mingo: skipped: mingo is not installed (run: npm ci --prefix tests/query/diff)" >&2
	exit 77
fi
qrun=${QRUN:?QRUN must name the qrun executable}
tmp=$(mktemp -d /tmp/docfs-mingo-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
node "$here/gen.js" "$@" >"$tmp/cases.jsonl"
"$qrun" "$tmp/cases.jsonl" >"$tmp/results.jsonl"
node "$here/compare.js" "$tmp/cases.jsonl" "$tmp/results.jsonl" --show "${SHOW:-10}"
# the indexed pass: the same cases over qrun's generated indexes, first the planner's choice
# against mingo, then every candidate plan hinted against the collection scan
node "$here/gen.js" "$@" --autoindex >"$tmp/cases_ix.jsonl"
"$qrun" "$tmp/cases_ix.jsonl" >"$tmp/results_ix.jsonl"
node "$here/compare.js" "$tmp/cases_ix.jsonl" "$tmp/results_ix.jsonl" --unordered \
	--show "${SHOW:-10}"
python3 "$here/../indexed.py" --qrun "$qrun" --show "${SHOW:-10}" "$tmp/cases.jsonl"
