#!/usr/bin/env bash
# replset_wc.sh - write concern, replSetStepDown and replSetFreeze on a three-member replica
# set (its own ZooKeeper, three mounts; members tagged dc east, east, west and a MultipleDC
# mode {dc: 2}): PyMongo writes with w: 1, 2, 3, "majority" and the custom mode, each seen on
# as many secondaries as it asked for the moment it is acknowledged; bad write concerns (an
# unknown mode: 79, w: 5 on 3 members: 100) refused with nothing written; a secondary
# stopped (kill -STOP): w: 3 with wtimeout gets 64 WriteConcernFailed and the write stays,
# w: "majority" still succeeds, path options ?w=3&wtimeout= (update/, .insert) and the
# mount's -o w= make the close fail with ETIMEDOUT and the message in /.docfs/errors (the
# writes stay); ?w=3 on update/ and .insert, ?w=majority on .bulk; rs.stepDown hands over
# to a caught-up member and the old primary follows it;
# rs.freeze keeps a secondary from standing (a stepDown with no electable secondary: 262);
# a standalone (docfs serve) answers w > 1 and custom modes with 2 BadValue, as mongod.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import pymongo' 2> /dev/null || { echo "SKIP: no pymongo"; exit 77; }
MONGOSH=$(dirname "$0")/../wire/node_modules/.bin/mongosh
rs_cleanup() {
	local rc=$?
	rs_members_down
	[ -z "${solo:-}" ] || kill "$solo" 2> /dev/null || true
	zk_stop
	cleanup "$rc"
}
trap rs_cleanup EXIT
zk_start
rs_three
primary_of() { rs status | jq -r '.members | map(.stateStr) | index("PRIMARY")'; }

step "a standalone answers as mongod: w > 1 and custom modes 2 BadValue (nothing written), majority is w 1"
mkdir -p "$T/solo"
"$DOCFS" serve "$T/solo" --listen "$T/solo.sock" --log "$T/solo.log" > /dev/null &
solo=$!
wait_file "$T/solo.sock" || fail "docfs serve did not start: $(cat "$T/solo.log")"
"$PY" - "$T/solo.sock" << 'PY' || { kill "$solo"; fail "a standalone's write concerns"; }
import sys, urllib.parse, pymongo
from pymongo.write_concern import WriteConcern
c = pymongo.MongoClient("mongodb://" + urllib.parse.quote(sys.argv[1], safe=""))
for w in (2, "MultipleDC"):
    try:
        c.t.get_collection("c", write_concern=WriteConcern(w=w)).insert_one({"_id": str(w)})
        raise SystemExit(f"a standalone took w: {w}")
    except pymongo.errors.OperationFailure as e:
        assert e.code == 2 and e.details["codeName"] == "BadValue", e.details
c.t.get_collection("c", write_concern=WriteConcern(w="majority", wtimeout=1000)).insert_one({"_id": 1})
assert [d["_id"] for d in c.t.c.find()] == [1]
for cmd in ("replSetStepDown", "replSetFreeze"):
    try:
        c.admin.command(cmd, 10)
        raise SystemExit(f"a standalone ran {cmd}")
    except pymongo.errors.OperationFailure as e:
        assert e.code == 76, e.details
PY
kill "$solo"
wait "$solo" || true
solo=

step "three tagged members; member 0 mounted with -o w=3:wtimeout=1500 for its files"
rs initiate "{_id: 'rs0', members: [{_id: 0, host: '${H[0]}', priority: 2, tags: {dc: 'east'}},
	{_id: 1, host: '${H[1]}', tags: {dc: 'east'}}, {_id: 2, host: '${H[2]}', tags: {dc: 'west'}}],
	settings: {electionTimeoutMillis: 3000, getLastErrorModes: {MultipleDC: {dc: 2}}}}" > /dev/null || fail "initiate"
