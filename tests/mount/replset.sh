#!/usr/bin/env bash
# replset.sh - a three-member replica set on one machine: its own ZooKeeper, three mounts
# (each a member, known by its listen= address), rs.initiate; writes through the primary's
# files and through PyMongo reach both secondaries (files and queries); a secondary's mount
# refuses a write with EROFS and the NotWritablePrimary message, its wire protocol with 10107;
# PyMongo with ?replicaSet=rs0 finds the primary; the primary's daemon killed with kill -9, a
# new primary is elected, writes go on there, the old member restarted rejoins as a
# secondary and catches up, and all three stores hold the same documents and indexes.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import pymongo' 2> /dev/null || { echo "SKIP: no pymongo"; exit 77; }
rs_cleanup() {
	local rc=$?
	rs_members_down
	zk_stop
	cleanup "$rc"
}
trap rs_cleanup EXIT
zk_start
rs_three
new_primary() { rs status | jq -e '[.members[1,2].stateStr] | index("PRIMARY") != null'; }
# dump PORT: every collection of every database but local, sorted by _id, and its indexes
dump() {
	"$PY" - "$1" << 'PY'
import sys, pymongo
from bson import json_util
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true", serverSelectionTimeoutMS=5000)
out = {}
for db in sorted(c.list_database_names()):
    if db in ("local", "admin", "config"):
        continue
    for coll in sorted(c[db].list_collection_names()):
        docs = list(c[db][coll].find().sort("_id", 1))
        ix = sorted((i["name"], json_util.dumps(i["key"])) for i in c[db][coll].list_indexes())
        out[f"{db}.{coll}"] = {"docs": docs, "indexes": ix}
print(json_util.dumps(out, sort_keys=True))
PY
}
same_dumps() { # same_dumps I J...: the members' dumps are equal
	local first
	first=$(dump "${P[$1]}") || return 1
	shift
	for i in "$@"; do [ "$(dump "${P[$i]}")" == "$first" ] || return 1; done
}

step "three members, rs.initiate: member 0 (priority 2) is elected, the others follow"
rs initiate "{_id: 'rs0', members: [{_id: 0, host: '${H[0]}', priority: 2}, {_id: 1, host: '${H[1]}'},
	{_id: 2, host: '${H[2]}'}], settings: {electionTimeoutMillis: 3000}}" > /dev/null || fail "initiate"
rs_elect0 member_up
wait_for "two secondaries" 20 secondaries 1 2
st=$(rs status)
expect_eq "$(jq -c '[.set, [.members[].stateStr], [.members[].health]]' <<< "$st")" \
	'["rs0",["PRIMARY","SECONDARY","SECONDARY"],[1,1,1]]' "rs.status()"

step "writes through the primary's files and through PyMongo reach both secondaries"
mkdir -p "$T/m0/shop/items"
echo '{"_id": "f1", "name": "file one", "n": 1}' > "$T/m0/shop/items/f1.json"
t0=$(date +%s%N)
"$PY" - "$P0" "$P1" << 'PY' || fail "PyMongo's writes through ?replicaSet=rs0"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[2]},127.0.0.1:{sys.argv[1]}/?replicaSet=rs0", serverSelectionTimeoutMS=10000)
items = c.shop["items"]
items.insert_many([{"_id": i, "n": i, "tags": ["a", "b", "c"]} for i in range(20)])
assert c.primary == ("127.0.0.1", int(sys.argv[1])), f"primary {c.primary}"
items.update_one({"_id": 3}, {"$inc": {"n": 100}, "$unset": {"tags": 1}})
items.update_one({"_id": 4}, {"$pop": {"tags": 1}})
items.replace_one({"_id": 5}, {"name": "five"})
items.delete_one({"_id": 6})
items.create_index([("n", 1)], name="n_1")
c.shop["tmp"].insert_one({"_id": 1})
c.shop["tmp"].rename("kept")
c.shop["gone"].insert_one({"_id": 1})
c.shop["gone"].drop()
PY
for i in 1 2; do
	wait_for "member $i has the file's document" 15 test -e "$T/m$i/shop/items/f1.json"
	wait_for "member $i has PyMongo's writes" 15 test -e "$T/m$i/shop/kept/1.json"
done
lag_ms=$((($(date +%s%N) - t0) / 1000000))
expect_eq "$(jq -c '[.name, .n]' "$T/m1/shop/items/f1.json")" '["file one",1]' "the file's document on member 1"
expect_eq "$(jq -c '[.n, .tags]' "$T/m2/shop/items/3.json")" '[103,null]' "an \$inc and \$unset on member 2"
expect_eq "$(jq -c .tags "$T/m2/shop/items/4.json")" '["a","b"]' "a \$pop (a truncated array) on member 2"
expect_eq "$(jq -c . "$T/m1/shop/items/5.json")" '{"_id":5,"name":"five"}' "a replace on member 1"
[ ! -e "$T/m1/shop/items/6.json" ] || fail "a deleted document is still on member 1"
[ ! -e "$T/m2/shop/gone" ] || fail "a dropped collection is still on member 2"
[ ! -e "$T/m2/shop/tmp" ] || fail "a renamed collection's old name is still on member 2"
expect_eq "$(cat "$T/m2/shop/items/query/{n: {\$gte: 10}}?count=1")" "11" "a query on member 2 (10..19 and the incremented 3)"
[ -e "$T/m1/shop/items/.indexes/n_1" ] || fail "the index is not on member 1"
wait_for "three equal stores" 15 same_dumps 0 1 2

