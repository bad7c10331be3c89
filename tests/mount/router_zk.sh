#!/usr/bin/env bash
# router_zk.sh - several routers over one cluster whose config lives in ZooKeeper
# (`docfs router -o zk=...,cluster=...`): its own ZooKeeper, three shard mounts, two routers
# mounted at once with their own local config stores. shardCollection and inserts through
# router 1, counts through router 2 equal; a split made through router 2 seen by router 1;
# a moveChunk through router 1 while router 2 reads and inserts into the moving chunk
# (nothing lost, nothing twice); router 1 killed with -9 and a third router started from an
# empty config store: the whole cluster, same counts; two moveChunks of one chunk at once
# from routers 2 and 3: exactly one succeeds, the documents are on one shard, counts exact;
# the balancer runs in one router at a time.
. "$(dirname "$0")/lib.sh"
for i in 0 1 2; do mkdir -p "$T/s$i" "$T/m$i"; done
mkdir -p "$T/r1" "$T/r2" "$T/r3"
zk_router_cleanup() {
	local rc=$? pids
	zk_stop # first: its kill fails (and ends the trap) once the jobs' kill took the server
	kill $(jobs -p) 2> /dev/null || true
	pids=$(pgrep -f -- "docfs (router .*$T/r[0-9]\$|mount .*$T/m[0-9]\$)" || true)
	for m in "$T/r1" "$T/r2" "$T/r3" "$T/m0" "$T/m1" "$T/m2"; do
		mountpoint -q "$m" && { fusermount3 -u "$m" 2> /dev/null || fusermount3 -uz "$m" || true; }
	done
	for p in $pids; do wait_gone "$p" || true; done
	cleanup "$rc"
}
trap zk_router_cleanup EXIT
zk_start
for i in 0 1 2; do
	"$DOCFS" mount -o "log=$T/log$i,notify_ms=100" "$T/s$i" "$T/m$i"
done
# router N: mounts router N on $T/rN over its own config store $T/cN
router() {
	"$DOCFS" router -o "log=$T/rlog$1,balancer_ms=300,zk=$ZK,cluster=c1" "$T/c$1" "$T/r$1" ||
		fail "router $1 did not start"
	mountpoint -q "$T/r$1" || fail "router $1 is not mounted"
}
# cmd N COMMAND: runs it through router N's /.cluster/command, the reply read back where the
# write ended (bash's builtin echo writes it in one write)
cmd() {
	(
		exec 3<> "$T/r$1/.cluster/command"
		echo "$2" >&3
		cat <&3
	)
}
ok() {
	local out
	out=$(cmd "$1" "$2") || fail "router $1: $2: $out"
	grep -q '"ok": 1.0' <<< "$out" || fail "router $1: $2: not ok: $out"
}
count() { cat "$T/r$1/test/users/query/{}?count=1"; }
shard_count() { cat "$T/m$1/test/users/query/$2?count=1"; }
chunks() { jq -c '[.min.k, .shard]' "$T/r$1/.cluster/chunks" | sort | tr -d '\n'; }

# placement_exact: each shard holds exactly the documents of the chunks it owns (counted
# through router 2 by chunk range, on the shard through its own mount)
placement_exact() {
	local s want lo hi
	for s in 0 1 2; do
		want=0
		while read -r lo hi; do
			want=$((want + $(cat "$T/r2/test/users/query/{k:{\$gte:$lo,\$lt:$hi}}?count=1")))
		done < <(jq -r --arg s "$(tr 012 ABC <<< "$s")" 'select(.shard == $s) | "\(.min.k | if type == "number" then . else -1 end) \(.max.k | if type == "number" then . else 100000 end)"' "$T/r2/.cluster/chunks")
		expect_eq "$(shard_count "$s" '{}')" "$want" "shard $s holds only its chunks' documents"
	done
}

