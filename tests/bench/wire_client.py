#!/usr/bin/python3
# tests/bench/wire_client.py - the client side of tests/bench/wire.sh: each operation done
# through PyMongo (the wire protocol), through the mount's files, and through Python's sqlite3
# module, timed inside this process (time.perf_counter) so that starting Python, connecting
# and loading data stay out of every figure. Run by wire.sh; not a test.
#
#   insert URI DB COLL FILE BATCH       insert_many of FILE's JSON lines (Extended JSON,
#                                       parsed untimed), BATCH documents per call
#   find   wire URI DB COLL FILTER REPEAT IDS      | fuse PATH REPEAT
#          | sqlite DB SQL REPEAT IDS   one run untimed, then the best of REPEAT timed runs;
#                                       the wire and sqlite3 write the matching _ids to IDS
#   agg    wire URI DB COLL PIPELINE REPEAT | fuse PATH REPEAT | sqlite DB SQL REPEAT
#   points wire|wireraw URI DB COLL | fuse DIR | sqlite DB SQL, then CLIENTS IDSFILE
#                                       CLIENTS processes each read their share of IDSFILE's
#                                       _ids one at a time (find_one / open+read / SELECT),
#                                       and parse each document (wireraw: find_one
#                                       returning RawBSONDocument, nothing decoded but
#                                       user.age)
# Each prints one JSON line: {"seconds": ..., "n": ..., ...} (the result, for wire.sh to check).
# Only the standard library, PyMongo and its bson (Debian's python3-pymongo 3.11).
import json
import multiprocessing as mp
import resource
import sqlite3
import sys
import time


def cpu():
	"""This process's CPU seconds (user + system)."""
	r = resource.getrusage(resource.RUSAGE_SELF)
	return r.ru_utime + r.ru_stime


def out(**kw):
	print(json.dumps(kw, sort_keys=True))


def best_of(fn, repeat):
	"""fn() once untimed, then REPEAT timed runs: (best seconds, fn()'s last result)."""
	res = fn()
	best = None
	for _ in range(repeat):
		t0 = time.perf_counter()
		res = fn()
		t = time.perf_counter() - t0
		best = t if best is None or t < best else best
	return best, res


def client(uri):
	import pymongo
	return pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)


def raw_codec():
	"""Codec options that leave each document as its BSON bytes (RawBSONDocument)."""
	from bson.codec_options import CodecOptions
	from bson.raw_bson import RawBSONDocument
	return CodecOptions(document_class=RawBSONDocument)


def cmd_insert(uri, db, coll, path, batch):
	from bson import json_util
	batch = int(batch)
	with open(path) as f:
		docs = [json_util.loads(line) for line in f]
	c = client(uri)
	col = c[db][coll]
	c.admin.command("ping")
	n = 0
	c0 = cpu()
	t0 = time.perf_counter()
	for i in range(0, len(docs), batch):
		n += len(col.insert_many(docs[i:i + batch]).inserted_ids)
	t = time.perf_counter() - t0
	c1 = cpu()
	out(seconds=t, n=n, count=col.count_documents({}), client_cpu=c1 - c0)


def cmd_find(mode, args):
	if mode == "wire":
		uri, db, coll, flt, repeat, ids = args
		from bson import json_util
		col = client(uri)[db][coll]
		q = json_util.loads(flt)
		t, docs = best_of(lambda: list(col.find(q)), int(repeat))
		# the same without decoding the documents into dicts: the server and the transport
		raw = col.with_options(codec_options=raw_codec())
		t_raw, rdocs = best_of(lambda: list(raw.find(q)), int(repeat))
		plan = json.dumps(col.find(q).explain().get("queryPlanner", {}).get("winningPlan", {}))
		with open(ids, "w") as f:
			f.writelines(str(d["_id"]) + "\n" for d in docs)
		out(seconds=t, n=len(docs), plan=plan, raw_seconds=t_raw, raw_n=len(rdocs))
	elif mode == "fuse":
		path, repeat = args

		def run():
			with open(path, "rb") as f:
				return f.read().count(b"\n")
		t, n = best_of(run, int(repeat))
		out(seconds=t, n=n)
	else:
		dbpath, sql, repeat, ids = args
		con = sqlite3.connect(dbpath)
		t, rows = best_of(lambda: con.execute(sql).fetchall(), int(repeat))
		with open(ids, "w") as f:
			f.writelines(json.loads(r[0])["_id"]["$oid"] + "\n" for r in rows)
		out(seconds=t, n=len(rows))


