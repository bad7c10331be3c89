#!/usr/bin/env bash
# router.sh - `docfs router` over three local shard mounts: admin commands through
# /.cluster/command (the reply read back on the same descriptor), the issue's zones on
# user.age, .insert split by owner (per-shard counts checked on the shards themselves),
# listings and counts through the router, targeted explains (SINGLE_SHARD, SHARD_MERGE,
# SHARD_MERGE_SORT with the shards' names), merged sort/skip/limit/projection, count and
# distinct compared with the same data on a plain mount, document reads and sed -i on the
# router, the refusals (no shard key, a shard key change) changing nothing, an unsharded
# collection on the primary, and a shard that goes away: EIO naming it, while queries
# targeting the others still work.
. "$(dirname "$0")/lib.sh"
R=$T/router
CFG=$T/config
mkdir -p "$R"
for i in 0 1 2; do
	mkdir -p "$T/s$i" "$T/m$i"
	"$DOCFS" mount -o "log=$T/log$i,notify_ms=100" "$T/s$i" "$T/m$i"
done
router_cleanup() {
	local rc=$? pids
	touch "$T/stop"
	kill $(jobs -p) 2>/dev/null || true
	wait 2>/dev/null || true
	# the daemons' sanitizer reports are written as they exit: wait for them
	pids=$(pgrep -f -- "docfs (router .*$R\$|mount .*$T/m[0-9]\$)" || true)
	mountpoint -q "$R" && { fusermount3 -u "$R" 2>/dev/null || fusermount3 -uz "$R" || true; }
	for i in 0 1 2; do
		mountpoint -q "$T/m$i" && { fusermount3 -u "$T/m$i" 2>/dev/null || fusermount3 -uz "$T/m$i" || true; }
	done
	for p in $pids; do wait_gone "$p" || true; done
	cleanup "$rc"
}
trap router_cleanup EXIT
names=(A B C)
for i in 0 1 2; do
	"$DOCFS" cluster "$CFG" "{addShard: '$T/m$i', name: '${names[$i]}'}" > /dev/null || fail "addShard ${names[$i]}"
done
# the balancer waits until its own step (balancerStart there)
"$DOCFS" cluster "$CFG" '{balancerStop: 1}' > /dev/null || fail "balancerStop"
"$DOCFS" router -o "log=$T/rlog,balancer_ms=200,chunk_mb=1" "$CFG" "$R" || fail "docfs router did not start"
mountpoint -q "$R" || fail "the router is not mounted"

# cmd COMMAND, ok COMMAND: through the router's /.cluster/command (lib.sh)
cmd() { cluster_cmd "$R" "$1"; }
ok() { cluster_ok "$R" "$1"; }

step "a database and a sharded collection with the issue's zones"
mkdir "$R/test" "$R/test/users"
for i in 0 1 2; do [ -d "$T/m$i/test/users" ] || fail "mkdir did not reach shard $i"; done
ls "$R" | grep -qx test || fail "the router lists no database test: $(ls "$R")"
ok '{enableSharding: "test", primaryShard: "A"}'
ok '{addShardToZone: "A", zone: "junior"}'
ok '{addShardToZone: "B", zone: "middle"}'
ok '{addShardToZone: "C", zone: "senior"}'
ok '{shardCollection: "test.users", key: {"user.age": 1}}'
ok '{updateZoneKeyRange: "test.users", min: {"user.age": MinKey}, max: {"user.age": 21}, zone: "junior"}'
ok '{updateZoneKeyRange: "test.users", min: {"user.age": 21}, max: {"user.age": 41}, zone: "middle"}'
ok '{updateZoneKeyRange: "test.users", min: {"user.age": 41}, max: {"user.age": MaxKey}, zone: "senior"}'
ok '{split: "test.users", middle: {"user.age": 21}}'
ok '{split: "test.users", middle: {"user.age": 41}}'
# the chunks are empty: moving them moves no documents
ok '{moveChunk: "test.users", find: {user: {age: 30}}, to: "B"}'
ok '{moveChunk: "test.users", find: {user: {age: 50}}, to: "C"}'
# bash's way: the reply read back where the write ended (a builtin's >&3 flushes first)
out=$(exec 3<>"$R/.cluster/command"; echo '{balancerStatus: 1}' >&3; cat <&3)
expect_eq "$(jq -c .mode <<<"$out")" '"off"' "a command written with echo >&3 and read with cat <&3"
out=$(cmd '{bogus: 1}') || true
grep -q '"ok": 0.0' <<<"$out" || fail "a bad command is not refused: $out"
expect_eq "$(wc -l < "$R/.cluster/chunks")" "3" "three chunks in /.cluster/chunks"
grep -q '"shard": "C"' "$R/.cluster/chunks" || fail "no chunk on C: $(cat "$R/.cluster/chunks")"
grep -q 'senior' "$R/.cluster/zones" || fail "no zones: $(cat "$R/.cluster/zones")"
grep -q 'Sharding Status' "$R/.cluster/status" || fail "no sh.status() in /.cluster/status"