step "two routers mounted at once over the same ZooKeeper cluster (no .router-lock)"
# a cluster made with docfs cluster on a plain config store: its first router on ZooKeeper
# uploads it
names=(A B C)
for i in 0 1 2; do
	"$DOCFS" cluster "$T/c1" "{addShard: '$T/m$i', name: '${names[$i]}'}" > /dev/null || fail "addShard ${names[$i]}"
done
"$DOCFS" cluster "$T/c1" '{balancerStop: 1}' > /dev/null || fail "balancerStop"
router 1
router 2
mkdir "$T/r1/test" "$T/r1/test/users"
ok 1 '{enableSharding: "test", primaryShard: "A"}'
ok 1 '{shardCollection: "test.users", key: {k: 1}}'
ok 1 '{split: "test.users", middle: {k: 500}}'
ok 1 '{moveChunk: "test.users", find: {k: 600}, to: "B"}'
expect_eq "$(jq -r ._id "$T/r2/.cluster/shards" | tr '\n' ' ')" "A B C " "router 2 sees the shards router 1 uploaded"
expect_eq "$(jq -c .mode "$T/r2/.cluster/balancer")" '"off"' "router 2 sees the balancer setting router 1 uploaded"
[ ! -e "$T/c1/.router-lock" ] || fail "a router on ZooKeeper took the local .router-lock"
# docfs cluster refuses a router's cache (its changes would be replaced at the next reload)
if out=$("$DOCFS" cluster "$T/c1" '{split: "test.users", middle: {k: 100}}' 2>&1); then
	fail "docfs cluster changed a router's cache: $out"
fi
grep -q "cache of the cluster config in ZooKeeper" <<< "$out" || fail "docfs cluster on a cache: $out"
expect_eq "$(jq -s length "$T/r1/.cluster/chunks")" 2 "chunks after the refused docfs cluster"

step "inserts through router 1, counts through router 2"
python3 -c '
for i in range(1000): print("{\"_id\": %d, \"k\": %d, \"s\": \"x\"}" % (i, i))' > "$T/docs.jsonl"
mark=$(errors_mark)
cp "$T/docs.jsonl" "$T/r1/test/users/.insert" ||
	fail "insert: $(errors_since "$T/r1/.docfs/errors" "$mark")"
expect_eq "$(count 2)" 1000 "count through router 2"
expect_eq "$(count 1)" 1000 "count through router 1"
expect_eq "$(shard_count 0 '{}')" 500 "shard A holds k < 500"
expect_eq "$(shard_count 1 '{}')" 500 "shard B holds k >= 500"
expect_eq "$(cat "$T/r2/test/users/query/{k:{\$gte:990}}?sort={k:1}&format=ids" | sed "s/\.json//" | tr "\n" " ")" \
	"990 991 992 993 994 995 996 997 998 999 " "a targeted find through router 2"

step "a split through router 2 is seen by router 1"
ok 2 '{split: "test.users", middle: {k: 250}}'
expect_eq "$(chunks 1)" "$(chunks 2)" "both routers' chunk maps"
expect_eq "$(jq -s length "$T/r1/.cluster/chunks")" 3 "router 1's chunk count after router 2's split"

step "moveChunk through router 1 while router 2 reads and inserts into the moving chunk"
(
	n=0
	while [ ! -e "$T/stop_readers" ]; do
		c=$(count 2) || { echo "read failed" > "$T/reader.bad"; break; }
		[ "$c" -ge 1000 ] || echo "count $c" >> "$T/reader.bad"
		n=$((n + 1))
	done
	echo "$n" > "$T/reader.n"
) &
reader=$!
python3 - "$T/r2/test/users/.insert" "$T/stop_writers" "$T/acked" "$T/writer.bad" << 'EOF' &
import os, sys
path, stop, acked, bad = sys.argv[1:]
i = 2000
with open(acked, "w") as log:
    while not os.path.exists(stop):
        try:
            with open(path, "w") as f:  # one document per write, acknowledged at the close
                f.write('{"_id": %d, "k": %d}\n' % (i, 250 + i % 250))
        except OSError as e:
            open(bad, "a").write("insert %d: %s\n" % (i, e))
            break
        log.write("%d\n" % i)
        log.flush()
        i += 1
