#!/usr/bin/python3
"""upipe_test.py - update pipelines and a command's let over the wire (issue 27), with
PyMongo (Debian's 3.11) against `docfs serve` on a Unix socket: update_one/update_many/
find_one_and_update/bulk_write with an array of stages, upserts over the filter's seed,
$$NOW, the _id kept or refused, stages an update cannot have; let on update, delete,
findAndModify, find and aggregate (expressions evaluated once, $$name in $expr, in
pipelines and in $lookup's sub-pipeline); keyPattern and keyValue of duplicate key errors
(writeErrors, findAndModify's error reply); collations (ICU) on find, count, distinct,
aggregate, update, delete, findAndModify and bulk writes, planned as collection scans.
Every expected value is computed here. Run by
meson (suite wire) with DOCFS set to the binary."""
import datetime
import os
import sys

import pymongo
from pymongo import ReturnDocument, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wirelib  # noqa: E402  (check, expect_code, the count of checks)

check = wirelib.check
expect_code = wirelib.expect_code


def expect_error(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except (OperationFailure, WriteError) as e:
        return e
    raise AssertionError("expected an error")


def pipelines(db):
    c = db.items
    c.insert_many([{"_id": 1, "name": "pen", "price": 2, "qty": 10},
                   {"_id": 2, "name": "ink", "price": 5, "qty": 3, "old": True},
                   {"_id": 3, "name": "pad", "price": 4, "qty": 0, "old": True}])
    r = c.update_one({"_id": 1}, [{"$set": {"total": {"$multiply": ["$price", "$qty"]}}}])
    check((r.matched_count, r.modified_count) == (1, 1), "update_one counts")
    check(c.find_one({"_id": 1})["total"] == 20, "update_one $set from fields")

    r = c.update_many({"old": True}, [{"$unset": "old"},
                                      {"$addFields": {"v": {"$add": ["$qty", 1]}}}])
    check((r.matched_count, r.modified_count) == (2, 2), "update_many counts")
    check(list(c.find({"_id": {"$in": [2, 3]}}, {"_id": 0, "old": 1, "v": 1})) ==
          [{"v": 4}, {"v": 1}], "update_many $unset + $addFields")

    r = c.update_one({"_id": 2}, [{"$set": {"price": 5}}])
    check((r.matched_count, r.modified_count) == (1, 0), "a no-op pipeline modifies nothing")

    c.update_one({"_id": 3}, [{"$replaceWith": {"label": {"$toUpper": "$name"}}}])
    check(c.find_one({"_id": 3}) == {"_id": 3, "label": "PAD"}, "$replaceWith keeps the _id")
    c.update_one({"_id": 3}, [{"$project": {"_id": 0, "label": 1}}])
    check(c.find_one({"_id": 3}) == {"_id": 3, "label": "PAD"}, "$project without _id keeps it")

    before = datetime.datetime.utcnow().replace(microsecond=0)
    c.update_many({}, [{"$set": {"at": "$$NOW"}}])
    ats = [d["at"] for d in c.find({}, {"at": 1})]
    check(len(set(ats)) == 1 and isinstance(ats[0], datetime.datetime), "one $$NOW: %r" % ats)
    check(ats[0] >= before - datetime.timedelta(seconds=1), "$$NOW is now")

    e = expect_error(c.update_one, {"_id": 1}, [{"$set": {"_id": 7}}])
    check(e.code == 66 and "immutable" in str(e), "changing _id: %s" % e)
    doc1 = c.find_one({"_id": 1})
    e = expect_error(c.update_many, {}, [{"$set": {"z": 1}}, {"$group": {"_id": None}}])
    check("$group is not allowed to be used within an update" in str(e), "$group: %s" % e)
    e = expect_error(c.update_one, {"_id": 1}, [{"$set": {"z": 1}}],
                     array_filters=[{"e": 1}])
    check("arrayFilters may not be specified for pipeline-style updates" in str(e),
          "arrayFilters: %s" % e)
    check(c.find_one({"_id": 1}) == doc1, "refused pipelines changed nothing")

    # upsert: the pipeline runs over the filter's equality fields
    r = c.update_one({"sku": "k7", "size": 3},
                     [{"$set": {"area": {"$multiply": ["$size", "$size"]}}}], upsert=True)
    check(r.upserted_id is not None, "upsert result")
    d = c.find_one({"_id": r.upserted_id}, {"_id": 0})
    check(d == {"size": 3, "sku": "k7", "area": 9}, "upserted document %r" % d)
    r = c.update_one({"_id": 50}, [{"$set": {"n": {"$ifNull": ["$n", 0]}}}], upsert=True)
    check(r.upserted_id == 50 and c.find_one({"_id": 50}) == {"_id": 50, "n": 0},
          "upsert with the filter's _id")

    d = c.find_one_and_update({"_id": 2}, [{"$set": {"qty": {"$add": ["$qty", 1]}}}],
                              projection={"qty": 1}, return_document=ReturnDocument.AFTER)
    check(d == {"_id": 2, "qty": 4}, "find_one_and_update with a pipeline: %r" % d)
    d = c.find_one_and_update({"_id": 99}, [{"$set": {"q": 1}}], upsert=True,
                              return_document=ReturnDocument.AFTER)
    check(d == {"_id": 99, "q": 1}, "find_one_and_update upsert with a pipeline: %r" % d)

    r = c.bulk_write([UpdateOne({"_id": 1}, [{"$set": {"b": "$name"}}]),
                      UpdateMany({"_id": {"$in": [1, 2]}},
                                 [{"$set": {"m": {"$concat": ["$name", "!"]}}}])])
    check((r.matched_count, r.modified_count) == (3, 3), "bulk_write counts")
    check(c.find_one({"_id": 1}, {"_id": 0, "b": 1, "m": 1}) == {"b": "pen", "m": "pen!"},
          "bulk_write pipelines")


def lets(db):
    c = db.people
    c.insert_many([{"_id": 1, "name": "ann", "age": 30}, {"_id": 2, "name": "bob", "age": 40},
                   {"_id": 3, "name": "cy", "age": 50}])
    # find: $$name in $expr
    r = db.command("find", "people", filter={"$expr": {"$gt": ["$age", "$$min"]}},
                   let={"min": {"$add": [30, 5]}})
    check([d["_id"] for d in r["cursor"]["firstBatch"]] == [2, 3], "find with let")
    # aggregate: in $match's $expr, $project, and a $lookup sub-pipeline
    db.tags.insert_many([{"_id": 1, "t": "o"}, {"_id": 2, "t": "y"}])
    r = db.command("aggregate", "people", cursor={}, let={"who": "bob", "lit": {"$literal": "$x"}},
                   pipeline=[{"$match": {"$expr": {"$eq": ["$name", "$$who"]}}},
                             {"$lookup": {"from": "tags", "as": "tags",
                                          "pipeline": [{"$match": {"$expr": {
                                              "$eq": ["$t", {"$substrCP": ["$$who", 1, 1]}]}}}]}},
                             {"$project": {"_id": 0, "name": 1, "lit": "$$lit", "tags": 1}}])
    check(r["cursor"]["firstBatch"] == [{"name": "bob", "lit": "$x",
                                         "tags": [{"_id": 1, "t": "o"}]}],
          "aggregate with let: %r" % r["cursor"]["firstBatch"])
    # {$rand: {}} in let is one number for the command; in a stage one per document
    r = db.command("aggregate", "people", cursor={}, let={"r": {"$rand": {}}},
                   pipeline=[{"$project": {"_id": 0, "r": "$$r", "own": {"$rand": {}}}}])
    rows = r["cursor"]["firstBatch"]
    check(len(rows) == 3 and len({d["r"] for d in rows}) == 1 and
          all(isinstance(d["r"], float) and 0 <= d["r"] < 1 for d in rows) and
          len({d["own"] for d in rows}) == 3, "$rand: %r" % rows)
    # update: let in the filter and in the pipeline, evaluated once
    r = db.command("update", "people", let={"n": "bob", "inc": {"$multiply": [2, 5]}},
                   updates=[{"q": {"$expr": {"$eq": ["$name", "$$n"]}},
                             "u": [{"$set": {"age": {"$add": ["$age", "$$inc"]}}}]}])
    check((r["n"], r["nModified"]) == (1, 1), "update with let %r" % r)
    check(c.find_one({"_id": 2})["age"] == 50, "update with let: the value")
    # an update statement's constants ("c") join the command's let
    r = db.command("update", "people", let={"n": "bob"},
                   updates=[{"q": {"$expr": {"$eq": ["$name", "$$n"]}},
                             "u": [{"$set": {"c": {"$concat": ["$$n", "$$suffix"]}}}],
                             "c": {"suffix": "!"}}])
    check(r["nModified"] == 1 and c.find_one({"_id": 2})["c"] == "bob!", "update with c %r" % r)
    # findAndModify
    r = db.command("findAndModify", "people", query={"$expr": {"$eq": ["$_id", "$$id"]}},
                   update=[{"$set": {"tag": "$$t"}}], let={"id": 3, "t": "z"}, new=True)
    check(r["value"] == {"_id": 3, "name": "cy", "age": 50, "tag": "z"},
          "findAndModify with let %r" % r["value"])
    # delete
    r = db.command("delete", "people", let={"a": 50},
                   deletes=[{"q": {"$expr": {"$eq": ["$age", "$$a"]}}, "limit": 0}])
    check(r["n"] == 2 and c.count_documents({}) == 1, "delete with let %r" % r)
    # errors: a bad name, an undefined variable, let not a document
    e = expect_error(db.command, "find", "people", filter={}, let={"Bad": 1})
    check("invalid character for a user variable name" in str(e), "bad let name: %s" % e)
    e = expect_error(db.command, "aggregate", "people", cursor={},
                     pipeline=[{"$project": {"x": "$$nope"}}], let={"y": 1})
    check("undefined variable" in str(e), "undefined variable: %s" % e)
    expect_code(14, db.command, "find", "people", filter={}, let=5)
    check(c.count_documents({}) == 1, "refused commands changed nothing")


def dup_keys(db):
    c = db.dk
    c.create_index([("x", 1)], unique=True)
    c.create_index([("u.a", 1), ("b", -1)], unique=True)
    c.insert_one({"_id": 1, "x": "foo", "u": {"a": 1}, "b": "q, b: z"})
    cases = [
        (lambda: c.insert_one({"_id": 1}), {"_id": 1}, {"_id": 1}),
        (lambda: c.insert_one({"_id": 2, "x": "foo"}), {"x": 1}, {"x": "foo"}),
        # a compound key over a dotted path, a value that looks like the message's syntax
        (lambda: c.insert_one({"_id": 3, "u": {"a": 1}, "b": "q, b: z"}),
         {"u.a": 1, "b": -1}, {"u.a": 1, "b": "q, b: z"}),
        (lambda: c.update_one({"_id": 5}, {"$set": {"x": "foo"}}, upsert=True),
         {"x": 1}, {"x": "foo"}),
        (lambda: c.update_one({"_id": 1}, [{"$set": {"x": "bar"}}]) and
         c.insert_one({"_id": 6, "x": "baz"}) and
         c.update_one({"_id": 6}, [{"$set": {"x": "bar"}}]), {"x": 1}, {"x": "bar"}),
        (lambda: c.find_one_and_update({"_id": 2}, {"$set": {"x": "bar"}}, upsert=True),
         {"x": 1}, {"x": "bar"}),
        (lambda: c.bulk_write([UpdateOne({"_id": 7}, {"$set": {"u": {"a": 1}, "b": "q, b: z"}},
                                         upsert=True)]),
         {"u.a": 1, "b": -1}, {"u.a": 1, "b": "q, b: z"}),
    ]
    for i, (fn, pattern, value) in enumerate(cases):
        try:
            fn()
        except (DuplicateKeyError, BulkWriteError, OperationFailure) as e:
            d = e.details
            if "writeErrors" in d:
                d = d["writeErrors"][0]
            check(d.get("code") == 11000 and d.get("keyPattern") == pattern and
                  d.get("keyValue") == value, "duplicate key case %d: %r" % (i, d))
            continue
        raise AssertionError("duplicate key case %d raised nothing" % i)
    # any other error has neither field
    e = expect_error(c.update_one, {"_id": 1}, {"$inc": {"x": 1}})
    check(e.code != 11000 and "keyPattern" not in e.details, "no keyPattern: %r" % e.details)


def collations(db):
    c = db.col
    try:
        list(c.find({}, collation={"locale": "en"}))
    except OperationFailure as e:
        if "built without it" in str(e):  # meson found no libicu-dev: said, not hidden
            print("upipe_test: collations not tested: this docfs was built without ICU")
            return
        raise
    c.create_index([("x", 1)])
    c.insert_many([{"_id": 1, "x": "ping"}, {"_id": 2, "x": "PING"}, {"_id": 3, "x": "b"},
                   {"_id": 4, "x": "B"}, {"_id": 5, "x": "a"}, {"_id": 6, "x": 7},
                   {"_id": 7, "x": ["Ping", "z"]}, {"_id": 8, "x": {"k": "PiNg"}}])
    ci = {"locale": "en_US", "strength": 2}
    ids = lambda cur: [d["_id"] for d in cur]
    check(ids(c.find({"x": "PING"}, collation=ci).sort("_id", 1)) == [1, 2, 7],
          "find under strength 2 (array elements too)")
    check(ids(c.find({"x": "PING"}).sort("_id", 1)) == [2], "find without a collation")
    check(ids(c.find({"x": {"k": "ping"}}, collation=ci)) == [8], "embedded document strings")
    check(ids(c.find({"x": {"$in": ["a", "B"]}}, collation=ci).sort("_id", 1)) == [3, 4, 5],
          "$in under strength 2")
    check(ids(c.find({"x": {"$gt": "b", "$lt": "q"}}, collation=ci).sort("_id", 1)) == [1, 2, 7],
          "range under strength 2")
    # ICU's order: a < b < B at strength 3 (binary: B < a < b)
    tert = {"locale": "en", "strength": 3}
    got = [d["x"] for d in c.find({"_id": {"$in": [3, 4, 5]}}, collation=tert).sort("x", 1)]
    check(got == ["a", "b", "B"], "sort under a collation: %r" % got)
    got = [d["x"] for d in c.find({"_id": {"$in": [3, 4, 5]}}).sort("x", 1)]
    check(got == ["B", "a", "b"], "binary sort: %r" % got)
    # numericOrdering
    db.num.insert_many([{"_id": 1, "v": "10"}, {"_id": 2, "v": "9"}])
    check(ids(db.num.find({}, collation={"locale": "en", "numericOrdering": True}).sort("v", 1))
          == [2, 1], "numericOrdering")
    check(c.count_documents({"x": "ping"}, collation=ci) == 3, "countDocuments")
    check(db.command("count", "col", query={"x": "ping"}, collation=ci)["n"] == 3, "count")
    check(sorted(c.distinct("x", {"_id": {"$in": [1, 2, 3]}}, collation=ci)) == ["b", "ping"],
          "distinct keeps the first of equal values")
    check(ids(c.aggregate([{"$match": {"x": "b"}}, {"$sort": {"_id": -1}}], collation=ci))
          == [4, 3], "aggregate's leading $match/$sort")
    # a cursor read by getMore after the command that made the collation ended
    cur = c.find({"x": {"$exists": True}}, collation=ci, batch_size=2).sort("x", 1)
    check(len(list(cur)) == 8, "getMore of a collated cursor")
    # the planner never uses an index under a collation (it holds binary keys)
    e = c.find({"x": "PING"}, collation=ci).explain()
    check(e["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN" and
          e["queryPlanner"]["parsedQuery"] == {"x": {"$eq": "PING"}},
          "explain: COLLSCAN, the operand as written: %r" % e["queryPlanner"])
    check(c.find({"x": "PING"}).explain()["queryPlanner"]["winningPlan"]["stage"] != "COLLSCAN",
          "without a collation the index is used")
    # writes
    r = c.update_many({"x": "ping"}, {"$set": {"hit": 1}}, collation=ci)
    check((r.matched_count, r.modified_count) == (3, 3), "update_many with a collation")
    d = c.find_one_and_update({"x": "B"}, {"$set": {"f": 1}}, sort=[("_id", -1)],
                              collation=ci, return_document=ReturnDocument.AFTER)
    check(d["_id"] == 4 and d["f"] == 1, "find_one_and_update with a collation %r" % d)
    r = c.bulk_write([UpdateOne({"x": "A"}, {"$set": {"g": 1}}, collation=ci)])
    check(r.modified_count == 1 and c.find_one({"_id": 5})["g"] == 1, "bulk_write with a collation")
    check(c.delete_many({"x": "PING"}, collation=ci).deleted_count == 3, "delete_many")
    # what docfs refuses under a collation, and bad collations
    for fn in [lambda: list(c.find({"x": {"$regex": "^b"}}, collation=ci)),
               lambda: list(c.find({"x": "b"}, collation=ci).hint([("x", 1)])),
               lambda: list(c.aggregate([{"$group": {"_id": "$x"}}], collation=ci)),
               lambda: list(c.find({}, collation={"locale": "xx_NOPE"})),
               lambda: list(c.find({}, collation={"locale": "en", "strength": 9})),
               lambda: list(c.find({}, collation={"strength": 2}))]:
        expect_error(fn)
    check(ids(c.find({"x": "b"}, collation={"locale": "simple"}).sort("_id", 1)) == [3],
          "the simple locale is binary")


def body(srv):
    cl = pymongo.MongoClient("mongodb://" + srv.sock.replace("/", "%2F"),
                             serverSelectionTimeoutMS=5000)
    pipelines(cl.t)
    lets(cl.t)
    dup_keys(cl.t)
    collations(cl.t)
    cl.close()


if __name__ == "__main__":
    wirelib.main("upipe_test", body)
