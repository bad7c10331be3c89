#!/usr/bin/env bash
# tests/query/diff/update_run.sh - the differential test of the update engine against mingo
# (meson test 'query-update-mingo'): generates update cases with a fixed seed, applies them
# with urun and compares with mingo's updater.
#   URUN=path/to/urun update_run.sh [--seed S] [--n N]      (defaults: seed 1, 6000 cases)
# Fails (exit 1, never skips) when node or mingo is missing: install mingo with
#   npm ci --prefix tests/query/diff
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
	echo "query-update-mingo: FAILED: node is not installed" >&2
	exit 1
fi
if [ ! -f "$here/node_modules/mingo/package.json" ]; then
	echo "query-update-mingo: FAILED: mingo is not installed (run: npm ci --prefix tests/query/diff)" >&2
	exit 1
fi
urun=${URUN:?URUN must name the urun executable}
tmp=$(mktemp -d /tmp/docfs-umingo-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
node "$here/update_gen.js" "$@" >"$tmp/cases.jsonl"
"$urun" "$tmp/cases.jsonl" >"$tmp/results.jsonl"
node "$here/update_compare.js" "$tmp/cases.jsonl" "$tmp/results.jsonl" --show "${SHOW:-10}"
