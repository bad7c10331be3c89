#!/usr/bin/env bash
# ops.sh - operations under /.docfs/ and the profiler, driven with cat, jq and echo:
# serverStatus counters moved by real reads and writes, currentOp listing a running
# aggregate, killOp stopping it (EINTR, 11601 in /.docfs/errors), maxTimeMS (ETIMEDOUT, 50),
# top's per-namespace totals, <db>/.profile levels, filter and refusals, system.profile
# entries read back through query/, and the slow-query log lines.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/c
mkdir -p "$C"
seq 0 2999 | awk '{printf "{\"_id\":%d,\"a\":%d,\"b\":%d}\n",$1,$1%50,$1%70}' > "$C/.insert"
# A $lookup of every document against the whole collection: seconds of work, the victim.
SLOW='aggregate/[{$lookup:{from:"c",localField:"a",foreignField:"b",as:"x"}},{$count:"n"}]'
ss() { cat "$MNT/.docfs/serverStatus"; }
# close_err PATH TEXT: writes TEXT to PATH and prints what close() said (bash's echo ignores it)
close_err() {
	python3 - "$1" "$2" << 'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, sys.argv[2].encode())
try:
    os.close(fd)
    print("ok")
except OSError as e:
    print(os.strerror(e.errno))
EOF
}

step "serverStatus: shape and counters that real reads and writes move"
S=$(ss)
expect_eq "$(jq -r '.process' <<< "$S")" "docfs" "process"
expect_eq "$(jq '.opcounters.insert' <<< "$S")" "3000" "3000 documents through .insert are 3000 inserts"
expect_eq "$(jq '.metrics.document.inserted' <<< "$S")" "3000" "metrics.document.inserted"
expect_eq "$(jq '.pid' <<< "$S")" "$(daemon_pid)" "pid is the daemon's"
expect_eq "$(jq '[.uptime, .uptimeMillis, .mem.resident, .mem.virtual, .connections.current, .network.bytesIn, .network.numRequests] | map(type == "number") | all' <<< "$S")" "true" "numbers jq reads as numbers"
expect_eq "$(jq '.connections.current >= 1 and .network.bytesIn > 80000 and .ok == 1' <<< "$S")" "true" "the open serverStatus is a connection; the inserted bytes came in"
q0=$(jq '.opcounters.query' <<< "$S")
u0=$(jq '.opcounters.update' <<< "$S")
d0=$(jq '.opcounters.delete' <<< "$S")
i0=$(jq '.opcounters.insert' <<< "$S")
r0=$(jq '.metrics.document.returned' <<< "$S")
expect_eq "$(wc -l < "$C/query/{a:3}")" "60" "a find"
cat "$C/query/{}?limit=5" > /dev/null
cat "$C/query/{b:1}?count=1" > /dev/null
echo '{$set: {seen: true}}' > "$C/update/{_id:7}"
echo '{}' > "$C/delete/{_id:8}"
echo '{"_id": 5000, "a": 1}' > "$C/5000.json"
echo '{"_id": 5000, "a": 2}' > "$C/5000.json"
S=$(ss)
expect_eq "$(jq '.opcounters.query' <<< "$S")" "$((q0 + 3))" "three finds"
expect_eq "$(jq '.opcounters.update' <<< "$S")" "$((u0 + 2))" "an update path and a rewritten document"
expect_eq "$(jq '.opcounters.delete' <<< "$S")" "$((d0 + 1))" "a delete path"
expect_eq "$(jq '.opcounters.insert' <<< "$S")" "$((i0 + 1))" "a new document file"
expect_eq "$(jq '.metrics.document.returned' <<< "$S")" "$((r0 + 60 + 5))" "documents returned (a count returns none)"
expect_eq "$(jq '.opLatencies.reads.ops >= 3 and .opLatencies.writes.ops >= 4 and .metrics.queryExecutor.scannedObjects >= 6000' <<< "$S")" "true" "latencies and documents examined"

step "currentOp lists a running aggregate; killOp stops it with EINTR"
(if cat "$C/$SLOW" > "$T/slow.out" 2> "$T/slow.err"; then echo 0; else echo 1; fi > "$T/slow.rc") &
bg=$!
opid=
for _ in $(seq 1 100); do
	opid=$(jq '[.inprog[] | select(.ns == "shop.c" and .command.aggregate == "c")][0].opid // empty' "$MNT/.docfs/currentOp")
	[ -n "$opid" ] && break
	sleep 0.05
