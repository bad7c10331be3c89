#!/usr/bin/python3
"""pymongo_test.py - PyMongo (Debian's python3-pymongo 3.11) against `docfs serve` over a
Unix socket and TCP: handshake, CRUD, write errors, cursors (batchSize + getMore,
killCursors, a cursor's snapshot while writers go on), indexes (unique -> 11000), explain
(COLLSCAN, then IXSCAN after create_index), aggregate ($group, $out), count and distinct,
findAndModify, collections and databases, and the error codes. Every check compares with a
value computed here. Run by meson (suite wire) with DOCFS set to the binary."""
import os
import subprocess
import threading
import time

import pymongo
from bson.int64 import Int64
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

import wirelib
from wirelib import DOCFS, check, expect_code


def body(srv):
    run(srv.sock, srv.port)
    idle_cursors(srv.tmp)


def idle_cursors(tmp):
    """--cursor-timeout-s closes a cursor left idle; a used one lives on."""
    store = os.path.join(tmp, "store2")
    os.mkdir(store)
    sock = os.path.join(tmp, "idle.sock")
    args = [DOCFS, "serve", store, "--listen", sock, "--cursor-timeout-s", "2"]
    srv = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        check("listening on" in srv.stdout.readline(), "the idle server did not start")
        cl = pymongo.MongoClient("mongodb://" + sock.replace("/", "%2F"),
                                 serverSelectionTimeoutMS=5000)
        db = cl.t
        db.c.insert_many([{"_id": i} for i in range(10)])
        idle = db.command("find", "c", batchSize=1)["cursor"]["id"]
        busy = db.command("find", "c", batchSize=1)["cursor"]["id"]
        for _ in range(5):
            time.sleep(1)
            db.command("getMore", Int64(busy), collection="c", batchSize=1)
        expect_code(43, db.command, "getMore", Int64(idle), collection="c")
        cl.close()
    finally:
        srv.terminate()
        srv.wait(timeout=30)