EOF
writer=$!
for _ in $(seq 100); do [ -s "$T/acked" ] && break; sleep 0.1; done
ok 1 '{moveChunk: "test.users", find: {k: 300}, to: "C"}'
sleep 0.3
touch "$T/stop_writers" "$T/stop_readers"
wait "$writer"
wait "$reader"
[ ! -e "$T/writer.bad" ] || fail "inserts through router 2 failed: $(cat "$T/writer.bad")"
[ ! -e "$T/reader.bad" ] || fail "router 2 read wrong counts during the migration: $(head -n 3 "$T/reader.bad")"
nw=$(wc -l < "$T/acked")
[ "$nw" -gt 0 ] || fail "router 2 inserted nothing during the migration"
echo "router 2 counted $(cat "$T/reader.n") times and inserted $nw documents during the migration"
total=$((1000 + nw))
expect_eq "$(count 2)" "$total" "count after the migration (router 2)"
expect_eq "$(count 1)" "$total" "count after the migration (router 1)"
# every inserted key is in the moved chunk [250, 500): all on C, none left on A
expect_eq "$(shard_count 2 '{}')" "$((250 + nw))" "shard C holds the chunk [250, 500) with router 2's inserts"
expect_eq "$(cat "$T/r2/test/users/query/{_id:{\$gte:2000}}?count=1")" "$nw" "router 2's acknowledged inserts"
expect_eq "$(shard_count 0 '{}')" 250 "shard A holds [MinKey, 250)"
expect_eq "$(chunks 1)" "$(chunks 2)" "both routers' chunk maps after the move"

step "two moveChunks of one chunk at once, from routers 1 and 2: exactly one commits"
cmd 1 '{moveChunk: "test.users", find: {k: 100}, to: "B"}' > "$T/mv1" &
m1=$!
cmd 2 '{moveChunk: "test.users", find: {k: 100}, to: "C"}' > "$T/mv2" &
m2=$!
wait "$m1" "$m2"
oks=$(cat "$T/mv1" "$T/mv2" | grep -c '"ok": 1.0' || true)
expect_eq "$oks" 1 "moveChunks that succeeded ($(cat "$T/mv1" "$T/mv2" | tr -d '\n'))"
echo "the other: $(jq -c 'select(.ok == 0) | [.code, .errmsg]' "$T/mv1" "$T/mv2")"
expect_eq "$(count 1)" "$total" "count after the race (router 1)"
expect_eq "$(count 2)" "$total" "count after the race (router 2)"
in_range='{k:{$lt:250}}'
expect_eq "$(($(shard_count 0 "$in_range") + $(shard_count 1 "$in_range") + $(shard_count 2 "$in_range")))" 250 \
	"documents of [MinKey, 250) on all shards together"
owner=$(jq -r 'select(.max.k == 250) | .shard' "$T/r2/.cluster/chunks")
expect_eq "$(shard_count "$(tr ABC 012 <<< "$owner")" "$in_range")" 250 "documents of [MinKey, 250) on its owner $owner"
expect_eq "$(chunks 1)" "$(chunks 2)" "both routers' chunk maps after the race"

step "a split through router 2 during router 1's moveChunk of the same chunk: never both applied to one chunk"
cmd 1 '{moveChunk: "test.users", find: {k: 600}, to: "A"}' > "$T/mv" &
m1=$!
sleep 0.1
ok 2 '{split: "test.users", middle: {k: 750}}'
wait "$m1"
if grep -q '"ok": 1.0' "$T/mv"; then
	echo "the split came after the migration's commit"
else
	grep -q '"code": 117' "$T/mv" || fail "the moveChunk failed otherwise: $(cat "$T/mv")"
	echo "the migration's commit found the chunk split: $(jq -r .errmsg "$T/mv")"
