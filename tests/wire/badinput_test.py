#!/usr/bin/python3
"""badinput_test.py - `docfs serve` given bytes that are not MongoDB messages, over raw
sockets: garbage, a 2 GB length prefix, a truncated OP_MSG, an OP_MSG whose section runs
past its end, an unknown opcode, BSON with a bad length, nesting past 200 levels, a 17 MB
document (an error reply, not a crash), a command on a missing database, and 1,000
connections opened and dropped. After each: the bad connection was closed (or answered),
the reason is in the log, a fresh PyMongo client still works, and at the end `docfs check`
finds the store sound. Run by meson (suite wire) with DOCFS set to the binary."""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import bson
import pymongo

DOCFS = os.environ.get("DOCFS", "build/docfs")
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        raise AssertionError(what)


def op_msg(doc, req=1, flags=0, seq=None):
    body = b"\x00" + bson.encode(doc)
    if seq:
        ident, docs = seq
        payload = ident.encode() + b"\x00" + b"".join(bson.encode(d) for d in docs)
        body += b"\x01" + struct.pack("<i", 4 + len(payload)) + payload
    msg = struct.pack("<I", flags) + body
    return struct.pack("<iiii", 16 + len(msg), req, 0, 2013) + msg


def read_reply(s):
    hdr = b""
    while len(hdr) < 16:
        k = s.recv(16 - len(hdr))
        if not k:
            return None
        hdr += k
    n = struct.unpack("<i", hdr[:4])[0]
    rest = b""
    while len(rest) < n - 16:
        k = s.recv(n - 16 - len(rest))
        if not k:
            return None
        rest += k
    return bson.decode(rest[5:])