step "a secondary refuses writes: EROFS on its mount, 10107 on the wire; reads work"
mark=$(errors_mark)
if bash -c 'echo "{\"_id\": \"x\"}" > "$1"' sh "$T/m1/shop/items/x.json" 2> "$T/echo.err"; then
	fail "a write on a secondary's mount succeeded"
fi
grep -q "Read-only file system" "$T/echo.err" || fail "not EROFS: $(cat "$T/echo.err")"
errors_since "$T/m1/.docfs/errors" "$mark" | grep -qF "not primary (10107 NotWritablePrimary): the primary is member 0 at ${H[0]}" ||
	fail "no NotWritablePrimary message: $(errors_since "$T/m1/.docfs/errors" "$mark")"
mkdir "$T/m2/newdb" 2> /dev/null && fail "mkdir of a database on a secondary succeeded"
out=$("$DOCFS" update "$T/s1" shop.items '{_id: 1}' '{$set: {cli: 1}}' 2>&1) && fail "a command line write to a member's store succeeded: $out"
grep -qF "not primary (10107 NotWritablePrimary): this store is served by member ${H[1]} of replica set rs0" <<< "$out" ||
	fail "the command line's refusal: $out"
"$PY" - "$P2" << 'PY' || fail "the wire protocol of a secondary"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
h = c.admin.command("hello")
assert h["setName"] == "rs0" and h["secondary"] and not h["isWritablePrimary"], h
assert len(h["hosts"]) == 3 and h["primary"] == h["hosts"][0], h
try:
    c.shop["items"].insert_one({"_id": "nope"})
    raise SystemExit("a secondary took an insert")
except pymongo.errors.AutoReconnect as e:  # NotPrimaryError (NotMasterError before 3.12)
    assert e.details["code"] == 10107, e.details
assert c.shop["items"].count_documents({}) == 20
st = c.admin.command("replSetGetStatus")
assert [m["stateStr"] for m in st["members"]] == ["PRIMARY", "SECONDARY", "SECONDARY"], st
assert c.admin.command("replSetGetConfig")["config"]["_id"] == "rs0"
PY

step "/.replset/ on the members' mounts: hello, status, conf"
expect_eq "$(ls "$T/m1/.replset" | tr '\n' ' ')" "conf hello status " "/.replset/"
expect_eq "$(jq -c '[.setName, .isWritablePrimary, .secondary, .primary, .me]' "$T/m1/.replset/hello")" \
	"[\"rs0\",false,true,\"${H[0]}\",\"${H[1]}\"]" "/.replset/hello on a secondary"
expect_eq "$(jq -c '[.myState, [.members[].stateStr], [.members[].self]]' "$T/m0/.replset/status")" \
	'[1,["PRIMARY","SECONDARY","SECONDARY"],[true,null,null]]' "/.replset/status on the primary"
expect_eq "$(jq -c '[._id, .version, (.members | length)]' "$T/m2/.replset/conf")" '["rs0",1,3]' "/.replset/conf"

step "kill -9 the primary: a new primary is elected and takes writes"
pid=$(member_pid 0)
kill -9 "$pid"
t_kill=$(date +%s%N)
fusermount3 -uz "$T/m0" 2> /dev/null || true
wait_for "a new primary" 30 new_primary
failover_ms=$((($(date +%s%N) - t_kill) / 1000000))
new=$(rs status | jq -r '.members | map(.stateStr) | index("PRIMARY")')
other=$((3 - new))
"$PY" - "$P0" "$P1" "$P2" << 'PY' || fail "writes after the failover"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[2]},127.0.0.1:{sys.argv[3]}/?replicaSet=rs0", serverSelectionTimeoutMS=15000)
items = c.shop["items"]
items.insert_many([{"_id": 100 + i, "after": True} for i in range(10)])
items.update_one({"_id": 7}, {"$set": {"after": True}})
PY
echo '{"_id": "f2", "after": true}' > "$T/m$new/shop/items/f2.json" || fail "a file write on the new primary"
wait_for "the other secondary follows the new primary" 15 test -e "$T/m$other/shop/items/f2.json"

step "the old primary restarted rejoins as a secondary and catches up"
wait_gone "$pid" || true
member_up 0
wait_for "member 0 back as a secondary" 20 secondaries 0
wait_for "member 0 catches up" 20 test -e "$T/m0/shop/items/f2.json"
wait_for "three equal stores" 20 same_dumps 0 1 2
[ "$(dump "$P0" | jq '."shop.items".docs | length')" == 31 ] || fail "not 31 documents: $(dump "$P0" | jq -c '."shop.items".docs')"
echo "figures: replication of the first writes seen on both secondaries within ${lag_ms} ms; failover (kill -9 to a new primary) ${failover_ms} ms"
echo ok