fi
expect_eq "$(count 1)" "$total" "count after the split race (router 1)"
expect_eq "$(count 2)" "$total" "count after the split race (router 2)"
placement_exact
expect_eq "$(chunks 1)" "$(chunks 2)" "both routers' chunk maps after the split race"

# holder: the routers (of 1 2 3 given) whose /.cluster/balancer says they hold the lock
holders() {
	local r h=""
	for r in "$@"; do
		[ "$(jq '.docfs.holdsLock' "$T/r$r/.cluster/balancer")" = true ] && h="$h$r"
	done
	echo "$h"
}
step "the balancer runs in one router at a time"
ok 2 '{balancerStart: 1}'
sleep 1
h=$(holders 1 2)
[ "${#h}" = 1 ] || fail "routers holding the balancer lock: '$h' (expected exactly one)"
ok 2 '{balancerStop: 1}'
for _ in $(seq 150); do [ -s "$T/r2/.cluster/migrations" ] || break; sleep 0.2; done
[ ! -s "$T/r2/.cluster/migrations" ] || fail "a balancer migration did not end: $(cat "$T/r2/.cluster/migrations")"
expect_eq "$(count 2)" "$total" "count after the balancer's rounds"
placement_exact

step "router 1 killed with -9 in a migration; a third router from an empty config store sees everything"
pid=$(pgrep -f -- "docfs router .*$T/r1\$" | head -n 1)
[ -n "$pid" ] || fail "no router 1 process"
# the chunk holding k: 300 goes to another shard; router 1 dies once the copy shows there
# (between the copy and the commit, or between the commit and the donor's delete)
read -r src lo hi < <(jq -r 'select(.min.k <= 300 and .max.k > 300) | "\(.shard) \(.min.k) \(.max.k)"' "$T/r2/.cluster/chunks")
dst=$([ "$src" = A ] && echo B || echo A)
range="{k:{\$gte:$lo,\$lt:$hi}}"
cmd 1 "{moveChunk: 'test.users', find: {k: 300}, to: '$dst'}" > "$T/mv.killed" 2>&1 &
for _ in $(seq 1000); do
	[ "$(shard_count "$(tr ABC 012 <<< "$dst")" "$range")" -gt 0 ] && break
	sleep 0.01
done
kill -9 "$pid"
wait_gone "$pid" || fail "router 1 survived kill -9"
fusermount3 -uz "$T/r1" 2> /dev/null || true
router 3
expect_eq "$(count 3)" "$total" "count through router 3"
expect_eq "$(count 2)" "$total" "count through router 2"
expect_eq "$(chunks 3)" "$(chunks 2)" "router 3's chunk map"
expect_eq "$(jq -r ._id "$T/r3/.cluster/shards" | tr '\n' ' ')" "A B C " "router 3's shards"

step "router 1's migration is settled by another router, which takes the balancer lock"
# router 1's ephemeral znodes (registration, lock) go with its session, 10 s after the kill
for _ in $(seq 150); do
	[ -s "$T/r3/.cluster/migrations" ] || break
	sleep 0.2
done
[ ! -s "$T/r3/.cluster/migrations" ] || fail "router 1's migration entry stayed: $(cat "$T/r3/.cluster/migrations")"
placement_exact
expect_eq "$(count 3)" "$total" "count after the settlement"
for _ in $(seq 150); do
	h=$(holders 2 3)
	[ -z "$h" ] || break
	sleep 0.2
done
[ "${#h}" = 1 ] || fail "routers holding the balancer lock after router 1 died: '$h' (expected exactly one)"
echo "balancer lock: router $h; router 1's moveChunk: $(tr -d '\n' < "$T/mv.killed"); settled: $(grep -h "interrupted" "$T/rlog2" "$T/rlog3" || echo "nothing to delete")"
echo "PASS"