step ".insert goes to the shard owning each key"
python3 -c '
import json
for i in range(1000):
    print(json.dumps({"_id": i, "name": "u%d" % i, "user": {"age": i % 100, "city": "c%d" % (i % 7)}}))
' > "$T/users.jsonl"
cp "$T/users.jsonl" "$R/test/users/.insert" || fail "insert through the router: $(tail -n1 "$R/.docfs/errors")"
expect_eq "$(cat "$T/m0/test/users/query/{}?count=1")" "210" "shard A holds ages 0-20"
expect_eq "$(cat "$T/m1/test/users/query/{}?count=1")" "200" "shard B holds ages 21-40"
expect_eq "$(cat "$T/m2/test/users/query/{}?count=1")" "590" "shard C holds ages 41-99"
expect_eq "$(ls "$R/test/users" | grep -c '\.json$')" "1000" "the router lists every document once"
expect_eq "$(cat "$R/test/users/query/{}?count=1")" "1000" "count through the router"

# the same documents on a plain mount: the oracle of every merged answer
mount_docfs
mkdir -p "$MNT/test/users"
cp "$T/users.jsonl" "$MNT/test/users/.insert"

step "explain shows the shards a filter targets"
ex() { jq -c "[.queryPlanner.winningPlan.stage, [.queryPlanner.winningPlan.shards[].shardName]]" "$R/test/users/explain/$1"; }
expect_eq "$(ex '{"user.age": {$gt: 25}}')" '["SHARD_MERGE",["B","C"]]' "{\$gt: 25}: two shards"
expect_eq "$(ex '{"user.age": {$gt: 18}}')" '["SHARD_MERGE",["A","B","C"]]' "{\$gt: 18}: all three"
expect_eq "$(ex '{"user.age": 30}')" '["SINGLE_SHARD",["B"]]' "an equality: one shard"
expect_eq "$(ex '{"user.age": {$in: [5, 50]}}?sort={_id: 1}')" '["SHARD_MERGE_SORT",["A","C"]]' "\$in with a sort"
jq -e '.executionStats.nReturned == 740 and (.executionStats.executionStages.shards | length) == 2' \
	"$R/test/users/explain/{\"user.age\": {\$gt: 25}}?verbosity=executionStats" > /dev/null ||
	fail "executionStats across shards: $(cat "$R/test/users/explain/{\"user.age\": {\$gt: 25}}?verbosity=executionStats")"