expect_fail "-o w= with a bad value" "$DOCFS" mount -o "w=-1,listen=127.0.0.1:1" "$T/s0" "$T/m0"
up_wc() { if [ "$1" = 0 ]; then member_up 0 "w=3:wtimeout=1500"; else member_up "$1"; fi; }
rs_elect0 up_wc
wait_for "two secondaries" 20 secondaries 1 2

step "PyMongo: w 1, 2, 3, majority, MultipleDC: acknowledged once that many members have it"
"$PY" - "$P0" "$P1" "$P2" << 'PY' || fail "PyMongo's write concerns"
import sys, time, pymongo
from pymongo.write_concern import WriteConcern
p0, p1, p2 = sys.argv[1:4]
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{p1},127.0.0.1:{p0}/?replicaSet=rs0", serverSelectionTimeoutMS=10000)
sec = [pymongo.MongoClient(f"mongodb://127.0.0.1:{p}/?directConnection=true").shop["wc"] for p in (p1, p2)]
def on_secondaries(_id):
    return sum(1 for s in sec if s.find_one({"_id": _id}) is not None)
c.shop["wc"].insert_one({"_id": "warm"})  # the implicit default: w: "majority"
assert on_secondaries("warm") >= 1, "the default (majority) was acknowledged before a secondary had it"
t = {}
for i, w in enumerate([1, 2, 3, "majority", "MultipleDC"]):
    coll = c.shop.get_collection("wc", write_concern=WriteConcern(w=w, wtimeout=10000))
    t0 = time.monotonic()
    coll.insert_one({"_id": i, "w": w})
    t[str(w)] = (time.monotonic() - t0) * 1000
    n = on_secondaries(i)
    want = {1: 0, 2: 1, 3: 2, "majority": 1, "MultipleDC": 1}[w]
    assert n >= want, f"w: {w} acknowledged with {n} secondaries holding it"
    if w == "MultipleDC":  # dc west is member 2 alone
        assert sec[1].find_one({"_id": i}), "MultipleDC acknowledged before the west member had it"
# update, delete and findAndModify wait too
coll = c.shop.get_collection("wc", write_concern=WriteConcern(w=3, wtimeout=10000))
coll.update_one({"_id": 0}, {"$set": {"u": 1}})
assert all(s.find_one({"_id": 0}).get("u") == 1 for s in sec), "an update's w: 3"
coll.delete_one({"_id": 1})
assert on_secondaries(1) == 0, "a delete's w: 3"
coll.find_one_and_update({"_id": 2}, {"$set": {"f": 1}})
assert all(s.find_one({"_id": 2}).get("f") == 1 for s in sec), "findAndModify's w: 3"
# bad write concerns: refused, nothing written
for w, code in (("nosuchmode", 79), (5, 100)):
    try:
        c.shop.get_collection("wc", write_concern=WriteConcern(w=w)).insert_one({"_id": f"bad-{w}"})
        raise SystemExit(f"w: {w} was accepted")
    except pymongo.errors.OperationFailure as e:
        assert e.code == code, (w, e.details)
    assert c.shop["wc"].find_one({"_id": f"bad-{w}"}) is None, f"w: {w} wrote"
print("figures (ms per insert): " + ", ".join(f"w {k}: {v:.0f}" for k, v in t.items()))
PY
expect_eq "$(jq -r ._id "$T/m0/shop/wc/3.json")" 3 "the w: 3 write on the primary's mount"

step "path options: ?w=3 on update/ and .insert, ?w=majority on .bulk; -o w=3 on a document file"
echo '{"$set": {"p": 1}}' > "$T/m0/shop/wc/update/{\"_id\": 0}?w=3&wtimeout=5000" || fail "update/?w=3"
expect_eq "$(jq -c .p "$T/m1/shop/wc/0.json")-$(jq -c .p "$T/m2/shop/wc/0.json")" "1-1" "?w=3: both secondaries have the update at the close"
echo '{"insertOne": {"document": {"_id": "b1"}}}' > "$T/m0/shop/wc/.bulk?w=majority" || fail ".bulk?w=majority"
"$PY" -c 'import sys; f = open(sys.argv[1], "w"); f.write("{\"_id\": \"file1\", \"v\": 1}"); f.close()' "$T/m0/shop/wc/file1.json" ||
	fail "a document file under -o w=3"