done
[ -n "$opid" ] || fail "the running aggregate never showed in currentOp"
OP=$(jq --argjson id "$opid" '.inprog[] | select(.opid == $id)' "$MNT/.docfs/currentOp")
expect_eq "$(jq -r '[.op, .active, (.secs_running | type), (.microsecs_running | type), .command.pipeline[0]["$lookup"].from, .planSummary] | join(" ")' <<< "$OP")" "command true number number c COLLSCAN" "currentOp's fields"
expect_eq "$(jq '.client_pid > 0' <<< "$OP")" "true" "the client's pid"
expect_eq "$(ss | jq '.globalLock.activeClients.total >= 1')" "true" "an active client in serverStatus"
echo "$opid" > "$MNT/.docfs/killOp"
wait "$bg"
expect_eq "$(cat "$T/slow.rc")" "1" "the killed reader's cat fails"
grep -q "Interrupted system call" "$T/slow.err" || fail "the killed open is not EINTR: $(cat "$T/slow.err")"
grep -q "operation was interrupted (11601 Interrupted): killed by killOp" "$MNT/.docfs/errors" || fail "no 11601 message in /.docfs/errors"
expect_eq "$(jq --argjson id "$opid" '[.inprog[] | select(.opid == $id)] | length' "$MNT/.docfs/currentOp")" "0" "the killed operation is gone from currentOp"
expect_eq "$(ss | jq '.metrics.operation.killed')" "1" "serverStatus counts the kill"
expect_eq "$(close_err "$MNT/.docfs/killOp" 99999)" "Invalid argument" "killOp of an opid that does not run"
grep -q "killOp: no operation 99999 is running" "$MNT/.docfs/errors" || fail "no message for a wrong opid"
expect_eq "$(close_err "$MNT/.docfs/killOp" '{killOp: 1}')" "Invalid argument" "killOp without op"
expect_eq "$(close_err "$MNT/.docfs/killOp" 'abc')" "Invalid argument" "killOp of garbage"
expect_fail "currentOp is read-only" sh -c "echo x > '$MNT/.docfs/currentOp'"

step "currentOp lists an index build with its progress"
seen=""
for n in 100000 300000 900000; do # a bigger collection, a longer build, until it is seen
	mkdir "$MNT/shop/ix$n"
	python3 -c "
import sys
for i in range($n):
    sys.stdout.write('{\"_id\": %d, \"v\": %d}\n' % (i, (i * 7919) % 100003))
" > "$T/ix.jsonl"
	cat "$T/ix.jsonl" > "$MNT/shop/ix$n/.insert" # cat writes a MiB at a time: few commits
	echo '{key: {v: 1}}' > "$MNT/shop/ix$n/.indexes/v_1" &
	build=$!
	while kill -0 "$build" 2>/dev/null; do
		# msg and progress appear with the build's first progress report
		seen=$(jq -c --arg c "ix$n" '[.inprog[] | select(.command.createIndexes == $c and .msg != null) | [.op, (.ns | startswith("shop.ix")), .command.indexes[0].key.v, (.msg | startswith("Index Build: scanning collection")), (.progress.total > 0)]][0] // empty' "$MNT/.docfs/currentOp")
		[ -n "$seen" ] && break
		sleep 0.02
	done
	wait "$build" || fail "the index build failed: $(tail -n1 "$MNT/.docfs/errors")"
	[ -n "$seen" ] && { echo "   seen building over $n documents"; break; }
done
expect_eq "$seen" '["command",true,1,true,true]' "the build in currentOp (createIndexes, msg, progress)"