def closed(s, timeout=10):
    """True when the server closed the connection (no reply bytes)."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def main():
    tmp = tempfile.mkdtemp(prefix="docfs-wirebad-")
    store = os.path.join(tmp, "store")
    os.mkdir(store)
    log = os.path.join(tmp, "serve.log")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    srv = subprocess.Popen([DOCFS, "serve", store, "--listen", "127.0.0.1:%d" % port,
                            "--log", log], stdout=subprocess.PIPE,
                           stderr=open(log + ".err", "w"), text=True)
    try:
        line = srv.stdout.readline()
        check("listening on" in line, "docfs serve did not start: %r" % line)
        run(port, log, srv)
        srv.terminate()
        rc = srv.wait(timeout=30)
        err = open(log + ".err").read()
        check("Sanitizer" not in err and "runtime error" not in err,
              "sanitizer report from docfs serve:\n" + err)
        check(rc == 0, "docfs serve exit status %d: %s" % (rc, err))
        r = subprocess.run([DOCFS, "check", store], capture_output=True, text=True)
        check(r.returncode == 0, "docfs check: %s %s" % (r.stdout, r.stderr))
        noauth(store, port)
        print("badinput_test: %d checks passed" % checks)
    finally:
        if srv.poll() is None:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def noauth(store, port):
    """A non-loopback address is refused without --noauth, and taken with it (warned)."""
    r = subprocess.run([DOCFS, "serve", store, "--listen", "0.0.0.0:%d" % port],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "without authentication" in r.stderr,
          "0.0.0.0 without --noauth: %d %r" % (r.returncode, r.stderr))
    p = subprocess.Popen([DOCFS, "serve", store, "--listen", "0.0.0.0:%d" % port, "--noauth"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check("listening on 0.0.0.0:%d" % port in line, "--noauth: %r" % line)
        cl = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=5000)
        check(cl.admin.command("ping")["ok"] == 1.0, "ping over 0.0.0.0")
        cl.close()
    finally:
        p.terminate()
        err = p.communicate(timeout=30)[1]
    check("WARNING" in err and "without authentication" in err, "no warning: %r" % err)


def run(port, log, srv):
    cl = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=5000)
    cl.t.c.insert_many([{"_id": i, "v": i} for i in range(100)])

    def still_fine(what):
        check(srv.poll() is None, "the server died after %s" % what)
        fresh = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=5000)
        check(fresh.admin.command("ping")["ok"] == 1.0, "ping after %s" % what)
        check(fresh.t.c.count_documents({}) == 100, "data after %s" % what)
        fresh.close()

    def logged(text):
        deadline = time.time() + 5
        while time.time() < deadline:
            if text in open(log).read():
                return True
            time.sleep(0.05)
        return False

    # garbage: "GET / HTTP/1.1" reads as a length of 542393671
    s = connect(port)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    check(closed(s), "garbage: connection not closed")
    s.close()
    check(logged("over the limit"), "garbage not logged")
    still_fine("garbage")

    # a 2 GB length prefix
    s = connect(port)
    s.sendall(struct.pack("<iiii", 0x7fffffff, 1, 0, 2013))
    check(closed(s), "2 GB: connection not closed")
    s.close()
    check(logged("message length 2147483647 is over the limit"), "2 GB not logged")
    still_fine("a 2 GB length")

    # a truncated OP_MSG: the length promises more than ever comes
    m = op_msg({"ping": 1, "$db": "admin"})
    s = connect(port)
    s.sendall(struct.pack("<i", len(m) + 100) + m[4:])
    s.shutdown(socket.SHUT_WR)
    check(closed(s), "truncated: connection not closed")
    s.close()
    check(logged("truncated"), "truncated message not logged")
    still_fine("a truncated message")

    # a kind-1 section whose size runs past the message
    m = bytearray(op_msg({"insert": "c", "$db": "t"}, seq=("documents", [{"_id": 1000}])))
    at = m.index(b"documents\x00") - 4
    m[at:at + 4] = struct.pack("<i", 4000)
    s = connect(port)
    s.sendall(bytes(m))
    check(closed(s), "section overrun: connection not closed")
    s.close()
    check(logged("section size 4000"), "section overrun not logged")
    still_fine("a section overrun")

    # an unknown opcode
    s = connect(port)
    s.sendall(struct.pack("<iiii", 26, 1, 0, 2012) + b"\x00" * 10)
    check(closed(s), "unknown opcode: connection not closed")
    s.close()
    check(logged("unknown opcode 2012"), "unknown opcode not logged")
    still_fine("an unknown opcode")

    # BSON with a bad length (the document says 5 bytes more than it has)
    m = bytearray(op_msg({"find": "c", "filter": {"a": "b"}, "$db": "t"}))
    m[21:25] = struct.pack("<i", struct.unpack("<i", bytes(m[21:25]))[0] + 5)
    s = connect(port)
    s.sendall(bytes(m))
    check(closed(s), "bad BSON: connection not closed")
    s.close()
    still_fine("bad BSON")
    m = bytearray(op_msg({"find": "c", "filter": {"a": "b"}, "$db": "t"}))
    m[-8] = 0x10  # the string "b" says it is 16 bytes long
    s = connect(port)
    s.sendall(bytes(m))
    check(closed(s), "bad inner length: connection not closed")
    s.close()
    check(logged("invalid BSON"), "invalid BSON not logged")
    still_fine("a bad inner length")

    # nesting: 300 levels close the connection; 150 get a reply (an answer or an error)
    deep = {"v": 1}
    for _ in range(300):
        deep = {"a": deep}
    s = connect(port)
    s.sendall(op_msg({"find": "c", "filter": deep, "$db": "t"}))
    check(closed(s), "300 levels: connection not closed")
    s.close()
    still_fine("deep nesting")
    deep = {"v": 1}
    for _ in range(150):
        deep = {"a": deep}
    s = connect(port)
    s.sendall(op_msg({"find": "c", "filter": deep, "$db": "t"}))
    r = read_reply(s)
    check(r is not None and "ok" in r, "150 levels: no reply")
    s.close()
    still_fine("150 levels")

    # a 17 MB document: an error reply on a connection that stays usable
    big = {"_id": "big", "s": "x" * (17 * 1024 * 1024)}
    s = connect(port)
    s.sendall(op_msg({"insert": "c", "$db": "t"}, seq=("documents", [big])))
    r = read_reply(s)
    check(r is not None and r.get("ok") == 1.0 and r.get("n") == 0 and
          r["writeErrors"][0]["code"] == 10334, "17 MB document: %r" %
          (r and {k: r[k] for k in r if k != "writeErrors"}))
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, req=2))
    r = read_reply(s)
    check(r is not None and r["ok"] == 1.0, "the connection after the 17 MB document")
    s.close()
    still_fine("a 17 MB document")

    # moreToCome: no reply, and the write happened
    s = connect(port)
    s.sendall(op_msg({"insert": "side", "$db": "t"}, flags=2,
                     seq=("documents", [{"_id": 1}])))
    s.sendall(op_msg({"count": "side", "$db": "t"}, req=3))
    r = read_reply(s)
    check(r is not None and r["n"] == 1, "moreToCome: %r" % r)
    s.close()
    cl.t.side.drop()

    # the profiler names a TCP client by its address
    cl.t.command("profile", 2)
    cl.t.c.find_one({"_id": 42})
    cl.t.command("profile", 0)
    e = cl.t.system.profile.find_one({"op": "query", "command.filter": {"_id": 42}})
    check(e is not None and e["client"].startswith("127.0.0.1:"), "profile client %r" % e)

    # a command on a missing database
    r = cl.nosuchdb.command("find", "nosuch")
    check(r["cursor"]["firstBatch"] == [] and r["cursor"]["id"] == 0, "a missing database")
    check(cl.nosuchdb.command("count", "nosuch")["n"] == 0, "count of a missing database")
    check("nosuchdb" not in cl.list_database_names(), "reads made no database")

    # 1,000 connections opened and dropped, some mid-header
    for i in range(1000):
        s = connect(port)
        if i % 3 == 1:
            s.sendall(b"\x10\x00")
        elif i % 3 == 2:
            s.sendall(op_msg({"ping": 1, "$db": "admin"})[:30])
        s.close()
    still_fine("1,000 connections")
    cl.close()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("badinput_test: FAILED after %d checks: %s" % (checks, e))
        sys.exit(1)
