#!/usr/bin/env bash
# mongosh.sh - mongosh (npm, pinned in package.json / package-lock.json, installed by
# tests/run.sh with npm ci) runs session.js against `docfs serve` over a Unix socket; what it
# prints must be session.golden, line for line. Then docfs check finds the store sound.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DOCFS=${DOCFS:?DOCFS must name the docfs binary}
MONGOSH=$here/node_modules/.bin/mongosh
if [ ! -x "$MONGOSH" ]; then
	echo "SKIP: mongosh is not installed (npm ci --prefix tests/wire; tests/run.sh does it)"
	exit 77
fi
T=$(mktemp -d /tmp/docfs-mongosh.XXXXXX)
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
# mongosh keeps its history and logs in HOME: a scratch one
HOME=$T timeout 120 "$MONGOSH" "$uri" --quiet --norc --file "$here/session.js" > "$T/session.out" 2> "$T/session.err" ||
	{ echo "FAIL: mongosh failed"; cat "$T/session.out" "$T/session.err"; exit 1; }
if ! diff -u "$here/session.golden" "$T/session.out"; then
	echo "FAIL: mongosh's output differs from session.golden (above)"
	exit 1
fi
kill "$serve"
wait "$serve" || { echo "FAIL: docfs serve exit status $?: $(cat "$T/err")"; exit 1; }
serve=
if grep -q "Sanitizer\|runtime error" "$T/err"; then
	echo "FAIL: sanitizer report from docfs serve:"
	cat "$T/err"
	exit 1
fi
"$DOCFS" check "$T/store" > /dev/null || { echo "FAIL: docfs check"; exit 1; }
echo "mongosh.sh: session.golden matched ($(wc -l < "$here/session.golden") lines)"
