#!/usr/bin/python3
"""cmds_test.py - wire commands of issue 27 beyond CRUD, with PyMongo (Debian's 3.11) against
`docfs serve` on a Unix socket: dbHash (each collection's MD5 recomputed here from the BSON
of its documents in _id order, the database's from the collections' digests in name order,
capped, the collections filter, a missing database, system.profile left out) and
`docfs dbhash STORE DB` printing the same hashes; validators (create's validator,
validationLevel, validationAction, collMod, 121 DocumentValidationFailure with errInfo on
every write command, bypassDocumentValidation, moderate, off, warn, refusals that change
nothing); aggregate: 1 with $documents and with $listLocalSessions; find with min/max; field
names with '.' and '$' through the insert and update commands. Every expected value is computed here.
Run by meson (suite wire) with DOCFS set to the binary."""
import hashlib
import json
import os
import subprocess
import sys

import bson
import warnings

import pymongo
from bson.son import SON
from pymongo import InsertOne
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wirelib  # noqa: E402  (check, expect_code, the count of checks)

check = wirelib.check
expect_code = wirelib.expect_code
EMPTY_MD5 = hashlib.md5(b"").hexdigest()


def md5_docs(docs):
    """The MD5 of the documents' BSON, in the order given (the caller's _id order)."""
    h = hashlib.md5()
    for d in docs:
        h.update(bson.encode(d))
    return h.hexdigest()


def md5_db(colls):
    """The database's md5: the collections' hex digests in name order."""
    return hashlib.md5("".join(colls[k] for k in sorted(colls)).encode()).hexdigest()


def cli_dbhash(store, db, *colls):
    r = subprocess.run([wirelib.DOCFS, "dbhash", store, db] + list(colls), capture_output=True,
                       text=True)
    check(r.returncode == 0, "docfs dbhash %s: %s" % (db, r.stderr))
    return json.loads(r.stdout)