def cmd_agg(mode, args):
	if mode == "wire":
		uri, db, coll, pipeline, repeat = args
		from bson import json_util
		col = client(uri)[db][coll]
		p = json_util.loads(pipeline)
		t, res = best_of(lambda: list(col.aggregate(p)), int(repeat))
		groups = {str(d["_id"]): d["n"] for d in res}
	elif mode == "fuse":
		path, repeat = args

		def run():
			with open(path, "rb") as f:
				return [json.loads(line) for line in f]
		t, res = best_of(run, int(repeat))
		groups = {str(d["_id"]): d["n"] for d in res}
	else:
		dbpath, sql, repeat = args
		con = sqlite3.connect(dbpath)
		t, res = best_of(lambda: con.execute(sql).fetchall(), int(repeat))
		groups = {str(k): n for k, n in res}
	out(seconds=t, n=sum(groups.values()), groups=groups)


def point_worker(mode, target, ids, barrier, results):
	"""Reads each of IDS once after BARRIER; puts (found, sum of user.age, the reads' CPU
	seconds) in RESULTS."""
	found = agesum = 0
	if mode in ("wire", "wireraw"):
		from bson import ObjectId
		uri, db, coll = target
		col = client(uri)[db][coll]
		if mode == "wireraw":  # only the age read out of the BSON, no dict built
			col = col.with_options(codec_options=raw_codec())
		col.find_one({"_id": ObjectId(ids[0])})  # connect and handshake before the clock
		oids = [ObjectId(h) for h in ids]
		barrier.wait()
		c0 = cpu()
		for oid in oids:
			d = col.find_one({"_id": oid})
			if d is not None:
				found += 1
				agesum += d["user"]["age"]
	elif mode == "fuse":
		(d,) = target
		paths = ["%s/%s.json" % (d, h) for h in ids]
		barrier.wait()
		c0 = cpu()
		for p in paths:
			try:
				with open(p, "rb") as f:
					doc = json.loads(f.read())
			except FileNotFoundError:
				continue
			found += 1
			agesum += doc["user"]["age"]
	else:
		dbpath, sql = target
		con = sqlite3.connect(dbpath)
		con.execute(sql, (ids[0],)).fetchall()
		barrier.wait()
		c0 = cpu()
		for h in ids:
			row = con.execute(sql, (h,)).fetchone()
			if row is not None:
				found += 1
				agesum += json.loads(row[0])["user"]["age"]
	results.put((found, agesum, cpu() - c0))


def cmd_points(mode, args):
	clients, idsfile = int(args[-2]), args[-1]
	target = args[:-2]
	with open(idsfile) as f:
		ids = [line.strip() for line in f if line.strip()]
	share = (len(ids) + clients - 1) // clients
	ctx = mp.get_context("fork")
	barrier = ctx.Barrier(clients + 1)
	results = ctx.Queue()
	procs = [ctx.Process(target=point_worker,
			     args=(mode, target, ids[i * share:(i + 1) * share], barrier, results))
		 for i in range(clients)]
	for p in procs:
		p.start()
	barrier.wait(timeout=120)  # every client is connected: the clock starts
	t0 = time.perf_counter()
	got = [results.get(timeout=3600) for _ in procs]
	t = time.perf_counter() - t0
	for p in procs:
		p.join()
	bad = [p.exitcode for p in procs if p.exitcode != 0]
	out(seconds=t, n=sum(g[0] for g in got), agesum=sum(g[1] for g in got), reads=len(ids),
	    failed_clients=len(bad), client_cpu=sum(g[2] for g in got))


def main(argv):
	op = argv[1]
	if op == "insert":
		cmd_insert(*argv[2:])
	elif op == "find":
		cmd_find(argv[2], argv[3:])
	elif op == "agg":
		cmd_agg(argv[2], argv[3:])
	elif op == "points":
		cmd_points(argv[2], argv[3:])
	else:
		sys.exit("wire_client.py: unknown operation '%s'" % op)


if __name__ == "__main__":
	main(sys.argv)