step "merged finds equal the plain mount's"
# same_at DIR Q: DIR/Q (query/ or aggregate/) reads the same through the router and the plain mount
same_at() {
	local a b
	a=$(cat "$R/test/users/$1/$2") || fail "router: $1/$2: $(tail -n1 "$R/.docfs/errors")"
	b=$(cat "$MNT/test/users/$1/$2") || fail "plain: $1/$2"
	[ "$a" == "$b" ] || fail "$1/$2: the router's answer differs from the plain mount's:
$(diff <(echo "$a") <(echo "$b") | head -20)"
}
same() { same_at query "$1"; }
same '{"user.age": {$gte: 15}}?sort={"user.age": -1, _id: 1}&skip=7&limit=25&projection={name: 1, "user.age": 1}'
same '{"user.age": {$lt: 60}}?sort={name: 1}&limit=10'
same '{"user.city": "c3"}?sort={_id: -1}&format=json'
same '{"user.age": {$gt: 90}}?sort={_id: 1}&format=pretty&limit=3'
same '{"user.age": {$gt: 90}}?sort={_id: 1}&format=ids'
same '{"user.age": {$in: [3, 33, 63]}}?count=1'
same '{}?count=1&skip=100&limit=50'
same '{"user.age": {$gt: 10}}?distinct=user.city'
same '{"user.age": {$lt: 30}}?distinct=user.age'
same '{"user.age": 30}?sort={_id: 1}'
expect_eq "$(cat "$R/test/users/query/{\"user.age\": {\$gt: 25, \$lt: 20}}?count=1")" "0" "a filter no chunk can match"

step "aggregate/ across shards: the plain mount's answers"
same_agg() { same_at aggregate "$1"; }
same_agg '[{$match: {"user.age": {$gte: 10}}}, {$group: {_id: "$user.city", n: {$sum: 1}, c: {$count: {}}, avg: {$avg: "$user.age"}, mn: {$min: "$name"}, mx: {$max: "$user.age"}}}, {$sort: {_id: 1}}]'
same_agg '[{$group: {_id: {$mod: ["$user.age", 3]}, ages: {$push: "$user.age"}}}, {$project: {n: {$size: "$ages"}, s: {$sum: "$ages"}}}, {$sort: {_id: 1}}]'
same_agg '[{$match: {"user.age": {$lt: 50}}}, {$count: "n"}]'
same_agg '[{$sort: {"user.age": -1, _id: 1}}, {$limit: 5}, {$project: {name: 1}}]'
same_agg '[{$match: {"user.age": 30}}, {$project: {name: 1}}, {$sort: {_id: 1}}]'
same_agg '[{$project: {c: "$user.city", a: "$user.age"}}, {$group: {_id: "$c", ages: {$addToSet: "$a"}}}, {$project: {k: {$size: "$ages"}}}, {$sort: {_id: 1}}]?format=json'
jq -e '.queryPlanner' "$R/test/users/explain/{}" > /dev/null || fail "explain after aggregates"
expect_fail "\$lookup across shards" cat "$R/test/users/aggregate/[{\$lookup: {from: \"notes\", localField: \"_id\", foreignField: \"_id\", as: \"x\"}}]"
ls "$T"/m*/test/users/.queries/ 2>/dev/null | grep -q docfs-router && fail "the shards' saved pipelines were left behind"

step "documents: read, sed -i, and the refusals"
expect_eq "$(jq -c '[.name, .user.age]' "$R/test/users/42.json")" '["u42",42]' "a document read through the router"
sed -i 's/"u42"/"forty-two"/' "$R/test/users/42.json" || fail "sed -i through the router: $(tail -n1 "$R/.docfs/errors")"
expect_eq "$(jq -r .name "$T/m2/test/users/42.json")" "forty-two" "sed -i wrote the document on its shard"
expect_eq "$(ls "$T/m0/test/users" "$T/m1/test/users" | grep -c '^42.json$')" "0" "and nowhere else"
echo '{"name": "new", "user": {"age": 25}}' > "$R/test/users/new.json" || fail "a new document file: $(tail -n3 "$R/.docfs/errors")"
[ -e "$T/m1/test/users/new.json" ] || fail "the new document is not on B"
if /usr/bin/printf '{"name": "moved", "user": {"age": 5}}' > "$R/test/users/new.json" 2>/dev/null; then
	fail "a write that changes the shard key was accepted"
