#!/usr/bin/python3
"""concurrency_test.py - 200 PyMongo clients at once (the connection-pool ceiling MongoDB's
conventions recommend), each on its own connection to one `docfs serve`, each inserting,
counting its own documents, reading them through a getMore cursor and updating them, in
rounds; every client's view must be exactly its own writes, and the totals right at the
end. Run by meson (suite wire) with DOCFS set to the binary."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import pymongo

DOCFS = os.environ.get("DOCFS", "build/docfs")
CLIENTS, ROUNDS = 200, 5


def main():
    tmp = tempfile.mkdtemp(prefix="docfs-wireconc-")
    os.mkdir(tmp + "/store")
    sock = tmp + "/s.sock"
    srv = subprocess.Popen([DOCFS, "serve", tmp + "/store", "--listen", sock, "--log",
                            tmp + "/log"], stdout=subprocess.PIPE,
                           stderr=open(tmp + "/err", "w"), text=True)
    errors = []
    try:
        if "listening on" not in srv.stdout.readline():
            raise AssertionError("docfs serve did not start")
        uri = "mongodb://" + sock.replace("/", "%2F")

        def client(k):
            try:
                cl = pymongo.MongoClient(uri, serverSelectionTimeoutMS=60000, maxPoolSize=1,
                                         socketTimeoutMS=120000)
                c = cl.t.c
                for i in range(ROUNDS):
                    c.insert_one({"w": k, "i": i})
                    n = c.count_documents({"w": k})
                    if n != i + 1:
                        errors.append("client %d round %d: count %d" % (k, i, n))
                    got = sorted(d["i"] for d in c.find({"w": k}).batch_size(2))
                    if got != list(range(i + 1)):
                        errors.append("client %d round %d: find %r" % (k, i, got))
                    c.update_many({"w": k}, {"$inc": {"n": 1}})
                cl.close()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("client %d: %r" % (k, e))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise AssertionError("%d errors, first: %s" % (len(errors), errors[:3]))
        cl = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
        total = cl.t.c.count_documents({})
        # the document of round i was updated ROUNDS - i times
        incs = sum(d["n"] for d in cl.t.c.find({}, {"n": 1}))
        cl.close()
        want = CLIENTS * ROUNDS * (ROUNDS + 1) // 2
        if total != CLIENTS * ROUNDS or incs != want:
            raise AssertionError("totals: %d documents, %d increments (want %d, %d)" %
                                 (total, incs, CLIENTS * ROUNDS, want))
        srv.terminate()
        rc = srv.wait(timeout=60)
        err = open(tmp + "/err").read()
        if rc != 0 or "Sanitizer" in err or "runtime error" in err:
            raise AssertionError("docfs serve: exit %d %s" % (rc, err[-2000:]))
        r = subprocess.run([DOCFS, "check", tmp + "/store"], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("docfs check: " + r.stdout + r.stderr)
        print("concurrency_test: %d clients x %d rounds, all consistent" % (CLIENTS, ROUNDS))
    finally:
        if srv.poll() is None:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("concurrency_test: FAILED: %s" % e)
        sys.exit(1)
