#!/usr/bin/python3
"""mongos_pymongo.py URI - PyMongo (Debian's) through `docfs router -o listen=`, after
mongos_session.js ran: the client sees a mongos; finds merged across shards (sort, skip,
limit, projection), counts, distinct, explain; updates and deletes by the router's rules
(the shard key immutable, a document without it refused); an unsharded collection on the
primary shard; the refusals of what is not routed. SHARDS names the shard mounts, whose
own files are read to check where documents went. Exits 1 with the first failure."""
import os
import sys

import pymongo
from pymongo.errors import OperationFailure, BulkWriteError, WriteError

uri = sys.argv[1]
shards = os.environ["SHARDS"].split(",")
client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)
failures = 0


def check(what, got, want):
    global failures
    if got != want:
        print("FAIL: %s: got %r, want %r" % (what, got, want))
        failures += 1


def on_shard(i, coll, q="{}"):
    with open("%s/test/%s/query/%s?count=1" % (shards[i], coll, q)) as f:
        return int(f.read())


def refused(what, fn, code=None):
    global failures
    try:
        fn()
    except (OperationFailure, WriteError, BulkWriteError) as e:
        if code is not None and getattr(e, "code", None) != code:
            print("FAIL: %s: code %r, want %r (%s)" % (what, getattr(e, "code", None), code, e))
            failures += 1
        return
    print("FAIL: %s: not refused" % what)
    failures += 1


check("is_mongos", client.is_mongos, True)
users = client.test.users
# the seed session left users 0-99 with user.age = _id
check("sorted merge, skip, limit",
      [d["_id"] for d in users.find({}, sort=[("user.age", -1)], skip=2, limit=4)],
      [97, 96, 95, 94])
check("a range over three shards",
      [d["user"]["age"] for d in users.find({"user.age": {"$gte": 18, "$lt": 23}}).sort("user.age")],
      [18, 19, 20, 21, 22])
check("projection", list(users.find({"_id": 3}, {"_id": 0, "user.name": 1})), [{"user": {"name": "u3"}}])
check("count_documents (aggregate)", users.count_documents({"user.age": {"$lt": 50}}), 50)
check("estimated_document_count (count)", users.estimated_document_count(), 100)
check("distinct", sorted(users.distinct("user.age", {"user.age": {"$lt": 3}})), [0, 1, 2])
check("a batch past 101 (getMore)", len(list(users.find().batch_size(30))), 100)
ex = users.find({"user.age": {"$gt": 25}}).explain()
check("explain", sorted(s["shardName"] for s in ex["queryPlanner"]["winningPlan"]["shards"]),
      ["shard02", "shard03"])
check("aggregate $group over the shards",
      list(users.aggregate([{"$match": {"user.age": {"$gte": 30}}},
                            {"$group": {"_id": None, "n": {"$sum": 1}, "top": {"$max": "$user.age"}}}])),
      [{"_id": None, "n": 70, "top": 99}])

r = users.update_many({"user.age": {"$gte": 90}}, {"$set": {"old": True}})
check("update_many", (r.matched_count, r.modified_count), (10, 10))
check("update_many reached shard03", on_shard(2, "users", '{"old": true}'), 10)
r = users.update_one({"_id": 7}, {"$inc": {"visits": 1}})
check("update_one by _id", (r.matched_count, r.modified_count), (1, 1))
refused("a replacement not targeting its shard key's owner",
        lambda: users.replace_one({"_id": 8}, {"user": {"name": "eight", "age": 8}}))
r = users.replace_one({"_id": 8, "user.age": 8}, {"user": {"name": "eight", "age": 8}})
check("replace_one", r.modified_count, 1)
check("replaced", users.find_one({"_id": 8}), {"_id": 8, "user": {"name": "eight", "age": 8}})
refused("a shard key change", lambda: users.update_one({"_id": 5}, {"$set": {"user.age": 50}}))
check("the refused update changed nothing", users.find_one({"_id": 5})["user"]["age"], 5)
refused("a document without the shard key", lambda: users.insert_one({"_id": 1000, "name": "x"}))
r = users.insert_many([{"_id": 100 + i, "user": {"age": 10 * i}} for i in range(3)])
check("insert_many by shard key", len(r.inserted_ids), 3)
check("inserted on their shards", (on_shard(0, "users", '{"_id": 100}'), on_shard(2, "users", '{"_id": 102}')), (1, 1))
from pymongo import ReturnDocument
check("find_one_and_update by shard key",
      users.find_one_and_update({"user.age": 9}, {"$inc": {"visits": 2}},
                                return_document=ReturnDocument.AFTER)["visits"], 2)
check("find_one_and_update by _id", users.find_one_and_update({"_id": 9}, {"$inc": {"visits": 1}},
                                                              projection={"visits": 1}),
      {"_id": 9, "visits": 2})
refused("a single find_one_and_update over several shards",
        lambda: users.find_one_and_update({"user.age": {"$gt": 5}}, {"$set": {"z": 1}}))
check("find_one_and_delete", users.find_one_and_delete({"_id": 98, "user.age": 98}),
      {"_id": 98, "user": {"name": "u98", "age": 98}, "old": True})