fi
expect_eq "$(jq -r .name "$R/test/users/new.json")" "new" "the refused write changed nothing"
nerr=$(errors_mark)
if /usr/bin/printf '{"_id": 5000, "user": {"age": 1}}\n{"_id": 5001, "name": "no key"}\n' > "$R/test/users/.insert" 2>/dev/null; then
	fail "an insert without the shard key was accepted"
fi
errors_since "$R/.docfs/errors" "$nerr" | grep -q "shard key" ||
	fail "no shard key message: $(errors_since "$R/.docfs/errors" "$nerr")"
expect_eq "$(cat "$R/test/users/query/{}?count=1")" "1001" "the refused batch wrote nothing"
rm "$R/test/users/new.json"
[ ! -e "$T/m1/test/users/new.json" ] || fail "rm through the router left the document"

step "update/ and delete/ go to the targeted shards, results summed"
# req DIR PATH BODY: the request on one descriptor, MongoDB's result read back
req() {
	python3 - "$1/test/users/$2" "$3" <<'EOF'
import sys
with open(sys.argv[1], "r+") as f:
    f.write(sys.argv[2])
    f.flush()
    f.seek(0)
    sys.stdout.write(f.read())
EOF
}
for d in "$R" "$MNT"; do
	req "$d" 'update/{"user.age": {$gte: 35, $lt: 45}}?multi=true' '{$set: {flag: 1}}' > "$T/upd.$(basename "$d")" ||
		fail "update through $d: $(tail -n1 "$d/.docfs/errors")"
done
expect_eq "$(jq -c '[.matchedCount, .modifiedCount]' "$T/upd.router")" "$(jq -c '[.matchedCount, .modifiedCount]' "$T/upd.mnt")" "updateMany over two shards: the plain mount's counts"
same '{flag: 1}?sort={_id: 1}&projection={flag: 1, "user.age": 1}'
out=$(exec 3<>"$R/test/users/update/{_id: 7}"; echo '{$set: {name: "seven"}}' >&3; cat <&3) || fail "updateOne by _id: $(tail -n1 "$R/.docfs/errors")"
expect_eq "$(jq -c .matchedCount <<<"$out")" "1" "updateOne by _id finds the one shard"
expect_eq "$(jq -r .name "$R/test/users/7.json")" "seven" "the update by _id"
refuse() { # path body message
	local nerr
	nerr=$(errors_mark)
	if (/usr/bin/printf '%s' "$2" > "$R/test/users/$1") 2>/dev/null; then
		fail "$1 <- $2: accepted"
	fi
	errors_since "$R/.docfs/errors" "$nerr" | grep -qF "$3" ||
		fail "$1: no '$3' in: $(errors_since "$R/.docfs/errors" "$nerr")"
}
refuse 'update/{"user.city": "c1"}' '{$set: {x: 1}}' "must target one shard"
refuse 'update/{_id: 8}' '{$set: {"user.age": 99}}' "would change the shard key field 'user.age'"
refuse 'update/{_id: 8}' '{$inc: {user: 1}}' "would change the shard key field 'user.age'"
refuse 'update/{name: "nobody"}?upsert=true' '{$set: {x: 1}}' "must include the shard key"
ops='{"insertOne": {"document": {"_id": 5001, "name": "b1", "user": {"age": 5}}}}
{"insertOne": {"document": {"_id": 5002, "name": "b2", "user": {"age": 95}}}}
{"updateMany": {"filter": {"user.age": {"$gte": 90}}, "update": {"$set": {"b": 1}}}}
{"deleteOne": {"filter": {"_id": 3}}}
{"replaceOne": {"filter": {"_id": 5001, "user.age": 5}, "replacement": {"name": "b1r", "user": {"age": 5}}}}'
for d in "$R" "$MNT"; do
	req "$d" '.bulk' "$ops" > "$T/bulk.$(basename "$d")" || fail ".bulk through $d: $(tail -n1 "$d/.docfs/errors")"