def run(sock, port):
    cl = pymongo.MongoClient("mongodb://" + sock.replace("/", "%2F"),
                             serverSelectionTimeoutMS=5000)
    tcp = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=5000)

    # handshake
    info = cl.server_info()
    check(info["version"] == "7.0.0", "buildInfo version %r" % info["version"])
    check(cl.admin.command("ping")["ok"] == 1.0, "ping")
    hello = cl.admin.command("hello")
    check(hello["isWritablePrimary"] is True and hello["maxWireVersion"] == 21,
          "hello %r" % hello)
    check("topologyVersion" not in hello and "compression" not in hello, "hello extras")
    im = cl.admin.command("isMaster")
    check(im["ismaster"] is True and im["logicalSessionTimeoutMinutes"] == 30, "isMaster")
    fcv = cl.admin.command("getParameter", 1, featureCompatibilityVersion=1)
    check(fcv["featureCompatibilityVersion"]["version"] == "7.0", "getParameter")
    check(cl.admin.command("getLog", "startupWarnings")["log"] == [], "getLog")
    check("find" in cl.admin.command("listCommands")["commands"], "listCommands")
    check("system" in cl.admin.command("hostInfo"), "hostInfo")
    check(cl.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [],
          "connectionStatus")
    expect_code(76, cl.admin.command, "replSetGetStatus")

    db = cl.shop
    c = db.items
    # CRUD
    docs = [{"_id": i, "x": i % 10, "tags": ["t%d" % (i % 3)], "name": "item%03d" % i}
            for i in range(500)]
    r = c.insert_many(docs)
    check(r.inserted_ids == list(range(500)), "insert_many ids")
    check(c.count_documents({}) == 500, "count_documents")
    check(c.estimated_document_count() == 500, "estimated_document_count")
    check(c.count_documents({"x": 3}) == 50, "count x=3")
    check(c.find_one({"_id": 42}) == docs[42], "find_one")
    oid = c.insert_one({"name": "no id"}).inserted_id
    check(c.find_one({"_id": oid})["name"] == "no id", "ObjectId generated")
    check(c.delete_one({"_id": oid}).deleted_count == 1, "delete by ObjectId")
    check(tcp.shop.items.find_one({"_id": 7}) == docs[7], "the TCP listener sees the same")
    got = list(c.find({"x": {"$gte": 8}}, {"name": 1, "_id": 0}).sort([("_id", -1)]).skip(2)
               .limit(5))
    want = [{"name": d["name"]} for d in sorted(docs, key=lambda d: -d["_id"])
            if d["x"] >= 8][2:7]
    check(got == want, "find sort/skip/limit/projection %r" % got)

    u = c.update_many({"x": 1}, {"$inc": {"n": 2}, "$set": {"seen": True}})
    check(u.matched_count == 50 and u.modified_count == 50, "update_many %r" % u.raw_result)
    check(c.count_documents({"n": 2, "seen": True}) == 50, "update_many result")
    u = c.update_one({"_id": 1000}, {"$set": {"x": 99}}, upsert=True)
    check(u.upserted_id == 1000 and u.matched_count == 0, "upsert %r" % u.raw_result)
    u = c.update_one({"_id": 1}, {"$set": {"tags.$[e]": "T"}}, array_filters=[{"e": "t1"}])
    check(u.modified_count == 1 and c.find_one({"_id": 1})["tags"] == ["T"], "arrayFilters")
    u = c.replace_one({"_id": 2}, {"name": "replaced"})
    check(u.modified_count == 1 and c.find_one({"_id": 2}) == {"_id": 2, "name": "replaced"},
          "replace_one")
    u = c.update_one({"_id": 3}, {"$set": {"x": 3}})
    check(u.matched_count == 1 and u.modified_count == 0, "nModified 0 when unchanged")
    d = c.delete_many({"x": 9})
    check(d.deleted_count == 50, "delete_many %r" % d.raw_result)
    d = c.delete_one({"x": 8})
    check(d.deleted_count == 1, "delete_one")
    check(c.count_documents({}) == 500 + 1 - 51, "count after deletes")

    # write errors: ordered stops, unordered goes on
    try:
        c.insert_many([{"_id": 5000}, {"_id": 10}, {"_id": 5001}])
        raise AssertionError("duplicate _id accepted")
    except BulkWriteError as e:
        det = e.details
        check(det["nInserted"] == 1 and det["writeErrors"][0]["index"] == 1 and
              det["writeErrors"][0]["code"] == 11000, "ordered %r" % det)
        check("E11000 duplicate key error collection: shop.items index: _id_ dup key: "
              "{ _id: 10 }" == det["writeErrors"][0]["errmsg"], "E11000 message")
    check(c.find_one({"_id": 5001}) is None, "ordered insert stopped")
    try:
        c.insert_many([{"_id": 6000}, {"_id": 10}, {"_id": 6001}, {"_id": 11}, {"_id": 6002}],
                      ordered=False)
        raise AssertionError("duplicate _id accepted")
    except BulkWriteError as e:
        det = e.details
        check(det["nInserted"] == 3 and [w["index"] for w in det["writeErrors"]] == [1, 3],
              "unordered %r" % det)
    check(c.count_documents({"_id": {"$in": [6000, 6001, 6002]}}) == 3, "unordered inserts")
    try:
        c.update_one({"_id": 4}, {"$set": {"_id": 5}})
        raise AssertionError("_id changed")
    except OperationFailure as e:
        check(e.code == 66, "ImmutableField %r" % e.code)
    # $inc of a string: 14 TypeMismatch, as MongoDB answers (issue 29)
    c.insert_one({"_id": "str", "s": "x"})
    e = expect_code(14, c.update_one, {"_id": "str"}, {"$inc": {"s": 1}})
    check(e.details.get("codeName") == "TypeMismatch" if e.details else True, "codeName %r" % e.details)
    expect_code(14, c.update_one, {"_id": "str"}, {"$inc": {"n": "one"}})
    c.delete_one({"_id": "str"})

    # cursors
    ids = [d["_id"] for d in c.find({}, {"_id": 1}).sort("_id", 1).batch_size(7)]
    check(ids == sorted(ids) and len(ids) == c.count_documents({}), "batchSize iteration")
    raw = db.command("find", "items", filter={}, sort={"_id": 1}, batchSize=3)
    cid = raw["cursor"]["id"]
    check(len(raw["cursor"]["firstBatch"]) == 3 and cid != 0 and isinstance(cid, Int64),
          "a cursor id after the first batch")
    more = db.command("getMore", Int64(cid), collection="items", batchSize=4)
    check([d["_id"] for d in more["cursor"]["nextBatch"]] == ids[3:7], "getMore batch")
    k = db.command("killCursors", "items", cursors=[Int64(cid), Int64(12345)])
    check(k["cursorsKilled"] == [cid] and k["cursorsNotFound"] == [12345], "killCursors %r" % k)
    expect_code(43, db.command, "getMore", Int64(cid), collection="items")
    expect_code(14, db.command, "getMore", 5, collection="items")
    single = db.command("find", "items", batchSize=2, singleBatch=True)
    check(single["cursor"]["id"] == 0 and len(single["cursor"]["firstBatch"]) == 2,
          "singleBatch")
    zero = db.command("find", "items", batchSize=0)
    check(zero["cursor"]["firstBatch"] == [] and zero["cursor"]["id"] != 0, "batchSize 0")
    db.command("killCursors", "items", cursors=[zero["cursor"]["id"]])
    # batches stop before 16 MiB: three 7 MB documents come as 2 + 1
    big = "x" * (7 * 1024 * 1024)
    db.big.insert_many([{"_id": i, "s": big} for i in range(3)])
    raw = db.command("find", "big")
    check(len(raw["cursor"]["firstBatch"]) == 2 and raw["cursor"]["id"] != 0,
          "a first batch under 16 MiB: %d" % len(raw["cursor"]["firstBatch"]))
    more = db.command("getMore", Int64(raw["cursor"]["id"]), collection="big")
    check([d["_id"] for d in more["cursor"]["nextBatch"]] == [2] and
          more["cursor"]["id"] == 0, "the rest in a getMore")
    check(sum(len(d["s"]) for d in db.big.find()) == 3 * len(big), "big documents intact")
    db.big.drop()
    # endSessions closes the session's cursors
    with cl.start_session() as sess:
        raw = db.command("find", "items", batchSize=2, session=sess)
        cl.admin.command("endSessions", [sess.session_id])
        expect_code(43, db.command, "getMore", Int64(raw["cursor"]["id"]), collection="items")
    # a cursor's results are one snapshot while writers go on
    snap = c.find({"x": 5}).sort("_id", 1).batch_size(4)
    first = [next(snap)["_id"] for _ in range(4)]
    c.delete_many({"x": 5})
    c.insert_one({"_id": 7777, "x": 5})
    rest = [d["_id"] for d in snap]
    check(first + rest == [i for i in range(500) if i % 10 == 5], "snapshot cursor %r" % rest)
    check(c.count_documents({"x": 5}) == 1, "the delete happened")

    # indexes and explain
    plan = c.find({"x": 3}).explain()["queryPlanner"]["winningPlan"]
    check(plan["stage"] == "COLLSCAN", "COLLSCAN before the index: %r" % plan)
    check(c.create_index("x") == "x_1", "create_index name")
    plan = c.find({"x": 3}).explain()["queryPlanner"]["winningPlan"]
    check(plan["stage"] == "FETCH" and plan["inputStage"]["stage"] == "IXSCAN" and
          plan["inputStage"]["indexName"] == "x_1", "IXSCAN after create_index: %r" % plan)
    ex = db.command("explain", {"find": "items", "filter": {"x": 3}},
                    verbosity="executionStats")
    check(ex["executionStats"]["nReturned"] == 50 and
          ex["executionStats"]["totalKeysExamined"] == 50, "executionStats %r" %
          ex["executionStats"]["nReturned"])
    ex = db.command("explain", {"count": "items", "query": {"x": 3}}, verbosity="queryPlanner")
    check("queryPlanner" in ex, "explain count")
    before = c.count_documents({"xx": 1})
    ex = db.command("explain", {"update": "items", "updates": [
        {"q": {"x": 3}, "u": {"$set": {"xx": 1}}, "multi": True}]}, verbosity="executionStats")
    st = ex["executionStats"]["executionStages"]
    check(ex["queryPlanner"]["winningPlan"]["stage"] == "UPDATE" and
          ex["queryPlanner"]["winningPlan"]["inputStage"]["inputStage"]["stage"] == "IXSCAN" and
          st["nMatched"] == 50 and st["nWouldModify"] == 50, "explain of update %r" % st)
    ex = db.command("explain", {"delete": "items", "deletes": [{"q": {"x": 3}, "limit": 1}]},
                    verbosity="executionStats")
    check(ex["executionStats"]["executionStages"]["nWouldDelete"] == 1, "explain of delete")
    ex = db.command("explain", {"findAndModify": "items", "query": {"x": 3},
                                "remove": True}, verbosity="queryPlanner")
    check(ex["queryPlanner"]["winningPlan"]["stage"] == "DELETE", "explain of findAndModify")
    check(c.count_documents({"xx": 1}) == before and c.count_documents({"x": 3}) == 50,
          "explain wrote nothing")
    names = sorted(ix["name"] for ix in c.list_indexes())
    check(names == ["_id_", "x_1"], "list_indexes %r" % names)
    c.create_index([("name", pymongo.ASCENDING)], unique=True, sparse=True)
    try:
        c.insert_one({"_id": 9999, "name": "item003"})
        raise AssertionError("unique index let a duplicate in")
    except DuplicateKeyError as e:
        check(e.code == 11000 and "index: name_1 dup key" in str(e), "unique: %s" % e)
    c.drop_index("x_1")
    check(sorted(ix["name"] for ix in c.list_indexes()) == ["_id_", "name_1"], "drop_index")
    c.drop_indexes()
    check([ix["name"] for ix in c.list_indexes()] == ["_id_"], "drop_indexes")
    expect_code(27, c.drop_index, "nope_1")
    expect_code(26, db.command, "listIndexes", "nosuch")

    # aggregate
    agg = list(c.aggregate([{"$match": {"x": {"$lt": 3}}},
                            {"$group": {"_id": "$x", "n": {"$sum": 1}}},
                            {"$sort": {"_id": 1}}]))
    want = {}
    for d in c.find({"x": {"$lt": 3}}):
        want[d["x"]] = want.get(d["x"], 0) + 1
    check(agg == [{"_id": k, "n": want[k]} for k in sorted(want)], "aggregate %r" % agg)
    big = list(c.aggregate([{"$sort": {"_id": 1}}], batchSize=5))
    check(len(big) == c.count_documents({}), "aggregate with getMore")
    c.aggregate([{"$match": {"x": 0}}, {"$project": {"name": 1}}, {"$out": "zeros"}])
    check(db.zeros.count_documents({}) == c.count_documents({"x": 0}), "$out")
    check(list(db.missing.aggregate([{"$count": "n"}])) == [], "aggregate of nothing")
    db.missing.aggregate([{"$match": {}}, {"$out": "fromnothing"}])
    check("missing" not in db.list_collection_names(), "$out of nothing made its source")
    db.fromnothing.drop()
    expect_code(16, db.command, "insert", "items", documents=[])
    aex = db.command("aggregate", "items", pipeline=[{"$group": {"_id": "$x"}}], explain=True)
    check("stages" in aex or "queryPlanner" in aex, "aggregate explain")

    # count, distinct
    check(db.command("count", "items", query={"x": 4})["n"] == c.count_documents({"x": 4}),
          "count command")
    check(db.command("count", "nosuch")["n"] == 0, "count of a missing collection")
    check(c.distinct("x") == sorted(set(d.get("x") for d in c.find() if "x" in d)),
          "distinct")
    check(c.distinct("tags", {"_id": {"$lt": 10}}) ==
          sorted(set(t for d in c.find({"_id": {"$lt": 10}}) for t in d.get("tags", []))),
          "distinct unwinds arrays")

    # findAndModify
    d = c.find_one_and_update({"_id": 20}, {"$set": {"fam": 1}},
                              return_document=pymongo.ReturnDocument.AFTER)
    check(d["fam"] == 1 and d["_id"] == 20, "find_one_and_update after")
    d = c.find_one_and_update({"_id": 21}, {"$set": {"fam": 2}})
    check("fam" not in d, "find_one_and_update before")
    d = c.find_one_and_update({"_id": 8888}, {"$set": {"fam": 3}}, upsert=True,
                              return_document=pymongo.ReturnDocument.AFTER)
    check(d == {"_id": 8888, "fam": 3}, "find_one_and_update upsert %r" % d)
    d = c.find_one_and_delete({"_id": 8888})
    check(d["fam"] == 3 and c.find_one({"_id": 8888}) is None, "find_one_and_delete")
    d = c.find_one_and_replace({"_id": 22}, {"r": 1},
                               return_document=pymongo.ReturnDocument.AFTER)
    check(d == {"_id": 22, "r": 1}, "find_one_and_replace")
    check(c.find_one_and_update({"_id": -1}, {"$set": {"a": 1}}) is None, "no match: None")
    d = c.find_one_and_update({"x": 7}, {"$set": {"first": True}}, sort=[("_id", -1)],
                              projection={"_id": 1})
    check(d == {"_id": max(x["_id"] for x in c.find({"x": 7}))}, "sort + projection")

    # collections and databases
    db.create_collection("capped1", capped=True, size=4096, max=3)
    for i in range(5):
        db.capped1.insert_one({"_id": i})
    check([d["_id"] for d in db.capped1.find()] == [2, 3, 4], "capped max 3")
    opts = db.capped1.options()
    check(opts.get("capped") is True and opts.get("max") == 3, "options %r" % opts)
    expect_code(48, db.command, "create", "capped1")
    db.tocap.insert_many([{"_id": i} for i in range(10)])
    db.command("convertToCapped", "tocap", size=4096, max=4)
    check([d["_id"] for d in db.tocap.find()] == [6, 7, 8, 9] and
          db.tocap.options().get("capped") is True, "convertToCapped keeps the newest 4")
    db.tocap.drop()
    expect_code(26, db.command, "convertToCapped", "nosuch", size=4096)
    colls = sorted(db.list_collection_names())
    check(colls == ["capped1", "items", "zeros"], "list_collection_names %r" % colls)
    check([x["name"] for x in db.list_collections(filter={"name": "items"})] == ["items"],
          "listCollections filter")
    check("shop" in cl.list_database_names(), "list_database_names")
    st = db.command("collStats", "items")
    check(st["count"] == c.count_documents({}) and st["ns"] == "shop.items", "collStats")
    cs = list(c.aggregate([{"$collStats": {"storageStats": {"scale": 1}, "count": {}}}]))
    check(len(cs) == 1 and cs[0]["storageStats"]["count"] == c.count_documents({}) and
          cs[0]["count"]["count"] == c.count_documents({}) and cs[0]["ns"] == "shop.items",
          "$collStats %r" % cs)
    expect_code(238, lambda: list(c.aggregate([{"$collStats": {"latencyStats": {}}}])))
    tot = list(c.aggregate([{"$collStats": {"storageStats": {}}},
                            {"$group": {"_id": None, "v": {"$sum": "$storageStats.count"}}}]))
    check(tot == [{"_id": None, "v": c.count_documents({})}], "$collStats then $group %r" % tot)
    check(sorted(db.list_collection_names()) == colls, "$collStats left no collection")
    ds = db.command("dbStats")
    check(ds["collections"] == 3 and ds["db"] == "shop", "dbStats %r" % ds)
    expect_code(26, db.command, "collStats", "nosuch")
    db.drop_collection("zeros")
    check("zeros" not in db.list_collection_names(), "drop")
    db.drop_collection("zeros")  # MongoDB 7.0: dropping nothing is fine
    cl.other.c.insert_one({"a": 1})
    check("other" in cl.list_database_names(), "a database made by an insert")
    cl.drop_database("other")
    check("other" not in cl.list_database_names(), "dropDatabase")

    # operations: serverStatus, currentOp, killOp, top, the profiler
    ss = cl.admin.command("serverStatus")
    check(ss["connections"]["current"] >= 2 and ss["opcounters"]["insert"] >= 500,
          "serverStatus %r" % {k: ss[k] for k in ("connections", "opcounters")})
    check(isinstance(cl.admin.command("currentOp")["inprog"], list), "currentOp")
    expect_code(2, cl.admin.command, "killOp", op=987654321)
    ops = list(cl.admin.aggregate([{"$currentOp": {"allUsers": True}},
                                   {"$match": {"op": "command"}}]))
    check(any(o.get("command", {}).get("aggregate") == 1 for o in ops) and
          all(o["op"] == "command" for o in ops), "$currentOp %r" % ops)
    check("shop.items" in cl.admin.command("top")["totals"], "top")
    db.set_profiling_level(pymongo.ALL)
    check(db.profiling_level() == pymongo.ALL, "profiling level 2")
    c.find_one({"_id": 33})
    db.set_profiling_level(pymongo.OFF)
    prof = list(db.system.profile.find({"op": "query", "ns": "shop.items"}))
    check(len(prof) >= 1 and prof[-1]["command"]["filter"] == {"_id": 33},
          "system.profile %r" % prof[-1:])
    check(prof[-1]["client"] == "pid %d" % os.getpid(), "the profile's client: %r" %
          prof[-1].get("client"))
    # tailable cursors on a capped collection (awaitData waits for the next insert)
    db.create_collection("log", capped=True, size=100000)
    db.log.insert_many([{"_id": i} for i in range(3)])
    t0 = db.command("find", "log", tailable=True, awaitData=True, batchSize=2)
    tid = t0["cursor"]["id"]
    check([d["_id"] for d in t0["cursor"]["firstBatch"]] == [0, 1] and tid != 0,
          "tailable first batch %r" % t0)
    m = db.command("getMore", Int64(tid), collection="log", maxTimeMS=200)
    check([d["_id"] for d in m["cursor"]["nextBatch"]] == [2], "tailable getMore")
    started = time.time()
    m = db.command("getMore", Int64(tid), collection="log", maxTimeMS=300)
    waited = time.time() - started
    check(m["cursor"]["nextBatch"] == [] and m["cursor"]["id"] == tid and waited >= 0.25,
          "an empty awaitData batch after maxTimeMS (%.2f s)" % waited)
    threading.Timer(0.3, lambda: db.log.insert_one({"_id": 3})).start()
    started = time.time()
    m = db.command("getMore", Int64(tid), collection="log", maxTimeMS=5000)
    check([d["_id"] for d in m["cursor"]["nextBatch"]] == [3] and time.time() - started < 4,
          "awaitData returns the document inserted meanwhile")
    db.command("killCursors", "log", cursors=[Int64(tid)])
    lim = db.command("find", "log", tailable=True, limit=2)
    check(lim["cursor"]["id"] == 0 and len(lim["cursor"]["firstBatch"]) == 2,
          "a tailable find ends at its limit")
    expect_code(2, db.command, "find", "items", tailable=True)
    expect_code(2, db.command, "find", "log", tailable=True, sort={"_id": -1})
    got = [d["_id"] for d in db.log.find(cursor_type=pymongo.CursorType.TAILABLE)]
    check(got == [0, 1, 2, 3], "PyMongo's TAILABLE cursor %r" % got)
    db.log.drop()
    # change streams: watch() on a collection and a database, resume, updateLookup, $match
    ch = db.chg
    ch.insert_one({"_id": 0})
    with ch.watch(max_await_time_ms=200) as cs:
        threading.Timer(0.2, lambda: ch.insert_one({"_id": "w1", "v": 1})).start()
        ev = cs.next()
        check(ev["operationType"] == "insert" and ev["documentKey"] == {"_id": "w1"} and
              ev["fullDocument"] == {"_id": "w1", "v": 1} and
              ev["ns"] == {"db": "shop", "coll": "chg"}, "watch(): the insert %r" % ev)
        token = cs.resume_token
    ch.update_one({"_id": "w1"}, {"$set": {"a": 1}})
    with ch.watch(resume_after=token, full_document="updateLookup",
                  max_await_time_ms=200) as cs:
        ev = cs.next()
        check(ev["operationType"] == "update" and
              ev["updateDescription"]["updatedFields"] == {"a": 1} and
              ev["fullDocument"] == {"_id": "w1", "v": 1, "a": 1},
              "resumed with updateLookup %r" % ev)
    with ch.watch([{"$match": {"operationType": "delete"}}], max_await_time_ms=200) as cs:
        ch.insert_one({"_id": "w2"})
        ch.delete_one({"_id": "w2"})
        ev = cs.next()
        check(ev["operationType"] == "delete" and ev["documentKey"] == {"_id": "w2"},
              "a $match after $changeStream %r" % ev)
    with db.watch(max_await_time_ms=200) as cs:
        db.chg2.insert_one({"_id": 5})
        ev = cs.next()
        check(ev["ns"] == {"db": "shop", "coll": "chg2"}, "a database's stream %r" % ev)
    raw = db.command("aggregate", "chg", pipeline=[{"$changeStream": {}}], cursor={})
    check(raw["cursor"]["firstBatch"] == [] and "_data" in
          raw["cursor"]["postBatchResumeToken"], "postBatchResumeToken %r" % raw)
    db.command("killCursors", "chg", cursors=[raw["cursor"]["id"]])
    expect_code(238, db.command, "aggregate", "chg", cursor={},
                pipeline=[{"$changeStream": {"fullDocumentBeforeChange": "required"}}])
    ch.drop()
    db.chg2.drop()
    # renameCollection, validate
    db.tmp1.insert_one({"_id": 1})
    cl.admin.command("renameCollection", "shop.tmp1", to="shop.tmp2")
    check(db.tmp2.find_one() == {"_id": 1} and "tmp1" not in db.list_collection_names(),
          "renameCollection")
    expect_code(48, cl.admin.command, "renameCollection", "shop.tmp2", to="shop.items")
    expect_code(238, cl.admin.command, "renameCollection", "shop.tmp2", to="other.tmp2")
    db.tmp2.drop()
    v = db.command("validate", "items")
    check(v["valid"] is True and v["nrecords"] == c.count_documents({}), "validate %r" % v)
    expect_code(238, db.command, "collMod", "items", viewOn="x", pipeline=[])  # no views
    # collations (upipe_test.py tests them): a locale docfs cannot make is refused, never
    # ignored (an ignored collation matches other documents)
    bad = {"locale": "xx_NOPE", "strength": 2}
    expect_code(2, lambda: list(c.find({}, collation=bad)))
    expect_code(2, c.count_documents, {}, collation=bad)
    expect_code(2, c.distinct, "x", collation=bad)
    expect_code(2, c.find_one_and_delete, {"_id": -1}, collation=bad)
    # a write's let binds its values in $expr ($$name); a value may be an expression
    db.letc.insert_many([{"_id": 1, "n": "a"}, {"_id": 2, "n": "b"}])
    r = db.command("delete", "letc", let={"v": "b"},
                   deletes=[{"q": {"$or": [{"$expr": {"$eq": ["$n", "$$v"]}}]}, "limit": 0}])
    check(r["n"] == 1 and [d["_id"] for d in db.letc.find()] == [1], "delete with let %r" % r)
    r = db.command("update", "letc", let={"v": 1},
                   updates=[{"q": {"$expr": {"$eq": ["$_id", "$$v"]}}, "u": {"$set": {"m": 1}}}])
    check(r["nModified"] == 1, "update with let %r" % r)
    r = db.command("delete", "letc", let={"v": {"$add": [0, 1]}},
                   deletes=[{"q": {"$expr": {"$eq": ["$_id", "$$v"]}}, "limit": 0}])
    check(r["n"] == 1 and db.letc.count_documents({}) == 0, "delete with an expression let")
    db.letc.drop()
    r = db.command("aggregate", "items", pipeline=[{"$match": {"$expr": {"$eq": ["$_id", "$$v"]}}}],
                   cursor={}, let={"v": -5})
    check(r["cursor"]["firstBatch"] == [], "aggregate with let")
    check(list(c.find({"_id": -1}, collation={"locale": "simple"})) == [], "simple collation")
    # an update statement's sort came in MongoDB 8.0: 7.0's unknown field, nothing run
    expect_code(40415, db.command, "update", "items",
                updates=[{"q": {}, "u": {"$set": {"sorted": 1}}, "sort": {"_id": 1}}])
    check(c.count_documents({"sorted": 1}) == 0, "update with sort ran nothing")

    # errors
    expect_code(59, db.command, "noSuchCommand")
    e = expect_code(2, lambda: list(c.find({"x": {"$foo": 1}})))
    check("$foo" in str(e), "BadValue names the operator")
    expect_code(2, lambda: list(db.nocoll.find({"x": {"$foo": 1}})))
    expect_code(9, db.command, "aggregate", "items", pipeline=[])
    expect_code(73, db.command, "find", "bad$name")
    cl.close()
    tcp.close()


if __name__ == "__main__":
    wirelib.main("pymongo_test", body, tcp=True)
