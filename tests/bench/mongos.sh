#!/usr/bin/env bash
# tests/bench/mongos.sh DOCFS [N] - the router as a mongos (`docfs router -o listen=`)
# against the router's own mount, on the same cluster in the same run: three shard mounts,
# the seed scenario's zones on {"user.age": 1}, then (mongos_bench.py) N users inserted in
# batches of 1,000 through PyMongo and, into a twin collection sharded the same way,
# through the router mount's .insert; targeted finds and broadcast counts through each
# (the wire's find / count_documents against reading query/ files); each answer compared.
# Prints a Markdown table of seconds and ratios (wire / mount). Not part of the test suite.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${2:-20000}
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS"
[ -e /dev/fuse ] || die "no /dev/fuse"
/usr/bin/python3 -c 'import pymongo' 2>/dev/null || die "needs Debian's python3-pymongo"
B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-mbench.XXXXXX")
stop() {
	for d in "$B/router" "$B/m0" "$B/m1" "$B/m2"; do
		awk -v d="$d" '$2 == d { f = 1 } END { exit !f }' /proc/mounts &&
			{ fusermount3 -u "$d" 2>/dev/null || fusermount3 -uz "$d" || true; }
	done
	rm -rf "$B"
}
trap stop EXIT
for i in 0 1 2; do
	mkdir -p "$B/s$i" "$B/m$i"
	"$DOCFS" mount -o "log=$B/log$i" "$B/s$i" "$B/m$i"
done
mkdir -p "$B/router"
"$DOCFS" router -o "log=$B/rlog,listen=$B/r.sock" "$B/config" "$B/router"
uri="mongodb://$(echo "$B/r.sock" | sed 's|/|%2F|g')/"
SHARDS="$B/m0,$B/m1,$B/m2" /usr/bin/python3 "$ROOT/tests/bench/mongos_bench.py" "$uri" "$B/router" "$N"