done
expect_eq "$(cat "$T/bulk.router")" "$(cat "$T/bulk.mnt")" ".bulk across the shards: the plain mount's BulkWriteResult"
same '{b: 1}?sort={_id: 1}&projection={b: 1}'
expect_eq "$(jq -r .name "$T/m0/test/users/5001.json")" "b1r" "the bulk's insert and replacement on A"
refuse '.bulk' '{"insertOne": {"document": {"_id": 5003, "user": {"age": 50}}}}
{"updateOne": {"filter": {"user.city": "c1"}, "update": {"$set": {"x": 1}}}}
{"insertOne": {"document": {"_id": 5004, "user": {"age": 51}}}}' "operation 1: updateOne on a sharded collection must target one shard"
[ -e "$T/m2/test/users/5003.json" ] || fail "the op before the error did not run"
[ ! -e "$T/m2/test/users/5004.json" ] || fail "the op after the error ran"
refuse '.bulk?atomic=true' '{"insertOne": {"document": {"user": {"age": 1}}}}' "cannot span the shards"
expect_fail ".stats of a sharded collection" cat "$R/test/users/.stats"
out=$(req "$R" 'update/{"user.age": 77, name: "upserted"}?upsert=true' '{$set: {flag: 2}}') || fail "an upsert with the shard key: $(tail -n1 "$R/.docfs/errors")"
expect_eq "$(jq -c .upsertedCount <<<"$out")" "1" "an upsert with the shard key"
expect_eq "$(cat "$T/m2/test/users/query/{name: \"upserted\"}?count=1")" "1" "the upserted document is on its shard (C)"
for d in "$R" "$MNT"; do
	req "$d" 'delete/{"user.city": "c6"}' '{}' > "$T/del.$(basename "$d")" || fail "delete through $d: $(tail -n1 "$d/.docfs/errors")"
done
expect_eq "$(jq -c .deletedCount "$T/del.router")" "$(jq -c .deletedCount "$T/del.mnt")" "deleteMany across the shards"
same '{"user.city": "c6"}?count=1'
echo '{}' > "$R/test/users/delete/{name: \"upserted\", \"user.age\": 77}?justOne=true"
expect_eq "$(cat "$T/m2/test/users/query/{name: \"upserted\"}?count=1")" "0" "deleteOne with the shard key"

step "migrations: moveChunk moves the documents while 4 writers insert"
mkdir "$R/test/log"
ok '{shardCollection: "test.log", key: {k: 1}}'
ok '{split: "test.log", middle: {k: 500}}'
python3 -c '
import json
for i in range(1000):
    print(json.dumps({"_id": "seed%d" % i, "k": i}))
' > "$R/test/log/.insert"
writer() { # writer N: inserts until $T/stop exists, noting each acknowledged _id
	local n=0
	while [ ! -e "$T/stop" ] && [ -d "$T" ]; do
		n=$((n + 1))
		if /usr/bin/printf '{"_id": "w%s-%s", "k": %s}\n' "$1" "$n" "$(( (n * 37 + $1 * 101) % 1000 ))" > "$R/test/log/.insert" 2>/dev/null; then
			echo "w$1-$n" >> "$T/acked.$1"
		fi
	done
}
for w in 1 2 3 4; do writer "$w" & done
sleep 0.5
out=$(cmd '{moveChunk: "test.log", find: {k: 700}, to: "B"}')
grep -q '"ok": 1.0' <<<"$out" || fail "moveChunk to B: $out"
echo "   moveChunk to B: $(jq -c '[.millis, .migration]' <<<"$out")"
jq -e '.migration.cloned >= 500' <<<"$out" > /dev/null || fail "moveChunk cloned too little: $out"
out=$(cmd '{moveChunk: "test.log", find: {k: 100}, to: "C"}')
grep -q '"ok": 1.0' <<<"$out" || fail "moveChunk to C: $out"
sleep 0.5
touch "$T/stop"
wait
acked=$(cat "$T"/acked.* | wc -l)
[ "$acked" -gt 20 ] || fail "the writers got only $acked inserts through"
echo "   $acked inserts acknowledged during two migrations"
expect_eq "$(cat "$R/test/log/query/{}?count=1")" "$((1000 + acked))" "every acknowledged insert counted once"
cat "$T/m0/test/log/query/{}?format=ids" "$T/m1/test/log/query/{}?format=ids" "$T/m2/test/log/query/{}?format=ids" | sort > "$T/all"
expect_eq "$(uniq -d "$T/all" | wc -l)" "0" "no document on two shards after the migrations"
expect_eq "$(cat "$T/m0/test/log/query/{}?count=1")" "0" "the source kept no orphans"
expect_eq "$(cat "$T/m1/test/log/query/{k: {\$lt: 500}}?count=1")" "0" "B holds only k >= 500"
expect_eq "$(cat "$T/m2/test/log/query/{k: {\$gte: 500}}?count=1")" "0" "C holds only k < 500"
for f in "$T"/acked.*; do
	while read -r id; do
		grep -qx "$id.json" "$T/all" || fail "acknowledged insert $id is missing"
	done < "$f"