expect_eq "$(jq -c .v "$T/m1/shop/wc/file1.json")-$(jq -c .v "$T/m2/shop/wc/file1.json")" "1-1" "-o w=3: both secondaries have the file at the close"
"$PY" -c 'import sys; f = open(sys.argv[1], "w"); f.write("{\"_id\": \"i1\"}\n"); f.close()' "$T/m0/shop/wc/.insert?w=3" ||
	fail ".insert?w=3"
expect_eq "$(jq -r ._id "$T/m1/shop/wc/i1.json")-$(jq -r ._id "$T/m2/shop/wc/i1.json")" "i1-i1" ".insert?w=3: both secondaries have it at the close"
mark=$(errors_mark)
echo '{"$set": {"p": 2}}' > "$T/m0/shop/wc/update/{\"_id\": 0}?w=nosuchmode" 2> /dev/null && fail "?w=nosuchmode was accepted"
errors_since "$T/m0/.docfs/errors" "$mark" | grep -qF "No write concern mode named 'nosuchmode' found in replica set configuration (79 UnknownReplWriteConcern)" ||
	fail "?w=nosuchmode: $(errors_since "$T/m0/.docfs/errors" "$mark")"
expect_eq "$(jq -c .p "$T/m0/shop/wc/0.json")" 1 "?w=nosuchmode changed nothing"

step "a secondary stopped: w 3 times out (64, the write stays), majority still succeeds"
pid2=$(member_pid 2)
kill -STOP "$pid2"
"$PY" - "$P0" << 'PY' || { kill -CONT "$pid2"; fail "w: 3 with a member stopped"; }
import sys, pymongo
from pymongo.write_concern import WriteConcern
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
try:
    c.shop.get_collection("wc", write_concern=WriteConcern(w=3, wtimeout=1000)).insert_one({"_id": "late"})
    raise SystemExit("w: 3 acknowledged with a member stopped")
except pymongo.errors.WriteConcernError as e:
    d = e.details
    assert e.code == 64 and d["codeName"] == "WriteConcernFailed", d
    assert d["errmsg"] == "waiting for replication timed out" and d["errInfo"]["wtimeout"] is True, d
assert c.shop["wc"].find_one({"_id": "late"}) is not None, "the timed-out write is gone"
c.shop.get_collection("wc", write_concern=WriteConcern(w="majority", wtimeout=10000)).insert_one({"_id": "maj"})
PY
mark=$(errors_mark)
if echo '{"$set": {"p": 3}}' > "$T/m0/shop/wc/update/{\"_id\": 0}?w=3&wtimeout=1000" 2> "$T/e1"; then
	kill -CONT "$pid2"
	fail "?w=3&wtimeout=1000 succeeded with a member stopped"
fi
# (bash ignores close()'s status: Python's close raises it)
if "$PY" -c 'import sys; f = open(sys.argv[1], "w"); f.write("{\"_id\": \"file2\"}"); f.close()' "$T/m0/shop/wc/file2.json" 2> "$T/e2"; then
	kill -CONT "$pid2"
	fail "a file under -o w=3 closed fine with a member stopped"
fi
if "$PY" -c 'import sys; f = open(sys.argv[1], "w"); f.write("{\"_id\": \"i2\"}\n"); f.close()' "$T/m0/shop/wc/.insert?w=3&wtimeout=500" 2> "$T/e3"; then
	kill -CONT "$pid2"
	fail ".insert?w=3&wtimeout=500 closed fine with a member stopped"
