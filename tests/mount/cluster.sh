#!/usr/bin/env bash
# cluster.sh - `docfs cluster` through a whole scenario, no FUSE mount needed: three shards
# (temp directories), enableSharding, shardCollection (ranged and hashed), zones, splits,
# moveChunk, the balancer's state, removeShard's draining states, sh.status() checked with
# grep, and bad commands failing with a clear message, exit status 1 and no change. The
# shards are three docfs mounts: moveChunk moves their documents (checked on each shard),
# and is refused while a router serves the config.
set -euo pipefail
DOCFS=${DOCFS:?DOCFS must name the docfs binary}
T=$(mktemp -d /tmp/docfs-cluster.XXXXXX)
CFG=$T/config
# three shard mounts: moveChunk moves their documents (the config scenario needs no mount,
# the migrations do)
for i in 0 1 2; do
	mkdir -p "$T/s$i" "$T/m$i"
	"$DOCFS" mount -o "log=$T/log$i" "$T/s$i" "$T/m$i"
	mkdir -p "$T/m$i/test/users" "$T/m$i/test/h"
done
mkdir "$T/r"
cluster_cleanup() {
	for m in "$T/r" "$T/m0" "$T/m1" "$T/m2"; do
		mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" || true; }
	done
	sleep 0.2
	rm -rf "$T"
}
trap cluster_cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# ok COMMAND [grep-pattern]: succeeds, prints "ok": 1.0 (and the pattern)
ok() {
	local out
	out=$("$DOCFS" cluster "$CFG" "$1") || fail "$1: exit status $?: $out"
	grep -q '"ok": 1.0' <<<"$out" || fail "$1: not ok: $out"
	[ -z "${2:-}" ] || grep -q -- "$2" <<<"$out" || fail "$1: no '$2' in: $out"
}

# refused COMMAND PATTERN: exit 1, ok 0 with errmsg matching PATTERN, the config unchanged
refused() {
	local out rc=0 before after
	before=$("$DOCFS" cluster "$CFG" status)
	out=$("$DOCFS" cluster "$CFG" "$1" 2>"$T/err") || rc=$?
	[ "$rc" -eq 1 ] || fail "$1: exit status $rc, want 1: $out"
	grep -q '"ok": 0.0' <<<"$out" || fail "$1: not ok 0: $out"
	grep -q '"codeName"' <<<"$out" || fail "$1: no codeName: $out"
	grep -q -- "$2" <<<"$out" || fail "$1: errmsg does not say '$2': $out"
	grep -q -- "$2" "$T/err" || fail "$1: stderr does not say '$2': $(cat "$T/err")"
	after=$("$DOCFS" cluster "$CFG" status)
	[ "$before" = "$after" ] || fail "$1: a refused command changed the config"
}

ok "{addShard: '$T/m0', name: 'A'}" '"shardAdded": "A"'
ok "{addShard: '$T/m1', name: 'B'}"
ok "{addShard: '$T/m2'}" '"shardAdded": "shard0000"'
refused "{addShard: '$T/nope'}" "is not a directory"
refused "{addShard: '$T/m1'}" "exists already"
ok "{listShards: 1}" '"host": "'"$T"'/m1"'