done
out=$(cmd '{moveChunk: "test.log", find: {k: 100}, to: "C"}')
grep -q 'already on shard C' <<<"$out" || fail "a move to the owner is not refused: $out"

step "an unsharded collection lives on the primary"
mkdir "$R/test/notes"
echo '{"_id": "n1", "text": "hello"}' > "$R/test/notes/.insert"
[ -e "$T/m0/test/notes/n1.json" ] || fail "the unsharded collection's document is not on the primary A"
expect_eq "$(cat "$R/test/notes/query/{}?projection={_id: 0}")" '{"text": "hello"}' "a query of an unsharded collection"

step "the balancer evens the chunks out and enforces a zone"
mkdir "$R/test/bal"
ok '{shardCollection: "test.bal", key: {b: 1}}'
for m in 100 200 300 400 500; do ok "{split: \"test.bal\", middle: {b: $m}}"; done
python3 -c '
import json
for i in range(600):
    print(json.dumps({"_id": i, "b": i}))
' > "$R/test/bal/.insert"
per_shard() { jq -r 'select(.ns == "test.bal") | .shard' "$R/.cluster/chunks" | sort | uniq -c | awk '{print $2 $1}' | tr '\n' ' '; }
expect_eq "$(per_shard)" "A6 " "six chunks on the primary before the balancer runs"
ok '{balancerStart: 1}'
for _ in $(seq 150); do
	[ "$(per_shard)" == "A2 B2 C2 " ] && break
	sleep 0.2
done
expect_eq "$(per_shard)" "A2 B2 C2 " "the balancer spread the chunks"
expect_eq "$(cat "$R/test/bal/query/{}?count=1")" "600" "no document lost or doubled by the balancer"
total=0
for i in 0 1 2; do total=$((total + $(cat "$T/m$i/test/bal/query/{}?count=1"))); done
expect_eq "$total" "600" "the shards hold each document once"
ok '{updateZoneKeyRange: "test.bal", min: {b: 0}, max: {b: 150}, zone: "junior"}'
zone_ok() { jq -s -e '[.[] | select(.ns == "test.bal" and (.min.b | type) == "number" and .min.b >= 0 and (.max.b | type) == "number" and .max.b <= 150)] | length >= 2 and all(.shard == "A")' "$R/.cluster/chunks" > /dev/null; }
for _ in $(seq 150); do
	zone_ok && break
	sleep 0.2
done
zone_ok || fail "the balancer did not split at the zone bound and move its chunks to A: $(grep test.bal "$R/.cluster/chunks")"
expect_eq "$(cat "$R/test/bal/query/{b: {\$lt: 150}}?count=1")" "150" "the zone's documents after the moves"
jq -e '.docfs.moves >= 4 and .docfs.splits >= 1' "$R/.cluster/balancer" > /dev/null || fail "balancer figures: $(cat "$R/.cluster/balancer")"
step "the balancer splits a chunk past the chunk size (chunk_mb=1)"
mkdir "$R/test/big"
ok '{shardCollection: "test.big", key: {k: 1}}'
python3 -c '
import json
for i in range(3000):
    print(json.dumps({"_id": i, "k": i, "pad": "x" * 600}))