fi
kill -CONT "$pid2"
grep -q "timed out" "$T/e3" || fail "the .insert's error is not ETIMEDOUT: $(cat "$T/e3")"
[ -e "$T/m0/shop/wc/i2.json" ] || fail "the timed-out .insert's document is gone"
grep -q "timed out" "$T/e1" || fail "the update's error is not ETIMEDOUT: $(cat "$T/e1")"
grep -q "timed out" "$T/e2" || fail "the file's error is not ETIMEDOUT: $(cat "$T/e2")"
expect_eq "$(errors_since "$T/m0/.docfs/errors" "$mark" | grep -cF 'waiting for replication timed out (64 WriteConcernFailed)')" 3 "the three timeouts in /.docfs/errors"
expect_eq "$(jq -c .p "$T/m0/shop/wc/0.json")" 3 "the timed-out update stays"
[ -e "$T/m0/shop/wc/file2.json" ] || fail "the timed-out file is gone"
wait_for "member 2 catches up after SIGCONT" 20 test -e "$T/m2/shop/wc/file2.json"
wait_for "member 2 a secondary again" 20 secondaries 1 2

step "replSetStepDown: member 0 hands over to a caught-up secondary and follows it"
"$PY" - "$P0" << 'PY' || fail "replSetStepDown"
import sys, pymongo
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/?directConnection=true")
c.shop["wc"].insert_one({"_id": "before-stepdown"})
r = c.admin.command("replSetStepDown", 60, secondaryCatchUpPeriodSecs=10)
assert r["ok"] == 1, r
assert not c.admin.command("hello")["isWritablePrimary"]
try:
    c.admin.command("replSetStepDown", 60)
    raise SystemExit("a secondary stepped down")
except (pymongo.errors.OperationFailure, pymongo.errors.AutoReconnect) as e:
    assert e.details["code"] == 10107, e.details
c.admin.command("replSetFreeze", 120)  # a secondary may be frozen (it stays out below)
PY
wait_for "a new primary" 15 bash -c '[ "$("$DOCFS" rs "$ZK" rs0 status | jq -r ".members | map(.stateStr) | index(\"PRIMARY\")")" != null ]'
new=$(primary_of)
[ "$new" != 0 ] || fail "member 0 is primary again within its stepDownSecs"
wait_for "member 0 a secondary following member $new" 15 secondaries 0
other=$((3 - new))
echo '{"_id": "after"}' > "$T/m$new/shop/wc/after.json" || fail "a write on the new primary"
wait_for "member 0 follows the new primary" 15 test -e "$T/m0/shop/wc/after.json"

step "rs.freeze keeps member $other from standing: stepDown with no electable secondary is 262"
if [ -x "$MONGOSH" ]; then
	"$MONGOSH" --quiet "mongodb://${H[$other]}/?directConnection=true" --eval 'printjson(rs.freeze(120))' > "$T/freeze.out" 2>&1 ||
		fail "mongosh rs.freeze: $(cat "$T/freeze.out")"
else
	rs freeze "${H[$other]}" 120 > "$T/freeze.out" || fail "docfs rs freeze: $(cat "$T/freeze.out")"
fi
if out=$(rs stepDown 30 2 2>&1); then fail "stepDown with every secondary frozen succeeded: $out"; fi
grep -q '"code": 262' <<< "$out" && grep -q "No electable secondaries caught up" <<< "$out" || fail "stepDown: $out"
primary_is "$new" || fail "member $new lost the primary after a refused stepDown"
echo '{"_id": "still"}' > "$T/m$new/shop/wc/still.json" || fail "writes after a refused stepDown"
rs freeze "${H[$other]}" 0 > /dev/null || fail "docfs rs freeze 0"
if [ -x "$MONGOSH" ]; then
	"$MONGOSH" --quiet "mongodb://${H[$new]}/?directConnection=true" --eval 'printjson(rs.stepDown(30, 10))' > "$T/sd.out" 2>&1 ||
		fail "mongosh rs.stepDown: $(cat "$T/sd.out")"
else
	rs stepDown 30 10 > "$T/sd.out" || fail "docfs rs stepDown: $(cat "$T/sd.out")"
fi
wait_for "member $other elected" 15 primary_is "$other"
wait_for "both others secondaries" 15 secondaries 0 "$new"
echo ok
