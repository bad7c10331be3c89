#!/usr/bin/env bash
# rs_initsync.sh - a replica set member brought up from nothing: initial sync (a copy of the
# primary's collections, then its change stream; fs/replset/initsync.c) against the
# alternative docfs had before, replaying the primary's whole kept change history event by
# event (what a member with data but no saved position still does). A one-member set with
# BENCH_RS_N documents (20,000) in one collection; member A joins with an empty store
# (initial sync), member B with a store holding one unrelated database (replay). Timed: from
# the member's mount to its holding every document. Prints a Markdown table and the ratio.
# Usage: tests/bench/rs_initsync.sh [path/to/docfs]  (needs ZooKeeper, pymongo, like the
# replica set tests; not in run.sh: it is about replica sets only)
DOCFS=${1:-$(dirname "$0")/../../build/docfs}
DOCFS=$(realpath "$DOCFS")
export DOCFS
. "$(dirname "$0")/../mount/lib.sh"
N=${BENCH_RS_N:-20000}
PY=/usr/bin/python3
bench_cleanup() {
	local rc=$?
	rs_members_down
	zk_stop
	cleanup "$rc"
}
trap bench_cleanup EXIT
zk_start
rs_three
member_up() {
	"$DOCFS" mount -o "log=$T/log$1,listen=${H[$1]},replset=rs0,zk=$ZK" "$T/s$1" "$T/m$1"
}
count() { # count PORT: bench.docs's documents on that member
	"$PY" -c "
import sys, pymongo
c = pymongo.MongoClient('mongodb://127.0.0.1:$1/?directConnection=true', serverSelectionTimeoutMS=3000)
print(c.bench.docs.estimated_document_count())" 2> /dev/null || echo 0
}
# time_to_all I: seconds from member I's mount until it holds the N documents
time_to_all() {
	local t0 n
	t0=$EPOCHREALTIME
	member_up "$1"
	for _ in $(seq 6000); do
		n=$(count "${P[$1]}")
		[ "$n" == "$N" ] && break
		sleep 0.1
	done
	[ "$n" == "$N" ] || fail "member $1 holds $n of $N documents"
	echo "$EPOCHREALTIME - $t0" | bc
}

rs initiate "{_id: 'rs0', members: [{_id: 0, host: '${H[0]}'}], settings: {electionTimeoutMillis: 3000}}" > /dev/null
member_up 0
for _ in $(seq 200); do [ "$(rs status | jq -r '.members[0].stateStr')" == PRIMARY ] && break; sleep 0.1; done
"$PY" - "$P0" "$N" << 'PY' || fail "loading"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
n = int(sys.argv[2])
for k in range(0, n, 1000):
    c.bench.docs.insert_many([{"_id": i, "name": f"user {i}", "n": i, "tags": ["a", "b"]} for i in range(k, min(n, k + 1000))])
PY
# member B's store has data (one unrelated database) and no saved position: it replays
echo '{"_id": 1}' | "$DOCFS" import "$T/s2" other.c - > /dev/null 2>&1 || fail "other.c"
rs add "${H[1]}" > /dev/null
sync_s=$(time_to_all 1)
rs add "${H[2]}" > /dev/null
replay_s=$(time_to_all 2)
grep -q "STARTUP2: initial sync from" "$T/log1" || fail "member A did not sync by copy"
grep -q "STARTUP2" "$T/log2" && fail "member B copied instead of replaying"
echo
echo "| member brought up with $N documents | seconds | documents/s |"
echo "|---|---|---|"
printf '| initial sync (copy, then the stream) | %.2f | %.0f |\n' "$sync_s" "$(echo "$N / $sync_s" | bc -l)"
printf '| replay of the kept change history | %.2f | %.0f |\n' "$replay_s" "$(echo "$N / $replay_s" | bc -l)"
printf '\nratio: replay / initial sync = %.1f\n' "$(echo "$replay_s / $sync_s" | bc -l)"
