#!/usr/bin/python3
"""mongos_bench.py URI ROUTER_MOUNT N - mongos.sh's measurements (see there)."""
import json
import os
import sys
import time

import pymongo
from bson.min_key import MinKey
from bson.max_key import MaxKey

uri, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
shards = os.environ["SHARDS"].split(",")
c = pymongo.MongoClient(uri)
admin = c.admin
for i, s in enumerate(shards):
    admin.command({"addShard": s, "name": "shard0%d" % (i + 1)})
admin.command("balancerStop")
for i, z in enumerate(["junior", "middle", "senior"]):
    admin.command({"addShardToZone": "shard0%d" % (i + 1), "zone": z})
admin.command("enableSharding", "test")
for coll in ("users_w", "users_f"):
    c.test[coll].create_index([("user.age", 1)])
    for lo, hi, z in ((MinKey(), 20, "junior"), (21, 40, "middle"), (41, MaxKey(), "senior")):
        admin.command({"updateZoneKeyRange": "test." + coll, "min": {"user.age": lo},
                       "max": {"user.age": hi}, "zone": z})
    admin.command({"shardCollection": "test." + coll, "key": {"user.age": 1}})


def users(a, b):
    return [{"_id": i, "user": {"name": "u%d" % i, "age": i % 100}, "n": i} for i in range(a, b)]


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def wire_insert():
    for a in range(0, n, 1000):
        c.test.users_w.insert_many(users(a, min(n, a + 1000)))


def mount_insert():
    for a in range(0, n, 1000):
        with open(mnt + "/test/users_f/.insert", "w") as f:
            f.write("".join(json.dumps(d) + "\n" for d in users(a, min(n, a + 1000))))


def read(q):
    with open(mnt + "/test/users_f/query/" + q) as f:
        return f.read()


rows = []
t_w, _ = timed(wire_insert)
t_m, _ = timed(mount_insert)
rows.append(("insert %d users (batches of 1,000)" % n, t_w, t_m))
assert c.test.users_w.count_documents({}) == n and int(read("{}?count=1")) == n

ages = [7, 30, 55, 90] * 25
t_w, got_w = timed(lambda: [[d["n"] for d in c.test.users_w.find({"user.age": a}, limit=10, sort=[("n", 1)])] for a in ages])
t_m, got_m = timed(lambda: [[json.loads(l)["n"] for l in read('{"user.age": %d}?limit=10&sort={"n": 1}' % a).splitlines()] for a in ages])
assert got_w == got_m, "targeted finds differ"
rows.append(("100 targeted finds, limit 10 (one shard)", t_w, t_m))

qs = [{"n": {"$mod": [7, k]}} for k in range(7)] * 3
t_w, got_w = timed(lambda: [c.test.users_w.count_documents(q) for q in qs])
t_m, got_m = timed(lambda: [int(read('{"n": {"$mod": [7, %d]}}?count=1' % q["n"]["$mod"][1])) for q in qs])
assert got_w == got_m, "broadcast counts differ"
rows.append(("21 broadcast count_documents (an aggregate on the wire)", t_w, t_m))
t_w, got_w = timed(lambda: [int(c.test.command("count", "users_w", query=q)["n"]) for q in qs])
assert got_w == got_m, "broadcast counts differ"
rows.append(("21 broadcast count commands", t_w, t_m))

print("| through the router | wire (PyMongo) | mount (files) | wire / mount |")
print("|---|---:|---:|---:|")
for what, w, m in rows:
    print("| %s | %.3f s | %.3f s | %.2fx |" % (what, w, m, w / m))