r = users.delete_one({"_id": 99})
check("delete_one", r.deleted_count, 1)
r = users.delete_many({"_id": {"$gte": 100}})
check("delete_many", r.deleted_count, 3)
check("count after the deletes", users.count_documents({}), 98)


def bulk_error(what, fn):
    try:
        fn()
    except BulkWriteError as e:
        return e.details
    check(what + ": refused", "not refused", "a BulkWriteError")
    return {"nInserted": None, "writeErrors": []}


# a duplicate _id in the middle of an insert across shards: ordered stops there, unordered
# goes on; the error is at the request's index either way (as mongos answers)
d = bulk_error("ordered insert_many with a duplicate", lambda: users.insert_many(
    [{"_id": 300, "user": {"age": 95}}, {"_id": 7, "user": {"age": 7}}, {"_id": 301, "user": {"age": 50}}]))
check("ordered: inserted before the duplicate", d["nInserted"], 1)
check("ordered: the duplicate's index and code",
      [(e["index"], e["code"]) for e in d["writeErrors"]], [(1, 11000)])
check("ordered: nothing after the duplicate", users.find_one({"_id": 301}), None)
d = bulk_error("unordered insert_many with a duplicate", lambda: users.insert_many(
    [{"_id": 302, "user": {"age": 96}}, {"_id": 7, "user": {"age": 7}}, {"_id": 303, "user": {"age": 51}}],
    ordered=False))
check("unordered: inserted around the duplicate", d["nInserted"], 2)
check("unordered: the duplicate's index and code",
      [(e["index"], e["code"]) for e in d["writeErrors"]], [(1, 11000)])
check("unordered: the documents after it are there",
      sorted(x["_id"] for x in users.find({"_id": {"$gte": 300}})), [300, 302, 303])
check("delete_many of them", users.delete_many({"_id": {"$gte": 300}}).deleted_count, 3)

plain = client.test.plain
plain.insert_many([{"_id": i, "x": i * i} for i in range(10)])
check("an unsharded collection lives on the primary",
      [on_shard(i, "plain") for i in range(3)], [10, 0, 0])
check("find on it", [d["x"] for d in plain.find({"x": {"$gt": 20}}).sort("x", -1)], [81, 64, 49, 36, 25])
plain.create_index([("x", 1)], name="x_1")
ex = plain.find({"x": 49}).explain()
check("its explain", ex["queryPlanner"]["winningPlan"]["stage"], "SINGLE_SHARD")
check("update on it", plain.update_one({"x": 49}, {"$set": {"y": 1}}).modified_count, 1)
check("upsert on it", plain.update_one({"_id": 50}, {"$set": {"x": 0}}, upsert=True).upserted_id, 50)
check("find_one_and_update upsert", plain.find_one_and_update({"_id": 51}, {"$set": {"x": 1}}, upsert=True,
                                                              return_document=ReturnDocument.AFTER),
      {"_id": 51, "x": 1})
check("find_one_and_update sorted", plain.find_one_and_update({}, {"$set": {"top": True}}, sort=[("x", -1)])["x"], 81)
check("list_indexes", sorted(i["name"] for i in plain.list_indexes()), ["_id_", "x_1"])
check("index_information", users.index_information()["user.age_1"]["key"], [("user.age", 1)])
plain.create_index([("y", 1)], name="y_1")
plain.drop_index("y_1")
check("drop_index", sorted(i["name"] for i in plain.list_indexes()), ["_id_", "x_1"])
check("drop_index removed it on every shard", [os.path.exists("%s/test/plain/.indexes/y_1" % m) for m in shards],
      [False, False, False])
refused("drop_index of a missing index", lambda: plain.drop_index("nope_1"), 27)
refused("drop_index of _id_", lambda: plain.drop_index("_id_"), 72)
client.test.create_collection("made")
check("create makes it on every shard", [os.path.isdir("%s/test/made" % m) for m in shards],
      [True, True, True])
refused("create again", lambda: client.test.command("create", "made"), 48)
refused("create capped", lambda: client.test.create_collection("capped", capped=True, size=4096), 238)
client.test.made.insert_one({"_id": 1})
client.test.made.drop()
check("drop removes it on every shard", [os.path.exists("%s/test/made" % m) for m in shards],
      [False, False, False])
client.test.nope.drop()  # dropping what does not exist succeeds (MongoDB 7.0)
check("find on a missing collection", list(client.test.nope.find()), [])
check("count_documents on a missing collection", client.test.nope.count_documents({}), 0)
check("list_collection_names", sorted(client.test.list_collection_names()), ["plain", "users"])
check("list_database_names", "test" in client.list_database_names(), True)
check("config.shards", [d["_id"] for d in client.config.shards.find().sort("_id", 1)],
      ["shard01", "shard02", "shard03"])
check("config.collections key", client.config.collections.find_one({"_id": "test.users"})["key"],
      {"user.age": 1})
refused("a write to config", lambda: client.config.settings.insert_one({"_id": "x"}), 238)
refused("a command not routed", lambda: client.test.command("collStats", "users"), 238)
refused("an admin command elsewhere", lambda: client.test.command({"split": "test.users", "middle": {"user.age": 70}}), 13)
client.close()
if failures:
    sys.exit(1)
print("mongos_pymongo.py: all checks passed")