step "maxTimeMS: ETIMEDOUT and error 50"
if cat "$C/$SLOW?maxTimeMS=100" > /dev/null 2> "$T/mt.err"; then fail "a slow aggregate under maxTimeMS=100 succeeded"; fi
grep -q "Connection timed out" "$T/mt.err" || fail "maxTimeMS is not ETIMEDOUT: $(cat "$T/mt.err")"
grep -q "operation exceeded time limit (50 MaxTimeMSExpired)" "$MNT/.docfs/errors" || fail "no 50 MaxTimeMSExpired message"
expect_eq "$(wc -l < "$C/query/{a:3}?maxTimeMS=60000")" "60" "a find within its maxTimeMS"
expect_eq "$(jq -c . "$C/aggregate/[{\$match:{a:3}},{\$count:\"n\"}]?maxTimeMS=60000")" '{"n":60}' "an aggregate within its maxTimeMS"
expect_fail "maxTimeMS=abc" cat "$C/query/{}?maxTimeMS=abc"
echo '{"filter": {"a": 4}, "maxTimeMS": 60000}' > "$C/.queries/four"
expect_eq "$(wc -l < "$C/query/@four")" "60" "maxTimeMS in a saved query"
expect_eq "$(ss | jq '.metrics.operation.maxTimeMSExpired')" "1" "serverStatus counts the time-out"

step "top: per-namespace totals"
TOP=$(cat "$MNT/.docfs/top")
expect_eq "$(jq -r '.totals.note' <<< "$TOP")" "all times in microseconds" "note"
expect_eq "$(jq '.totals["shop.c"] | .queries.count >= 5 and .insert.count >= 2 and .update.count >= 2 and .remove.count == 1 and .commands.count >= 3 and .total.count == .readLock.count + .writeLock.count and .total.time >= .readLock.time' <<< "$TOP")" "true" "shop.c's columns add up"

step "the profiler: <db>/.profile"
expect_eq "$(jq -c . "$MNT/shop/.profile")" '{"was":0,"slowms":100,"sampleRate":1,"ok":1}' "the defaults"
echo '{"key": {"a": 1}}' > "$C/.indexes/a_1"
echo 2 > "$MNT/shop/.profile"
expect_eq "$(jq .was "$MNT/shop/.profile")" "2" "level 2"
expect_eq "$(wc -l < "$C/query/{a:7}?sort={b:1}")" "60" "a profiled find"
expect_eq "$(wc -l < "$C/query/{b:{\$gt:60}}")" "$(( 3000 / 70 * 9 + (3000 % 70 > 61 ? 3000 % 70 - 61 : 0) ))" "a profiled collection scan"
P=$MNT/shop/system.profile
[ -d "$P" ] || fail "no system.profile collection"
E=$(cat "$P/query/{ns:\"shop.c\",\"command.filter.a\":7}")
expect_eq "$(jq -r '[.op, .ns, .command.find, .command.sort.b, .keysExamined, .docsExamined, .nreturned, .hasSortStage, .planSummary] | join(" ")' <<< "$E")" "query shop.c c 1 60 60 60 true IXSCAN { a: 1 }" "the entry of the indexed find"
expect_eq "$(jq '(.millis | type) == "number" and .responseLength > 0 and (.ts | has("$date"))' <<< "$E")" "true" "millis, responseLength, ts"
expect_eq "$(jq -r '.planSummary' "$P/query/{nreturned:378}")" "COLLSCAN" "the scan's planSummary"
echo '{$inc: {n: 1}}' > "$C/update/{a:9}?multi=true"
expect_eq "$(jq -r '[.op, .nMatched, .nModified, .command.updates[0].multi] | join(" ")' "$P/query/{op:\"update\"}")" "update 60 60 true" "an update's entry"
expect_eq "$(jq -c '[.capped, .maxSize]' "$P/.stats")" '[true,1048576]' "system.profile is a 1 MB capped collection"
n=$(cat "$P/query/{}?count=1")
cat "$P/query/{}" > /dev/null
expect_eq "$(cat "$P/query/{}?count=1")" "$n" "reading system.profile does not profile itself"
if grep -q system.profile "$MNT/shop/.changes"; then fail "system.profile writes show in the change stream"; fi

step "level 1 with slowms and a filter"
echo '{level: 1, slowms: 100000}' > "$MNT/shop/.profile"
n=$(cat "$P/query/{}?count=1")
cat "$C/query/{a:1}" > /dev/null
expect_eq "$(cat "$P/query/{}?count=1")" "$n" "a fast find is not profiled at level 1"
echo '{filter: {op: "remove"}}' > "$MNT/shop/.profile"
expect_eq "$(jq -c '.filter' "$MNT/shop/.profile")" '{"op":"remove"}' "the filter reads back"
cat "$C/query/{a:2}" > /dev/null
echo '{}' > "$C/delete/{_id:9}"
expect_eq "$(cat "$P/query/{}?count=1")" "$((n + 1))" "only the filter's operations"
expect_eq "$(jq -r '.command.delete' "$P/query/{op:\"remove\"}")" "c" "the delete's entry"
echo '{filter: "unset"}' > "$MNT/shop/.profile"
expect_eq "$(jq 'has("filter")' "$MNT/shop/.profile")" "false" "filter unset"
cp "$MNT/shop/.profile" "$T/profile.before"
expect_eq "$(close_err "$MNT/shop/.profile" 5)" "Invalid argument" "level 5"
expect_eq "$(close_err "$MNT/shop/.profile" '{sampleRate: 2}')" "Invalid argument" "sampleRate 2"
expect_eq "$(close_err "$MNT/shop/.profile" '{level: 2, slowmz: 1}')" "Invalid argument" "an unknown field"
expect_eq "$(close_err "$MNT/shop/.profile" '{filter: {a: {$bogus: 1}}}')" "Invalid argument" "a bad filter"
grep -q "unknown field 'slowmz'" "$MNT/.docfs/errors" || fail "no message for an unknown field"
cmp -s "$MNT/shop/.profile" "$T/profile.before" || fail "a refused write changed the settings"

step "slow-query log lines"
echo '{level: 0, slowms: 0}' > "$MNT/shop/.profile"
cat "$C/query/{a:11}" > /dev/null
L=$(grep '"msg":"Slow query"' "$T/log" | grep '"a": 11' | tail -n1)
[ -n "$L" ] || fail "no slow-query line for the find"
expect_eq "$(jq -r '[.id, .c, .attr.ns, .attr.command.find, .attr.nreturned, .attr.planSummary, (.attr.durationMillis | type), (.attr.reslen > 0)] | join(" ")' <<< "$L")" "51803 COMMAND shop.c c 60 IXSCAN { a: 1 } number true" "the line's fields"
echo '{slowms: 100}' > "$MNT/shop/.profile"
echo "ops.sh: ok"
