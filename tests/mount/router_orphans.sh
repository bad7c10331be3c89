#!/usr/bin/env bash
# router_orphans.sh - a router killed (kill -9) in the middle of a moveChunk: at its restart
# the migration log (config.migrations) is settled by the range deleter, so no shard keeps
# documents of a range it does not own: killed while copying (the recipient's partial copy
# goes), and killed after the commit while the donor was still deleting (the donor's rest
# goes) when the poll catches that window. Checked on the shards' own mounts: each holds
# exactly the documents of its chunks, the router's count and a plain count agree, a later
# moveChunk of the same range succeeds, and no log entry is left.
. "$(dirname "$0")/lib.sh"
R=$T/router
CFG=$T/config
N=20000
mkdir -p "$R"
for i in 0 1; do
	mkdir -p "$T/s$i" "$T/m$i"
	"$DOCFS" mount -o "log=$T/log$i,notify_ms=100" "$T/s$i" "$T/m$i"
done
orphans_cleanup() {
	local rc=$? pids
	kill $(jobs -p) 2>/dev/null || true
	wait 2>/dev/null || true
	pids=$(pgrep -f -- "docfs (router .*$R\$|mount .*$T/m[0-9]\$)" || true)
	mountpoint -q "$R" && { fusermount3 -u "$R" 2>/dev/null || fusermount3 -uz "$R" || true; }
	grep -q " $R fuse" /proc/mounts && fusermount3 -uz "$R" 2>/dev/null
	for i in 0 1; do
		mountpoint -q "$T/m$i" && { fusermount3 -u "$T/m$i" 2>/dev/null || fusermount3 -uz "$T/m$i" || true; }
	done
	for p in $pids; do wait_gone "$p" || true; done
	cleanup "$rc"
}
trap orphans_cleanup EXIT
"$DOCFS" cluster "$CFG" "{addShard: '$T/m0', name: 'A'}" > /dev/null || fail "addShard A"
"$DOCFS" cluster "$CFG" "{addShard: '$T/m1', name: 'B'}" > /dev/null || fail "addShard B"
"$DOCFS" cluster "$CFG" '{balancerStop: 1}' > /dev/null || fail "balancerStop"
start_router() {
	"$DOCFS" router -o "log=$T/rlog,balancer_ms=200" "$CFG" "$R" || fail "docfs router did not start"
	mountpoint -q "$R" || fail "the router is not mounted"
}
start_router
# cmd COMMAND, ok COMMAND: through the router's /.cluster/command (lib.sh)
cmd() { cluster_cmd "$R" "$1"; }
ok() { cluster_ok "$R" "$1"; }
count() { cat "$1/test/c/query/{}?count=1"; }
# owner: the shard owning the chunk from x 5000 up
owner() { jq -r 'select(.ns == "test.c" and .min.x == 5000) | .shard' "$R/.cluster/chunks"; }

mkdir "$R/test" "$R/test/c"
ok '{enableSharding: "test", primaryShard: "A"}'
ok '{shardCollection: "test.c", key: {x: 1}}'
ok '{split: "test.c", middle: {x: 5000}}'
python3 -c "
import json
for i in range($N):
    print(json.dumps({'_id': i, 'x': i, 'pad': 'p' * 200}))
" > "$T/docs.jsonl"
cp "$T/docs.jsonl" "$R/test/c/.insert" || fail "insert through the router"
expect_eq "$(count "$T/m0")" "$N" "every document on A"

# settled WHAT: waits (up to 60 s) until each shard holds exactly its chunks' documents
settled() {
	local want_a want_b a b
	for _ in $(seq 300); do
		if [ "$(owner)" == "A" ]; then want_a=$N want_b=0; else want_a=5000 want_b=$((N - 5000)); fi
		a=$(count "$T/m0") b=$(count "$T/m1")
		[ "$a" == "$want_a" ] && [ "$b" == "$want_b" ] && return 0
		sleep 0.2
	done
	fail "$1: A holds $a (wants $want_a), B holds $b (wants $want_b), chunk owner $(owner)"
}

# kill_router_when CONDITION: runs the moveChunk of [5000, MaxKey) to the shard not owning
# it, kills the router with -9 once CONDITION (a shell function) is true, then restarts it.
kill_router_when() {
	local to pid
	to=$([ "$(owner)" == "A" ] && echo B || echo A)
	pid=$(pgrep -f -- "docfs router .*$R\$")
	cmd "{moveChunk: 'test.c', find: {x: 6000}, to: '$to'}" > "$T/move.out" 2>&1 &
	for _ in $(seq 2000); do
		"$1" "$to" && break
		sleep 0.01
	done
	kill -9 "$pid"
	wait 2>/dev/null || true
	wait_gone "$pid" || fail "the router did not die"
	fusermount3 -uz "$R" 2>/dev/null || true
	echo "   killed: A holds $(count "$T/m0"), B holds $(count "$T/m1")"
	start_router
}
copying() { # the recipient has part of the copy, the donor still owns the range
	local n
	n=$(count "$T/m$([ "$1" == A ] && echo 0 || echo 1)" 2>/dev/null) || return 1
	[ "$n" -gt 0 ] && [ "$n" -lt $((N - 5000)) ]
}
committed() { # the recipient owns the range now
	[ "$(owner 2>/dev/null)" == "$1" ]
}

step "killed while copying: the recipient's partial copy goes at the restart"
kill_router_when copying
grep -q '"ok": 1.0' "$T/move.out" && fail "the moveChunk finished before the kill: $(cat "$T/move.out")"
expect_eq "$(owner)" "A" "the chunk stays on A"
settled "after a kill while copying"
grep -q "orphan documents of its range deleted from B" "$T/rlog" ||
	fail "no log line of the recovery: $(tail -n 5 "$T/rlog")"
expect_eq "$(count "$R")" "$N" "the router's count"

step "a later moveChunk of the same range succeeds"
ok "{moveChunk: 'test.c', find: {x: 6000}, to: 'B'}"
settled "after the second moveChunk"
expect_eq "$(owner)" "B" "the chunk moved to B"

step "killed after the commit: whatever the donor kept goes at the restart"
kill_router_when committed
settled "after a kill at the commit"
expect_eq "$(count "$R")" "$N" "the router's count"
expect_eq "$(jq -s 'map(._id) | sort == [range(0; '"$N"')]' <(cat "$R/test/c/query/{}"))" "true" "every _id once through the router"

step "killed again while copying, then the balancer gives B another chunk: counts stay right"
kill_router_when copying
settled "after the third kill"
ok '{split: "test.c", middle: {x: 2500}}'
ok "{moveChunk: 'test.c', find: {x: 100}, to: '$( [ "$(owner)" == A ] && echo B || echo A)'}"
expect_eq "$(count "$R")" "$N" "the router's count with chunks on both shards"
expect_eq "$(( $(count "$T/m0") + $(count "$T/m1") ))" "$N" "the shards' own counts add up"
"$DOCFS" check "$T/s1" > "$T/check1" 2>&1 || fail "docfs check of B: $(cat "$T/check1")"
echo ok