def dbhash(db, store):
    users = [SON([("_id", 3), ("name", "c"), ("tags", ["x", "y"])]),
             SON([("_id", 1), ("name", "a"), ("n", 1.5)]),
             SON([("_id", "k"), ("name", "s")]),  # strings after numbers
             SON([("_id", 2), ("name", "b"), ("sub", SON([("z", 1), ("a", None)]))])]
    for d in users:
        db.users.insert_one(d)
    by_id = [users[1], users[3], users[0], users[2]]
    db.create_collection("log", capped=True, size=8192)
    db.log.insert_many([SON([("_id", i), ("m", "line %d" % i)]) for i in range(5)])
    db.create_collection("empty")

    r = db.command("dbHash")
    want = {"users": md5_docs(by_id), "log": md5_docs(
        [SON([("_id", i), ("m", "line %d" % i)]) for i in range(5)]), "empty": EMPTY_MD5}
    check(r["collections"] == want, "dbHash collections: %r, want %r" % (r["collections"], want))
    check(r["md5"] == md5_db(want), "dbHash md5 %s, want %s" % (r["md5"], md5_db(want)))
    check(r["capped"] == ["log"], "capped: %r" % r["capped"])
    check(list(r.keys())[:5] == ["host", "collections", "capped", "md5", "timeMillis"] and
          r["ok"] == 1.0 and isinstance(r["timeMillis"], int), "reply shape: %r" % r)
    check(list(r["collections"].keys()) == ["empty", "log", "users"], "name order")
    check(db.command("dbhash")["md5"] == r["md5"], "the lowercase alias")

    # the same through the command line, beside the running server
    cli = cli_dbhash(store, db.name)
    check(cli["collections"] == want and cli["md5"] == r["md5"] and cli["capped"] == ["log"]
          and "ok" not in cli and cli["host"] == r["host"], "docfs dbhash: %r" % cli)
    cli = cli_dbhash(store, db.name, "users", "nope")
    check(cli["collections"] == {"users": want["users"]} and
          cli["md5"] == md5_db({"users": want["users"]}), "docfs dbhash COLL: %r" % cli)

    # collections: only those named; a missing one is absent; [] is all
    r2 = db.command("dbHash", collections=["users", "nope", "empty"])
    sub = {"users": want["users"], "empty": EMPTY_MD5}
    check(r2["collections"] == sub and r2["md5"] == md5_db(sub) and r2["capped"] == [],
          "collections filter: %r" % r2)
    check(db.command("dbHash", collections=[])["md5"] == r["md5"], "collections [] is all")
    expect_code(2, db.command, "dbHash", collections=["users", 7])

    # a write changes the collection's hash (and only it); undoing it restores it
    db.users.update_one({"_id": 2}, {"$set": {"extra": True}})
    r3 = db.command("dbHash")
    check(r3["collections"]["users"] != want["users"] and
          r3["collections"]["log"] == want["log"], "an update changes only its collection")
    db.users.update_one({"_id": 2}, {"$unset": {"extra": ""}})
    check(db.command("dbHash")["md5"] == r["md5"], "the same documents hash the same again")
    # field order is part of the BSON, as in mongod
    db.order.insert_one(SON([("_id", 1), ("a", 1), ("b", 2)]))
    h1 = db.command("dbHash", collections=["order"])["collections"]["order"]
    db.order.replace_one({"_id": 1}, SON([("b", 2), ("a", 1)]))
    h2 = db.command("dbHash", collections=["order"])["collections"]["order"]
    check(h1 != h2 and h2 == md5_docs([SON([("_id", 1), ("b", 2), ("a", 1)])]),
          "field order hashed")

    # the profiler's collection is not hashed (not replicated in MongoDB)
    db.command("profile", 2)
    list(db.users.find({"name": "a"}))
    db.command("profile", 0)
    check(db.system.profile.count_documents({}) > 0, "the profiler wrote entries")
    check("system.profile" not in db.command("dbHash")["collections"], "system.profile left out")

    # a database that does not exist: no collections, the MD5 of nothing
    r4 = db.client.nodb.command("dbHash")
    check(r4["collections"] == {} and r4["capped"] == [] and r4["md5"] == EMPTY_MD5,
          "missing database: %r" % r4)
    check(cli_dbhash(store, "nodb")["md5"] == EMPTY_MD5, "docfs dbhash of a missing database")
    check("nodb" not in db.client.list_database_names(), "dbHash created no database")
    r = subprocess.run([wirelib.DOCFS, "dbhash", store], capture_output=True, text=True)
    check(r.returncode != 0 and "needs STORE and DB" in r.stderr, "docfs dbhash usage")


