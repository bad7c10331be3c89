#!/usr/bin/env bash
# replset_sync.sh - initial sync (fs/replset/initsync.c): a one-member set loaded with data
# (two databases, an empty collection with a validator, a capped collection, unique, text,
# TTL, hashed, partial and sparse indexes) gets a second member with an empty store, which
# copies everything; a third is added (`docfs rs ... add`) while a writer inserts and
# updates, goes through STARTUP2 and reaches SECONDARY; every member's dbHash of every
# database, its collections' options and its indexes are then equal. A wiped member copies
# everything again; a member whose resume token the primary trimmed (changes-keep) drops
# what it had and copies again.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import pymongo' 2> /dev/null || { echo "SKIP: no pymongo"; exit 77; }
WPID=
sync_cleanup() {
	local rc=$?
	[ -z "$WPID" ] || kill "$WPID" 2> /dev/null || true
	rs_members_down
	zk_stop
	cleanup "$rc"
}
trap sync_cleanup EXIT
zk_start
rs_three

member_down() {
	local pid
	pid=$(pgrep -f -- "docfs mount .*$T/s$1 $T/m$1" | head -n1)
	fusermount3 -u "$T/m$1" || fail "unmount member $1"
	wait_gone "$pid" || fail "member $1's daemon did not end"
}
# summary PORT: per database (but local): dbHash's collections and md5, and per collection
# its listCollections options and its indexes (name and spec without "v")
summary() {
	"$PY" - "$1" << 'PY'
import sys, pymongo
from bson import json_util
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true", serverSelectionTimeoutMS=5000)
out = {}
for db in sorted(c.list_database_names()):
    if db == "local":
        continue
    h = c[db].command("dbHash")
    colls = {}
    for info in c[db].list_collections():
        ix = sorted(json_util.dumps({k: v for k, v in i.items() if k != "v"}, sort_keys=True)
                    for i in c[db][info["name"]].list_indexes())
        colls[info["name"]] = {"options": info.get("options", {}), "indexes": ix}
    out[db] = {"md5": h["md5"], "hashes": h["collections"], "colls": colls}
print(json_util.dumps(out, sort_keys=True))
PY
}
same_as_0() { # same_as_0 I...: members' summaries equal member 0's
	local first
	first=$(summary "$P0") || return 1
	for i in "$@"; do [ "$(summary "${P[$i]}")" == "$first" ] || return 1; done
}
log_has() { grep -qF "$2" "$T/m$1/.docfs/errors"; }

step "a one-member set with data: two databases, options of every kind, indexes of every kind"
# a database whose change history keeps only 4 KiB (for the trimmed-history resync below)
echo "{\"_id\": 0}" | "$DOCFS" import "$T/s0" hist.c - > /dev/null 2>&1 || fail "insert before the set"
"$DOCFS" changes-keep "$T/s0" hist 4096 || fail "changes-keep"
rs initiate "{_id: 'rs0', members: [{_id: 0, host: '${H[0]}', priority: 2}],
	settings: {electionTimeoutMillis: 3000}}" > /dev/null || fail "initiate"
member_up 0
wait_for "a primary" 20 is_state 0 PRIMARY
"$PY" - "$P0" << 'PY' || fail "loading the data"
import sys, datetime, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
shop = c.shop
shop.items.insert_many([{"_id": i, "sku": f"s{i:05}", "n": i, "tag": ["a", "b"][i % 2],
                         "opt": i if i % 3 else None} for i in range(1000)])
shop.items.create_index("sku", unique=True)
shop.items.create_index([("tag", "hashed")])
shop.items.create_index("n", partialFilterExpression={"n": {"$gt": 100}}, name="n_partial")
shop.items.create_index("opt", sparse=True)
shop.create_collection("log", capped=True, size=8192, max=50)
shop.log.insert_many([{"_id": i, "line": f"line {i}"} for i in range(80)])
shop.create_collection("empty", validator={"n": {"$type": "int"}}, validationAction="error")
shop.notes.insert_many([{"_id": i, "body": f"note number {i} about docfs"} for i in range(50)])
shop.notes.create_index([("body", "text")])
crm = c.crm
now = datetime.datetime.now(datetime.timezone.utc)
crm.sessions.insert_many([{"_id": i, "at": now} for i in range(30)])
crm.sessions.create_index("at", expireAfterSeconds=3600)
crm.contacts.insert_many([{"_id": i, "name": f"c{i}"} for i in range(200)])
PY

step "a second member with an empty store copies everything (initial sync)"
rs add "${H[1]}" > /dev/null || fail "rs add member 1"
member_up 1
wait_for "member 1 SECONDARY" 60 is_state 1 SECONDARY
wait_for "member 1 equal to member 0" 20 same_as_0 1
log_has 1 "STARTUP2: initial sync from" || fail "member 1 did not log its STARTUP2"
expect_eq "$(summary "$P1" | jq -c '.shop.colls.log.options, .shop.colls.empty.options.validator')" \
	"$(printf '%s\n%s' '{"capped":true,"max":50,"size":8192}' '{"n":{"$type":"int"}}')" \
	"the copied collections' options"

