#!/usr/bin/env bash
# unified.sh - MongoDB's unified-format CRUD spec tests (SPECS, default
# ../shared/third_party/specs/crud-unified beside the repository, read in place) run by
# unified.js on the Node.js driver (npm `mongodb`, pinned in package.json, installed by
# tests/run.sh with npm ci) against `docfs serve` on a temp store and a Unix socket.
# MIN_PASS is the share of runnable tests that must pass (README lists every failure);
# then docfs check finds the store sound.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DOCFS=${DOCFS:?DOCFS must name the docfs binary}
# The specs are read where the workplace keeps third-party suites: beside the repository
# (../shared), or /work/shared for a clone made elsewhere (CI clones to a temporary place).
if [ -z "${SPECS:-}" ]; then
	for d in "$here/../../../shared" /work/shared; do
		if [ -d "$d/third_party/specs/crud-unified" ]; then
			SPECS=$d/third_party/specs/crud-unified
			break
		fi
	done
fi
MIN_PASS=${MIN_PASS:-100}
if ! command -v node >/dev/null || [ ! -f "$here/node_modules/mongodb/package.json" ]; then
	if [ -n "${CI:-}" ]; then
		echo "FAIL: node or the mongodb driver is not installed (tests/run.sh installs them)"
		exit 1
	fi
	echo "SKIP: node or the mongodb driver is not installed (npm ci --prefix tests/wire; tests/run.sh does it)"
	exit 77
fi
if [ -z "${SPECS:-}" ] || [ ! -d "$SPECS" ]; then
	# an input from outside the project, not one of its dependencies: said, not hidden
	echo "SKIP: MongoDB's unified CRUD spec tests are not here (../shared/third_party/specs" \
		"beside the repository, /work/shared, or SPECS=DIR)"
	exit 77
fi
T=$(mktemp -d /tmp/docfs-unified.XXXXXX)
serve=
cleanup() {
	local rc=$?
	[ -z "$serve" ] || kill "$serve" 2>/dev/null || true
	[ -z "$serve" ] || wait "$serve" 2>/dev/null || true
	rm -rf "$T"
	exit $rc
}
trap cleanup EXIT
mkdir "$T/store"
"$DOCFS" serve "$T/store" --listen "$T/s.sock" --log "$T/log" > "$T/out" 2> "$T/err" &
serve=$!
for _ in $(seq 1 100); do [ -S "$T/s.sock" ] && break; sleep 0.1; done
[ -S "$T/s.sock" ] || { echo "FAIL: docfs serve did not start: $(cat "$T/err")"; exit 1; }
uri="mongodb://$(echo "$T/s.sock" | sed 's|/|%2F|g')/"
rc=0
timeout 600 node "$here/unified.js" "$uri" "$SPECS" "$MIN_PASS" || rc=$?
kill "$serve"
wait "$serve" || { echo "FAIL: docfs serve exit status $?: $(cat "$T/err")"; exit 1; }
serve=
if grep -q "Sanitizer\|runtime error" "$T/err"; then
	echo "FAIL: sanitizer report from docfs serve:"
	cat "$T/err"
	exit 1
fi
"$DOCFS" check "$T/store" > /dev/null || { echo "FAIL: docfs check"; exit 1; }
exit $rc
