#!/usr/bin/env bash
# mongos.sh - `docfs router -o listen=` as a mongos: three shard mounts and a router serving
# a Unix socket; mongosh runs the seed scenario verbatim (mongos_session.js) and what it
# prints, temp paths and random ids masked, must be mongos.golden line for line (the
# explain of {user.age: {$gt: 25}} naming shard02 and shard03, sh.status()); the documents
# are checked on the shards' own mounts; then PyMongo's CRUD through the router
# (mongos_pymongo.py). Everything is unmounted in the trap.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../mount/lib.sh"
MONGOSH=$here/node_modules/.bin/mongosh
if [ ! -x "$MONGOSH" ]; then
	echo "SKIP: mongosh is not installed (npm ci --prefix tests/wire; tests/run.sh does it)"
	exit 77
fi
R=$T/router
CFG=$T/config
SOCK=$T/r.sock
mkdir -p "$R"
# mounted DIR: in /proc/mounts (a daemon that died leaves its mount there, which
# mountpoint -q no longer sees)
mounted() { awk -v d="$1" '$2 == d { f = 1 } END { exit !f }' /proc/mounts; }
mongos_cleanup() {
	local rc=$? pids
	pids=$(pgrep -f -- "docfs (router .*$R\$|mount .*$T/m[0-9]\$)" || true)
	for d in "$R" "$T/m0" "$T/m1" "$T/m2"; do
		mounted "$d" && { fusermount3 -u "$d" 2>/dev/null || fusermount3 -uz "$d" || true; }
	done
	for p in $pids; do wait_gone "$p" || true; done
	cleanup "$rc"
}
trap mongos_cleanup EXIT
for i in 0 1 2; do
	mkdir -p "$T/s$i" "$T/m$i"
	"$DOCFS" mount -o "log=$T/log$i,notify_ms=100" "$T/s$i" "$T/m$i"
done
"$DOCFS" router -o "log=$T/rlog,balancer_ms=200,listen=$SOCK" "$CFG" "$R" ||
	fail "docfs router did not start"
mountpoint -q "$R" || fail "the router is not mounted"
[ -S "$SOCK" ] || fail "the router does not listen on $SOCK"
uri="mongodb://$(echo "$SOCK" | sed 's|/|%2F|g')/"

step "the seed scenario in mongosh"
SHARDS="$T/m0,$T/m1,$T/m2" HOME=$T timeout 120 "$MONGOSH" "$uri" --quiet --norc \
	--file "$here/mongos_session.js" > "$T/session.raw" 2> "$T/session.err" ||
	{ cat "$T/session.raw" "$T/session.err"; fail "mongosh failed"; }
# sh.status() fills its balancer block from parallel queries: its lines come in any order
sed -e "s|$T|<T>|g" -e "s|ObjectId('[0-9a-f]*')|ObjectId(<id>)|g" \
	-e "s|UUID('[0-9a-f-]*')|UUID(<uuid>)|g" "$T/session.raw" |
	awk '/^balancer$/ { b = 1 } b && /^  / { sub(/,$/, ""); fflush(); print | "sort"; next }
	     b && /^}$/ { close("sort"); b = 0 } { print }' > "$T/session.out"
diff -u "$here/mongos.golden" "$T/session.out" || fail "mongosh's output differs from mongos.golden (above)"

step "the documents are where the chunks say, on the shards' own mounts"
count() { cat "$T/m$1/test/users/query/$2?count=1"; }
expect_eq "$(count 0 '{}')" 20 "shard01 holds ages 0-19"
expect_eq "$(count 1 '{}')" 20 "shard02 holds ages 21-40"
expect_eq "$(count 2 '{}')" 60 "shard03 holds 20 and 41-99"
expect_eq "$(count 2 '{"user.age": 20}')" 1 "user 20 moved to shard03"
for i in 0 1 2; do
	expect_eq "$(echo $(ls "$T/m$i/test/users/.indexes"))" "user.age_1" "the key's index on shard m$i (_id_ is there unlisted)"
done
expect_eq "$(cat "$R/test/users/query/{}?count=1")" 100 "the router mount sees what the wire wrote"

step "PyMongo through the router"
SHARDS="$T/m0,$T/m1,$T/m2" /usr/bin/python3 "$here/mongos_pymongo.py" "$uri" ||
	fail "mongos_pymongo.py failed"
echo "mongos.sh: passed"