step "a third member added while a writer inserts and updates: STARTUP2, then SECONDARY"
"$PY" - "$P0" "$T/writer.count" << 'PY' &
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
n = 0
try:
    while True:
        c.crm.contacts.insert_one({"_id": 10000 + n, "name": f"w{n}"})
        c.crm.contacts.update_one({"_id": n % 200}, {"$inc": {"seen": 1}})
        c.shop.items.update_one({"_id": n % 1000}, {"$set": {"w": n}})
        n += 1
        open(sys.argv[2], "w").write(str(n))  # every one: a majority write takes 50-200 ms
except Exception as e:  # the kill at the end, or a failure to show
    print("writer stopped after %d: %s" % (n, e), file=sys.stderr)
PY
WPID=$!
sleep 0.5
rs add "${H[2]}" > /dev/null || fail "rs add member 2"
member_up 2
wait_for "member 2 SECONDARY" 60 is_state 2 SECONDARY
log_has 2 "STARTUP2: initial sync from" || fail "member 2 did not log its STARTUP2"
log_has 2 "initial sync done: SECONDARY" || fail "member 2 did not log the end of its sync"
sleep 0.5
kill "$WPID"
wait "$WPID" 2> /dev/null || true
WPID=
writes=$(cat "$T/writer.count" 2> /dev/null || echo 0)
# sync_figure LOG: "N documents copied, the copy and catch-up in M ms" from a member's log
sync_figure() {
	python3 - "$1" << 'PY'
import sys, re, datetime
t = {}
for line in open(sys.argv[1]):
    for key, pat in (("a", "STARTUP2: initial sync"), ("b", "documents of"), ("c", "initial sync done")):
        if pat in line and key not in t:
            t[key] = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
            if key == "b":
                t["n"] = re.search(r"(\d+) documents of", line).group(1)
ms = lambda x, y: int((t[y] - t[x]).total_seconds() * 1000)
print(f"{t['n']} documents copied in {ms('a', 'b')} ms, caught up {ms('b', 'c')} ms later")
PY
}
fig2=$(sync_figure "$T/log2") || fail "no initial sync figures in member 2's log"
[ "$writes" -gt 0 ] || fail "the writer wrote nothing"
wait_for "three equal members (dbHash, options, indexes)" 30 same_as_0 1 2
expect_eq "$(summary "$P2" | jq -c '(.shop.colls.items.indexes | length), (.crm.colls.sessions.indexes | map(fromjson | .expireAfterSeconds // empty) | .[0])')" \
	"$(printf '5\n3600')" "member 2's indexes"

step "an empty collection made, a validator changed, a collection made capped: the secondaries follow"
"$PY" - "$P0" << 'PY' || fail "catalog changes on the primary"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
c.shop.create_collection("later", capped=True, size=4096)
c.crm.create_collection("bare")
c.shop.command("collMod", "empty", validator={"n": {"$type": "string"}}, validationLevel="moderate")
c.crm.command("convertToCapped", "contacts", size=1 << 22)
PY
wait_for "the secondaries' collections as the primary's" 20 same_as_0 1 2
expect_eq "$(summary "$P2" | jq -c '.shop.colls.empty.options, .shop.colls.later.options.capped, .crm.colls.contacts.options.capped')" \
	"$(printf '%s\ntrue\ntrue' '{"validationAction":"error","validationLevel":"moderate","validator":{"n":{"$type":"string"}}}')" "member 2's options"

step "a wiped member copies everything again"
member_down 2
rm -rf "$T/s2" && mkdir "$T/s2"
member_up 2
wait_for "the wiped member SECONDARY" 60 is_state 2 SECONDARY
wait_for "the wiped member equal" 30 same_as_0 2

step "a member whose resume token the primary trimmed drops its data and copies again"
"$PY" - "$P0" << 'PY' || fail "a write in hist"
import sys, pymongo
pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true").hist.c.insert_one({"_id": 1})
PY
wait_for "member 1 has hist's write" 20 test -e "$T/m1/hist/c/1.json"
member_down 1
"$PY" - "$P0" << 'PY' || fail "writes that trim hist's history"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
for i in range(150):
    c.hist.c.insert_one({"_id": 100 + i, "pad": "x" * 100})
PY
member_up 1
wait_for "member 1 resynced" 60 log_has 1 "no longer has the history"
wait_for "member 1 SECONDARY again" 60 is_state 1 SECONDARY
wait_for "three equal members" 30 same_as_0 1 2
for i in 0 1 2; do
	out=$("$DOCFS" check "$T/s$i" 2>&1) || fail "docfs check of member $i: $out"
done
echo "figures: member 2's initial sync while a writer ran ($writes rounds of 3 writes in all): $fig2"
echo ok