refused "{shardCollection: 'test.users', key: {'user.age': 1}}" "sharding not enabled for db test"
ok "{enableSharding: 'test'}"
ok "{enableSharding: 'test'}"
refused "{shardCollection: 'test.users', key: {'user.age': -1}}" "unsupported shard key pattern"
refused "{shardCollection: 'test.users', key: {h: 'hashed'}, unique: true}" "cannot be declared unique"
refused "{shardCollection: 'test.users', key: {a: 1}, numInitialChunks: 4}" "numInitialChunks"
ok "{addShardToZone: 'A', zone: 'young'}"
ok "{addShardToZone: 'B', zone: 'mid'}"
ok "{addShardToZone: 'shard0000', zone: 'old'}"
refused "{addShardToZone: 'nobody', zone: 'x'}" "shard nobody does not exist"
# zone ranges before sharding (MongoDB 4.0.2+): checked for shape, then removed again
ok "{updateZoneKeyRange: 'test.early', min: {'user.age': 1}, max: {'user.age': 2}, zone: 'young'}"
refused "{updateZoneKeyRange: 'test.early', min: {a: 1}, max: {b: 2}, zone: 'young'}" "prefix of the shard key"
refused "{updateZoneKeyRange: 'test.early', min: {'user.age': 1}, max: {'user.age': 3}, zone: 'mid'}" "overlapping"
ok "{updateZoneKeyRange: 'test.early', min: {'user.age': 1}, max: {'user.age': 2}, zone: null}"
ok "{shardCollection: 'test.users', key: {'user.age': 1}}" '"collectionsharded": "test.users"'
refused "{shardCollection: 'test.users', key: {'user.age': 1}}" "already enabled"
ok "{updateZoneKeyRange: 'test.users', min: {'user.age': MinKey}, max: {'user.age': 21}, zone: 'young'}"
ok "{updateZoneKeyRange: 'test.users', min: {'user.age': 21}, max: {'user.age': 41}, zone: 'mid'}"
ok "{addTagRange: 'test.users', min: {'user.age': 41}, max: {'user.age': MaxKey}, tag: 'old'}"
refused "{updateZoneKeyRange: 'test.users', min: {'user.age': 30}, max: {'user.age': 50}, zone: 'mid'}" "overlapping"
refused "{updateZoneKeyRange: 'test.users', min: {age: 1}, max: {age: 2}, zone: 'mid'}" "prefix of the shard key"
refused "{updateZoneKeyRange: 'test.users', min: {'user.age': 5}, max: {'user.age': 1}, zone: 'mid'}" "must be below max"
refused "{updateZoneKeyRange: 'test.users', min: {'user.age': 1}, max: {'user.age': 2}, zone: 'nozone'}" "zone nozone does not exist"
refused "{removeShardFromZone: 'A', zone: 'young'}" "still in use"

# the zones' chunks: split at their bounds, each moved to its zone's shard
ok "{split: 'test.users', middle: {'user.age': 21}}"
ok "{split: 'test.users', middle: {'user.age': 41}}"
refused "{split: 'test.users', middle: {'user.age': 41}}" "equals the chunk's min"
refused "{split: 'test.users', middle: {age: 41}}" "not a key of the shard key pattern"
refused "{split: 'test.users', find: {user: {age: 5}}}" "give the split point with middle"
refused "{split: 'test.nothere', middle: {a: 1}}" "is not sharded"
# the documents move with their chunks: 100 users, ages 0-99, all on A (the primary) so far
python3 -c '
import json
for i in range(100):
    print(json.dumps({"_id": i, "name": "u%d" % i, "user": {"age": i}}))
' > "$T/m0/test/users/.insert"
n() { cat "$T/m$1/test/users/query/$2?count=1"; }
ok "{moveChunk: 'test.users', find: {user: {age: 30}}, to: 'B'}" '"cloned": 20'
ok "{moveChunk: 'test.users', find: {user: {age: 50}}, to: 'shard0000'}" '"deletedFromDonor": 59'
[ "$(n 0 '{}') $(n 1 '{}') $(n 2 '{}')" = "21 20 59" ] || fail "the documents per shard after two moveChunks: $(n 0 '{}') $(n 1 '{}') $(n 2 '{}')"
[ "$(n 1 '{"user.age": {$gte: 21, $lt: 41}}')" = 20 ] || fail "B does not hold ages 21-40"
[ "$(jq -r .name "$T/m2/test/users/77.json")" = u77 ] || fail "77.json is not on shard0000"
refused "{moveChunk: 'test.users', find: {user: {age: 50}}, to: 'shard0000'}" "already on shard"
refused "{moveChunk: 'test.users', find: {name: 'x'}, to: 'A'}" "does not contain shard key"
refused "{moveChunk: 'test.users', find: {user: {age: 5}}, to: 'Z'}" "shard Z does not exist"

# a hashed collection: MongoDB's split points of four initial chunks
ok "{shardCollection: 'test.h', key: {_id: 'hashed'}, numInitialChunks: 4}"
ok "{split: 'test.h', find: {_id: 1}}"