def expect_write_error(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except (OperationFailure, WriteError, BulkWriteError) as e:
        return e
    raise AssertionError("expected a write error")


def validators(db, store):
    db.create_collection("people", validator={"age": {"$gte": 0}, "name": {"$type": "string"}})
    opts = db.people.options()
    check(opts == {"validator": {"age": {"$gte": 0}, "name": {"$type": "string"}},
                   "validationLevel": "strict", "validationAction": "error"},
          "listCollections options: %r" % opts)
    p = db.people
    p.insert_one({"_id": 1, "name": "ann", "age": 30})
    e = expect_write_error(p.insert_one, {"_id": 2, "name": "bob", "age": -4})
    d = e.details
    check(d["code"] == 121 and d["codeName"] == "DocumentValidationFailure" and
          d["errmsg"] == "Document failed validation", "insert refused: %r" % d)
    check(d["errInfo"]["failingDocumentId"] == 2 and
          d["errInfo"]["details"] == {"operatorName": "$and", "clausesNotSatisfied": [
              {"index": 0, "details": {"operatorName": "$gte", "specifiedAs": {"age": {"$gte": 0}},
                                       "reason": "comparison failed", "consideredValue": -4}}]},
          "errInfo of an insert: %r" % d["errInfo"])
    check(p.count_documents({}) == 1, "the refused insert stored nothing")
    # every write command: update, replace, findAndModify, an ordered bulk, upsert
    e = expect_write_error(p.update_one, {"_id": 1}, {"$set": {"name": 5}})
    check(e.details["code"] == 121 and e.details["errInfo"]["failingDocumentId"] == 1, "update")
    expect_write_error(p.replace_one, {"_id": 1}, {"name": "ann"})  # age missing
    e = expect_write_error(p.find_one_and_update, {"_id": 1}, {"$inc": {"age": -100}})
    check(e.code == 121 and e.details["errInfo"]["details"]["clausesNotSatisfied"][0]
          ["details"]["operatorName"] == "$gte", "findAndModify errInfo: %r" % e.details)
    e = expect_write_error(p.bulk_write, [InsertOne({"_id": 3, "name": "c", "age": 1}),
                                          InsertOne({"_id": 4, "name": "d"}),
                                          InsertOne({"_id": 5, "name": "e", "age": 2})])
    we = e.details["writeErrors"]
    check(len(we) == 1 and we[0]["index"] == 1 and we[0]["code"] == 121 and
          we[0]["errInfo"]["failingDocumentId"] == 4 and e.details["nInserted"] == 1,
          "ordered bulk: %r" % e.details)
    expect_write_error(p.update_one, {"_id": 9}, {"$set": {"name": "x"}}, upsert=True)
    check(sorted(d["_id"] for d in p.find()) == [1, 3], "only valid documents: %r" % list(p.find()))
    check(p.find_one({"_id": 1}) == {"_id": 1, "name": "ann", "age": 30}, "ann unchanged")
    e = expect_write_error(db.people.insert_one, {"_id": 6, "name": 7, "age": 1})
    check(e.details["errInfo"]["details"]["clausesNotSatisfied"] ==
          [{"index": 1, "details": {"operatorName": "$type", "specifiedAs": {"name": {"$type": "string"}},
                                    "reason": "type did not match", "consideredValue": 7,
                                    "consideredType": "int"}}], "a $type clause: %r" % e.details)

    # bypassDocumentValidation
    p.insert_one({"_id": 10, "name": "raw"}, bypass_document_validation=True)
    p.update_one({"_id": 10}, {"$set": {"age": -1}}, bypass_document_validation=True)
    check(p.find_one({"_id": 10}) == {"_id": 10, "name": "raw", "age": -1}, "bypassed writes")
    expect_write_error(p.insert_one, {"_id": 11}, bypass_document_validation=False)

    # collMod: the level, the action, a new validator
    check(db.command("collMod", "people", validationLevel="moderate") == {"ok": 1.0}, "collMod")
    p.update_one({"_id": 10}, {"$set": {"note": "still invalid"}})  # invalid before: allowed
    expect_write_error(p.update_one, {"_id": 1}, {"$set": {"age": -1}})  # valid before: checked
    expect_write_error(p.insert_one, {"_id": 12})
    db.command("collMod", "people", validationLevel="off")
    p.insert_one({"_id": 12})
    db.command("collMod", "people", validationLevel="strict", validationAction="warn")
    p.insert_one({"_id": 13, "age": -13})
    check(p.find_one({"_id": 13}) is not None, "warn lets it in")
    db.command("collMod", "people", validator={"age": {"$exists": True}}, validationAction="error")
    check(db.people.options() == {"validator": {"age": {"$exists": True}},
                                  "validationLevel": "strict", "validationAction": "error"},
          "options after collMod: %r" % db.people.options())
    e = expect_write_error(p.insert_one, {"_id": 14})
    check(e.details["errInfo"]["details"] == {
        "operatorName": "$exists", "specifiedAs": {"age": {"$exists": True}},
        "reason": "path does not exist"}, "one clause: %r" % e.details["errInfo"])
    p.insert_one({"_id": 15, "age": "any"})

    # refusals change nothing
    before = db.people.options()
    expect_code(2, db.command, "collMod", "people", validationLevel="loose")
    expect_code(2, db.command, "collMod", "people", validator={"a": {"$bogus": 1}})
    expect_code(238, db.command, "collMod", "people", index={"name": "x_1", "hidden": True})
    expect_code(40415, db.command, "collMod", "people", colour=1)
    expect_code(26, db.command, "collMod", "nope", validationLevel="off")
    expect_code(2, db.create_collection, "bad", validator={"$where": "1"})
    check("bad" not in db.list_collection_names(), "a refused create made nothing")
    check(db.people.options() == before, "refused collMods changed nothing")
    # the log says what warn let through
    log = open(store + ".log").read()
    check("Document would fail validation: collection 'h.people' _id 13" in log,
          "warn's log line")


def documents(db):
    """aggregate: 1 with $documents: the rest of the pipeline over the given documents."""
    r = list(db.aggregate([{"$documents": [{"x": 1}, {"x": 2}, {"x": 3}]},
                           {"$match": {"x": {"$gte": 2}}},
                           {"$group": {"_id": None, "s": {"$sum": "$x"}}}]))
    check(r == [{"_id": None, "s": 5}], "$documents + $match + $group: %r" % r)
    r = list(db.aggregate([{"$documents": [{"b": 2, "a": 1}, {"a": 0}]}]))
    check(r == [{"b": 2, "a": 1}, {"a": 0}], "$documents alone keeps order and fields: %r" % r)
    check(list(db.aggregate([{"$documents": []}])) == [], "no documents")
    db.dk.insert_many([{"_id": 1, "k": 1, "v": "a"}, {"_id": 2, "k": 2, "v": "b"}])
    r = list(db.aggregate([{"$documents": [{"k": 1}, {"k": 3}]},
                           {"$lookup": {"from": "dk", "localField": "k", "foreignField": "k",
                                        "as": "j"}}]))
    check(r == [{"k": 1, "j": [{"_id": 1, "k": 1, "v": "a"}]}, {"k": 3, "j": []}],
          "$documents + $lookup: %r" % r)
    r = list(db.client.nodb2.aggregate([{"$documents": [{"k": 1}]},
                                        {"$lookup": {"from": "c", "localField": "k",
                                                     "foreignField": "k", "as": "j"}}]))
    check(r == [{"k": 1, "j": []}] and "nodb2" not in db.client.list_database_names(),
          "$documents on a missing database: %r" % r)
    many = [{"i": i} for i in range(250)]
    check([d["i"] for d in db.aggregate([{"$documents": many}], batchSize=10)] ==
          list(range(250)), "$documents in batches (getMore)")
    expect_code(238, lambda: list(db.aggregate([{"$documents": "$x"}])))
    expect_code(14, lambda: list(db.aggregate([{"$documents": [1]}])))
    expect_code(238, lambda: list(db.aggregate([{"$match": {}}])))
    # then $out and $merge, in one write transaction; $merge's duplicate key error says
    # which key, as mongod's (keyPattern, keyValue)
    db.command("aggregate", 1, pipeline=[{"$documents": [{"_id": 1, "a": 1}, {"_id": 2}]},
                                         {"$out": "z"}], cursor={})
    check(list(db.z.find()) == [{"_id": 1, "a": 1}, {"_id": 2}], "$documents + $out")
    db.command("aggregate", 1, pipeline=[{"$documents": [{"_id": 2, "b": 2}, {"_id": 3}]},
                                         {"$merge": {"into": "z"}}], cursor={})
    check(list(db.z.find()) == [{"_id": 1, "a": 1}, {"_id": 2, "b": 2}, {"_id": 3}],
          "$documents + $merge: %r" % list(db.z.find()))
    try:
        db.command("aggregate", 1, pipeline=[{"$documents": [{"_id": 9}, {"_id": 2}]},
                                             {"$merge": {"into": "z", "whenMatched": "fail"}}],
                   cursor={})
        check(False, "$merge whenMatched fail on an existing _id succeeded")
    except OperationFailure as e:
        check(e.code == 11000 and e.details["keyPattern"] == {"_id": 1} and
              e.details["keyValue"] == {"_id": 2}, "$merge's duplicate key: %r" % e.details)
    check(db.z.count_documents({}) == 3, "the failed $merge wrote nothing")


def min_max(db):
    """find with min/max: the hinted index's keys from min (included) to max (excluded)."""
    c = db.mm
    c.insert_many([{"_id": i, "a": i % 5, "b": i} for i in range(20)])
    c.create_index([("a", 1), ("b", -1)])
    docs = list(c.find())

    def ids(cur):
        return [d["_id"] for d in cur]

    check(ids(c.find(min={"_id": 5}, max={"_id": 9}).hint("_id_")) == [5, 6, 7, 8],
          "_id_ from 5 to 9")
    check(ids(c.find({"b": {"$gt": 6}}, min={"_id": 5}, max={"_id": 9}).hint([("_id", 1)])) ==
          [7, 8], "the filter applies within the bounds")
    # a compound index with a descending field, in the index's order (computed here)
    key = lambda d: (d["a"], -d["b"])  # noqa: E731
    want = [d["_id"] for d in sorted(docs, key=key) if (1, -100) <= key(d) < (2, -100)]
    check(ids(c.find(min={"a": 1, "b": 100}, max={"a": 2, "b": 100}).hint("a_1_b_-1")) == want,
          "compound bounds: %r" % want)
    want = [d["_id"] for d in sorted(docs, key=key) if key(d) >= (3, -100)]
    check(ids(c.find(min={"a": 3, "b": 100}).hint("a_1_b_-1")) == want, "min only")
    want = [d["_id"] for d in sorted(docs, key=key) if key(d) < (1, -100)]
    check(ids(c.find(max={"a": 1, "b": 100}).hint("a_1_b_-1")) == want, "max only")
    check(ids(c.find(min={"_id": 5}, max={"_id": 9}).hint("_id_").sort("_id", -1).limit(2)) ==
          [8, 7], "sort and limit over the bounds")
    plan = c.find(min={"_id": 5}, max={"_id": 9}).hint("_id_").explain()
    check(plan["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "_id_",
          "explain names the hinted index")
    expect_code(51173, lambda: list(c.find(min={"_id": 5})))
    expect_code(51174, lambda: list(c.find(min={"a": 1}).hint("a_1_b_-1")))
    expect_code(51174, lambda: list(c.find(min={"b": 1, "a": 1}).hint("a_1_b_-1")))
    expect_code(51175, lambda: list(c.find(min={"_id": 9}, max={"_id": 5}).hint("_id_")))


def dots_and_dollars(db):
    """Field names with '.' and a leading '$' through the insert and update commands (PyMongo
    3.11 refuses a top-level '$' name itself, so the commands are sent as written): stored and
    read back; a '$' name inside _id and an update operator's '$' path get 52
    DollarPrefixedFieldName; a value shaped as {"$oid": ..} is refused and changes nothing."""
    r = db.command(SON([("insert", "dd"), ("documents", [{"_id": 1, "$a": 1, "a.b": 2,
                                                          "x": {"$b": 3, "c.d": 4}}])]))
    check(r.get("n") == 1 and "writeErrors" not in r, "insert with '$' and '.' names: %r" % r)
    got = db.dd.find_one({"_id": 1})
    check(got == {"_id": 1, "$a": 1, "a.b": 2, "x": {"$b": 3, "c.d": 4}}, "read back: %r" % got)
    r = db.command(SON([("insert", "dd"), ("documents", [{"_id": {"$a": 1}}])]))
    check([e["code"] for e in r.get("writeErrors", [])] == [52], "a '$' name in _id: %r" % r)
    r = db.command(SON([("update", "dd"), ("updates", [{"q": {"_id": 1}, "u": {"$set": {"$h": 1}}}])]))
    check([e["code"] for e in r.get("writeErrors", [])] == [52], "$set of a '$' path: %r" % r)
    r = db.command(SON([("update", "dd"), ("updates", [{"q": {"_id": 1}, "u": [{"$set": {"w": {
        "$setField": {"field": {"$literal": "$oid"}, "input": {}, "value": "12"}}}}]}])]))
    check(len(r.get("writeErrors", [])) == 1 and r.get("nModified") == 0,
          "a value shaped as an Extended JSON wrapper: %r" % r)
    r = db.command(SON([("update", "dd"), ("updates", [{"q": {"_id": 1}, "u": [{"$replaceWith": {
        "$setField": {"field": {"$literal": "$n"}, "input": "$$ROOT", "value": 5}}}]}])]))
    check(r.get("nModified") == 1, "$setField of '$n': %r" % r)
    got = db.dd.find_one({"$expr": {"$eq": [{"$getField": {"$literal": "$n"}}, 5]}})
    check(got is not None and got.get("$n") == 5 and "w" not in got, "after the updates: %r" % got)


def local_sessions(cl):
    """aggregate: 1 with $listLocalSessions: a session shows once a command carried its lsid,
    with its id and lastUse, and is gone after endSessions; a bad spec is refused."""
    adm = cl.admin
    with cl.start_session() as s:
        adm.command("ping", session=s)
        sid = s.session_id["id"]
        rows = list(adm.aggregate([{"$listLocalSessions": {}},
                                   {"$match": {"_id.id": sid}}], session=s))
        check(len(rows) == 1, "the session is listed: %r" % rows)
        check(len(rows[0]["_id"]["uid"]) == 32 and "lastUse" in rows[0],
              "a session document's shape: %r" % rows[0])
        rows = list(adm.aggregate([{"$listLocalSessions": {"allUsers": True}},
                                   {"$match": {"_id.id": sid}}, {"$count": "n"}]))
        check(rows == [{"n": 1}], "allUsers lists it too: %r" % rows)
        adm.command("endSessions", [s.session_id])
        rows = list(adm.aggregate([{"$listLocalSessions": {}},
                                   {"$match": {"_id.id": sid}}]))
        check(rows == [], "the session is gone after endSessions: %r" % rows)
    expect_code(40415, lambda: list(adm.aggregate([{"$listLocalSessions": {"bogus": 1}}])))


def history_lost(db, store):
    """A change stream resumed from a point the store trimmed gets 286 ChangeStreamHistoryLost
    (after `docfs changes-keep` keeps only 4 KiB of the database's events)."""
    with db.c.watch() as s:
        db.c.insert_one({"_id": "first"})
        tok = s.next()["_id"]
    r = subprocess.run([wirelib.DOCFS, "changes-keep", store, db.name, "4096"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "docfs changes-keep: %s %s" % (r.stdout, r.stderr))
    db.c.insert_many([{"_id": i, "pad": "x" * 200} for i in range(100)])

    def resume(target):
        with target.watch(resume_after=tok, max_await_time_ms=100) as s:
            s.try_next()
    expect_code(286, resume, db.c)
    expect_code(286, resume, db)


def body(srv):
    cl = pymongo.MongoClient("mongodb://" + srv.sock.replace("/", "%2F"),
                             serverSelectionTimeoutMS=5000)
    dbhash(cl.h, srv.store)
    validators(cl.h, srv.store)
    documents(cl.h)
    min_max(cl.h)
    local_sessions(cl)
    dots_and_dollars(cl.h)
    history_lost(cl.hl, srv.store)
    cl.close()


if __name__ == "__main__":
    warnings.simplefilter("ignore", DeprecationWarning)  # PyMongo 3.11 on min/max
    wirelib.main("cmds_test", body, failures=(AssertionError, OperationFailure))