' > "$R/test/big/.insert"
nbig() { jq -r 'select(.ns == "test.big") | .shard' "$R/.cluster/chunks" | wc -l; }
for _ in $(seq 150); do
	[ "$(nbig)" -ge 2 ] && break
	sleep 0.2
done
[ "$(nbig)" -ge 2 ] || fail "a 1.9 MB chunk was not split at chunk_mb=1: $(grep test.big "$R/.cluster/chunks")"
expect_eq "$(cat "$R/test/big/query/{}?count=1")" "3000" "the split chunk's documents"

step "removeShard drains: the balancer moves the shard's chunks away"
out=$(cmd '{removeShard: "B"}')
grep -q 'draining started successfully' <<<"$out" || fail "removeShard B: $out"
on_b() { jq -r 'select(.ns == "test.bal" and .shard == "B") | .shard' "$R/.cluster/chunks" | wc -l; }
for _ in $(seq 200); do
	[ "$(on_b)" == "0" ] && break
	sleep 0.2
done
expect_eq "$(on_b)" "0" "test.bal's chunks left the draining shard B"
expect_eq "$(cat "$R/test/bal/query/{}?count=1")" "600" "and its documents with them"
expect_eq "$(cat "$T/m1/test/bal/query/{}?count=1")" "0" "B holds none of them"
grep -q 'draining ongoing' <<<"$(cmd '{removeShard: "B"}')" || fail "removeShard B again: not draining ongoing"
ok '{balancerStop: 1}'

step "a shard that is gone: EIO naming it; the other shards still answer"
# a request the kernel still holds can make the unmount busy for a moment: retry, then
# detach (either way the directory stops being a docfs mount)
for _ in $(seq 20); do fusermount3 -u "$T/m2" 2>/dev/null && break; sleep 0.2; done
mountpoint -q "$T/m2" && fusermount3 -uz "$T/m2"
expect_eq "$(cat "$R/test/users/query/{\"user.age\": 30}?count=1")" "$(cat "$MNT/test/users/query/{\"user.age\": 30}?count=1")" "a query targeting B only"
nerr=$(errors_mark)
if cat "$R/test/users/query/{\"user.age\": 50}" > /dev/null 2>&1; then
	fail "a query targeting the missing shard succeeded"
fi
errors_since "$R/.docfs/errors" "$nerr" | grep -q "shard 'C' ($T/m2) is unreachable" ||
	fail "no message naming shard C: $(errors_since "$R/.docfs/errors" "$nerr")"

step "the database's primary shard gone too: what targets B still answers"
for _ in $(seq 20); do fusermount3 -u "$T/m0" 2>/dev/null && break; sleep 0.2; done
mountpoint -q "$T/m0" && fusermount3 -uz "$T/m0"
expect_eq "$(cat "$R/test/users/query/{\"user.age\": 30}?count=1")" "$(cat "$MNT/test/users/query/{\"user.age\": 30}?count=1")" "a query targeting B only, primary A gone"
expect_eq "$(jq -c '[._id, .user.age]' "$R/test/users/query/{\"user.age\": 25}?sort={_id: 1}&limit=1")" \
	"$(jq -c '[._id, .user.age]' "$MNT/test/users/query/{\"user.age\": 25}?sort={_id: 1}&limit=1")" "a find targeting B only"
[ -d "$R/test/users" ] || fail "the collection directory is gone with its primary"
nerr=$(errors_mark)
if cat "$R/test/users/query/{\"user.age\": 10}" > /dev/null 2>&1; then
	fail "a query targeting the missing primary succeeded"
fi
errors_since "$R/.docfs/errors" "$nerr" | grep -q "shard 'A' ($T/m0) is unreachable" ||
	fail "no message naming shard A: $(errors_since "$R/.docfs/errors" "$nerr")"
echo ok