ok "{balancerStop: 1}"
ok "{balancerStatus: 1}" '"mode": "off"'
ok "{balancerStart: 1}"
ok "{balancerStatus: 1}" '"mode": "full"'

refused "{frobnicate: 1}" "no such command: 'frobnicate'"
out=$("$DOCFS" cluster "$CFG" '{addShard: ' 2>&1) && fail "a bad document was accepted: $out"
grep -q "line 1" <<<"$out" || fail "a parse error names no position: $out"

status=$("$DOCFS" cluster "$CFG" status)
expect() { grep -qF -- "$1" <<<"$status" || fail "status has no '$1':\n$status"; }
expect "--- Sharding Status ---"
expect '{"_id": "A", "host": "'"$T"'/m0", "state": 1, "tags": ["young"]}'
expect "test.users"
expect 'shard key: {"user.age": 1}'
expect '{"user.age": {"$minKey": 1}} -->> {"user.age": 21} on : A Timestamp(1, 1)'
expect '{"user.age": 21} -->> {"user.age": 41} on : B Timestamp(2, 0)'
expect '{"user.age": 41} -->> {"user.age": {"$maxKey": 1}} on : shard0000 Timestamp(3, 0)'
expect 'tag: mid  {"user.age": 21} -->> {"user.age": 41}'
expect 'shard key: {"_id": "hashed"}'
expect '{"_id": {"$numberLong": "0"}} -->> {"_id": 4611686018427387902} on : '
expect '{"_id": -4611686018427387902} -->> {"_id": {"$numberLong": "0"}} on : '
# split find {_id: 1}: hash 5902408780260971510 is in the last chunk, split at its middle
expect '{"_id": 4611686018427387902} -->> {"_id": 6917529027641081855} on : A Timestamp(1, 4)'
grep -qP '^\s+A\t1$' <<<"$status" || fail "status does not count A's chunks: $status"

# removeShard: started, ongoing while chunks are left, completed once moved away
ok "{removeShard: 'shard0000'}" '"state": "started"'
ok "{removeShard: 'shard0000'}" '"state": "ongoing"'
# a chunk may only go to a shard of its zone (MongoDB's IllegalOperation): B joins "old"
refused "{moveChunk: 'test.users', bounds: [{'user.age': 41}, {'user.age': MaxKey}], to: 'B'}" "B is not in the correct zone old"
ok "{addShardToZone: 'B', zone: 'old'}"
ok "{moveChunk: 'test.users', bounds: [{'user.age': 41}, {'user.age': MaxKey}], to: 'B'}" '"cloned": 59'
[ "$(n 1 '{}') $(n 2 '{}')" = "79 0" ] || fail "the drained shard's documents did not move to B: $(n 1 '{}') $(n 2 '{}')"
ok "{removeShard: 'shard0000'}" '"chunks": {"$numberLong": "1"}'
# hash(-1) = 1140205862565771219: the hashed chunk [0, 4611686018427387902) on shard0000
ok "{moveChunk: 'test.h', find: {_id: -1}, to: 'A'}"
out=$("$DOCFS" cluster "$CFG" "{removeShard: 'shard0000'}")
grep -q '"state": "completed"' <<<"$out" || fail "removeShard did not complete: $out"
ok "{listShards: 1}"
"$DOCFS" cluster "$CFG" '{listShards: 1}' | grep -q shard0000 && fail "shard0000 still listed"
# with a router mounted over the config the CLI does not migrate: the router's writes must
# wait for the critical section, which only the router can make them do
"$DOCFS" router "$CFG" "$T/r" || fail "docfs router did not start"
refused "{moveChunk: 'test.users', find: {user: {age: 5}}, to: 'B'}" "a docfs router is mounted over"
grep -q "ConflictingOperationInProgress" <<<"$("$DOCFS" cluster "$CFG" "{moveChunk: 'test.users', find: {user: {age: 5}}, to: 'B'}" 2>&1)" ||
	fail "the refusal is not ConflictingOperationInProgress"
[ "$(n 0 '{}')" = 21 ] || fail "the refused moveChunk moved documents"
fusermount3 -u "$T/r"
"$DOCFS" check "$CFG" >/dev/null || fail "docfs check finds the config store broken"
echo "cluster.sh: ok"
