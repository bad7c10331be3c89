#!/usr/bin/python3
"""auth_test.py - the wire protocol's authentication with real clients: PyMongo (Debian's
3.11, SCRAM-SHA-256, with and without naming the mechanism), mongosh and libmongoc
(tests/wire/mongoc_auth.c, MONGOC_AUTH), against `docfs
serve` over a Unix socket and TCP. A store without users is open; the first createUser
closes it (13 for an unauthenticated command, hello and ping still answered); wrong
passwords and unknown users get 18 and a log line; each built-in role allows what it
should and refuses the rest with 13 and MongoDB's message; updateUser and dropUser reach
connections already authenticated; users persist across a restart; a non-loopback address
is refused without users and served (always requiring authentication) with them; noauth
enforces nothing; `docfs user STORE add|list|drop`; a user with customData.uid sees only the
documents that uid may read through a mount (when /dev/fuse is there); TLS on TCP with
plaintext refused (when the openssl command is there). Then docfs check.
Run by meson (suite wire) with DOCFS set to the binary."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pymongo

import wirelib
from wirelib import DOCFS, check, expect_code, free_port, servers, start, stop

HERE = os.path.dirname(os.path.abspath(__file__))
MONGOSH = os.path.join(HERE, "node_modules", ".bin", "mongosh")


def uri(sock):
    return "mongodb://" + sock.replace("/", "%2F")


def client(sock, user=None, pwd=None, source="admin", mech="SCRAM-SHA-256"):
    kw = {"serverSelectionTimeoutMS": 5000}
    if user:
        kw.update(username=user, password=pwd, authSource=source)
        if mech:
            kw["authMechanism"] = mech
    return pymongo.MongoClient(uri(sock), **kw)


def denied(fn, *a, db="test", **kw):
    """13 with MongoDB's message for a role that does not allow the command."""
    e = expect_code(13, fn, *a, **kw)
    msg = e.details.get("errmsg", "")
    check(msg.startswith("not authorized on %s to execute command {" % db),
          "13's message: %r" % msg)


def main():
    tmp = tempfile.mkdtemp(prefix="docfs-auth-")
    try:
        run(tmp)
        print("auth_test: %d checks passed" % wirelib.checks)
    finally:
        for p in servers:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["fusermount3", "-u", "-q", os.path.join(tmp, "mnt")],
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp):
    store = os.path.join(tmp, "store")
    os.mkdir(store)
    log = os.path.join(tmp, "serve.log")
    sock = os.path.join(tmp, "s.sock")
    port = free_port()

    # a store without users may not be served on a non-loopback address
    r = subprocess.run([DOCFS, "serve", store, "--listen", "0.0.0.0:%d" % port],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "no users" in r.stderr and "docfs user" in r.stderr,
          "non-loopback without users: %d %r" % (r.returncode, r.stderr))

    srv = start(store, log, "--listen", sock, "--listen", "127.0.0.1:%d" % port)
    anon = client(sock)
    # no users: open, as before
    anon.test.c.insert_many([{"_id": i, "v": i} for i in range(5)])
    check(anon.test.c.count_documents({}) == 5, "open store: count")
    # the first user, created without authentication (no users yet)
    anon.admin.command("createUser", "boss", pwd="s3cret pass", roles=["root"])
    # now closed
    e = expect_code(13, anon.test.c.find_one)
    check("requires authentication" in e.details["errmsg"], "13's message: %r" % e.details)
    expect_code(13, anon.test.c.insert_one, {"_id": 99})
    expect_code(13, anon.list_database_names)
    check(anon.admin.command("ping")["ok"] == 1, "ping without authentication")
    h = anon.admin.command("hello", saslSupportedMechs="admin.boss")
    check(h["saslSupportedMechs"] == ["SCRAM-SHA-256"], "saslSupportedMechs: %r" % h)
    check("saslSupportedMechs" not in anon.admin.command("hello"), "asked only")
    # speculative authentication: hello carries the first step
    spec = {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "db": "admin",
            "payload": b"n,,n=boss,r=abcdefghijklmnop", "options": {"skipEmptyExchange": True}}
    sa = anon.admin.command("hello", speculativeAuthenticate=spec).get("speculativeAuthenticate")
    check(sa and sa["conversationId"] == 1 and not sa["done"] and
          sa["payload"].startswith(b"r=abcdefghijklmnop") and b",i=15000" in sa["payload"],
          "speculativeAuthenticate: %r" % sa)
    spec["payload"] = b"n,,n=nobody,r=abc"
    h = anon.admin.command("hello", speculativeAuthenticate=spec)
    check(h["ok"] == 1 and "speculativeAuthenticate" not in h, "unknown user, left out: %r" % h)
    check(anon.admin.command("buildInfo")["version"].startswith("7."), "buildInfo")
    st = anon.admin.command("connectionStatus")["authInfo"]
    check(st["authenticatedUsers"] == [], "connectionStatus unauthenticated: %r" % st)

    boss = client(sock, "boss", "s3cret pass")
    check(boss.test.c.count_documents({}) == 5, "root reads")
    boss.test.c.insert_one({"_id": 5, "v": 5})
    st = boss.admin.command("connectionStatus")["authInfo"]
    check(st["authenticatedUsers"] == [{"user": "boss", "db": "admin"}] and
          st["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}],
          "connectionStatus: %r" % st)
    lc = boss.admin.command("listCommands")["commands"]
    check(lc["find"]["requiresAuth"] and lc["createUser"]["requiresAuth"] and
          not lc["hello"]["requiresAuth"] and not lc["saslStart"]["requiresAuth"],
          "listCommands' requiresAuth")
    # without naming the mechanism: negotiated through saslSupportedMechs
    nego = client(sock, "boss", "s3cret pass", mech=None)
    check(nego.test.c.count_documents({}) == 6, "negotiated SCRAM-SHA-256")
    # TCP too
    tcp = pymongo.MongoClient("127.0.0.1", port, username="boss", password="s3cret pass",
                              authSource="admin", authMechanism="SCRAM-SHA-256",
                              serverSelectionTimeoutMS=5000)
    check(tcp.test.c.count_documents({}) == 6, "TCP authenticated")

    # wrong password, unknown user, wrong authentication database: 18 and a log line
    before = open(log).read().count("authentication failed")
    expect_code(18, client(sock, "boss", "wrong").test.c.find_one)
    expect_code(18, client(sock, "nobody", "x").test.c.find_one)
    expect_code(18, client(sock, "boss", "s3cret pass", source="test").test.c.find_one)
    time.sleep(0.2)
    text = open(log).read()
    check(text.count("authentication failed") - before == 3, "log lines:\n" + text)
    check("authentication failed for user 'boss@admin' (SCRAM-SHA-256): wrong password" in text,
          "wrong password's log line:\n" + text)
    check("'nobody@admin' (SCRAM-SHA-256): no such user" in text, "unknown user's log line")
    check("s3cret" not in text and "wrong\n" not in text, "a password in the log")

    # roles
    boss.test.command("createUser", "reader", pwd="r", roles=["read"])
    boss.test.command("createUser", "writer", pwd="w", roles=[{"role": "readWrite", "db": "test"}])
    boss.test.command("createUser", "dba", pwd="d", roles=["dbAdmin"])
    boss.test.command("createUser", "uadmin", pwd="u", roles=["userAdmin"])
    boss.admin.command("createUser", "anyreader", pwd="a", roles=["readAnyDatabase"])
    boss.other.c.insert_one({"_id": 1})
    expect_code(51003, boss.test.command, "createUser", "reader", pwd="x", roles=[])
    expect_code(31, boss.test.command, "createUser", "x", pwd="x", roles=["root"])
    expect_code(31, boss.test.command, "createUser", "x", pwd="x", roles=["nosuchrole"])
    expect_code(2, boss.test.command, "createUser", "x", pwd="caf\u00e9", roles=[])
    expect_code(2, boss.test.command, "createUser", "x", pwd="x", roles=[],
                mechanisms=["SCRAM-SHA-1"])
    expect_code(2, boss.test.command, "createUser", "x", pwd="x")  # roles required

    reader = client(sock, "reader", "r", source="test")
    check(reader.test.c.count_documents({}) == 6, "read: count")
    check(reader.test.c.find_one({"_id": 2})["v"] == 2, "read: find")
    check(len(list(reader.test.c.aggregate([{"$match": {"v": {"$gt": 2}}}]))) == 3,
          "read: aggregate")
    check(reader.test.command("explain", {"find": "c", "filter": {}})["ok"] == 1,
          "read: explain of find")
    check(reader.test.command("collStats", "c")["count"] == 6, "read: collStats")
    check(reader.list_database_names() == ["test"], "read: listDatabases shows its database")
    denied(reader.test.c.insert_one, {"_id": 100})
    denied(reader.test.c.update_one, {"_id": 1}, {"$set": {"v": 0}})
    denied(reader.test.c.delete_one, {"_id": 1})
    denied(reader.test.c.create_index, "v")
    denied(reader.test.c.drop)
    denied(lambda: list(reader.test.c.aggregate([{"$out": "copy"}])))
    denied(reader.test.command, "explain", {"delete": "c", "deletes": [{"q": {}, "limit": 0}]})
    denied(reader.other.c.find_one, db="other")
    denied(reader.admin.command, "serverStatus", db="admin")
    denied(reader.test.command, "createUser", "x", pwd="x", roles=[])
    check(boss.test.c.count_documents({}) == 6, "nothing changed by the refused writes")

    writer = client(sock, "writer", "w", source="test")
    writer.test.c.insert_one({"_id": 6, "v": 6})
    writer.test.c.update_one({"_id": 6}, {"$set": {"v": 60}})
    writer.test.c.create_index("v")
    list(writer.test.c.aggregate([{"$match": {}}, {"$out": "copy"}]))
    check(writer.test.copy.count_documents({}) == 7, "readWrite: $out")
    writer.test.copy.drop()
    writer.test.c.delete_one({"_id": 6})
    denied(writer.test.command, "dropDatabase")
    denied(writer.test.command, "profile", 2)
    denied(writer.other.c.insert_one, {"_id": 2}, db="other")

    dba = client(sock, "dba", "d", source="test")
    check(dba.test.command("profile", -1)["ok"] == 1, "dbAdmin: profile")
    dba.test.c.create_index("w")
    check("c" in dba.test.list_collection_names(), "dbAdmin: listCollections")
    denied(dba.test.c.find_one)
    denied(dba.test.c.insert_one, {"_id": 7})

    anyr = client(sock, "anyreader", "a")
    check(anyr.other.c.count_documents({}) == 1 and anyr.test.c.count_documents({}) == 6,
          "readAnyDatabase reads everywhere")
    check(sorted(anyr.list_database_names()) == ["admin", "other", "test"],
          "readAnyDatabase: listDatabases")
    denied(anyr.other.c.insert_one, {"_id": 3}, db="other")

    uadmin = client(sock, "uadmin", "u", source="test")
    uadmin.test.command("createUser", "temp", pwd="t", roles=["read"])
    denied(uadmin.test.c.find_one)
    e = expect_code(13, uadmin.test.command, "createUser", "x", pwd="x",
                    roles=[{"role": "root", "db": "admin"}])
    check("grant role root@admin" in e.details["errmsg"], "grant refused: %r" % e.details)
    names = sorted(u["user"] for u in uadmin.test.command("usersInfo", 1)["users"])
    check(names == ["dba", "reader", "temp", "uadmin", "writer"], "usersInfo 1: %r" % names)
    info = uadmin.test.command("usersInfo", "reader")["users"]
    check(len(info) == 1 and info[0]["_id"] == "test.reader" and
          info[0]["roles"] == [{"role": "read", "db": "test"}] and
          info[0]["mechanisms"] == ["SCRAM-SHA-256"] and "credentials" not in info[0],
          "usersInfo of one user: %r" % info)
    creds = uadmin.test.command("usersInfo", "reader", showCredentials=True)["users"][0]
    c256 = creds["credentials"]["SCRAM-SHA-256"]
    check(c256["iterationCount"] == 15000 and len(c256["storedKey"]) == 44 and
          len(c256["serverKey"]) == 44, "stored credentials: %r" % c256)
    # a user may look at itself, not at others
    me = reader.test.command("usersInfo", "reader")["users"]
    check(len(me) == 1 and me[0]["user"] == "reader", "usersInfo of oneself")
    expect_code(13, reader.test.command, "usersInfo", "writer")
    uadmin.test.command("dropUser", "temp")
    expect_code(11, uadmin.test.command, "dropUser", "temp")
    alls = boss.admin.command("usersInfo", {"forAllDBs": True})["users"]
    check(sorted(u["_id"] for u in alls) ==
          ["admin.anyreader", "admin.boss", "test.dba", "test.reader", "test.uadmin",
           "test.writer"], "usersInfo forAllDBs: %r" % alls)

    # updateUser: a new password; roles changed reach a connection already authenticated
    boss.test.command("updateUser", "reader", pwd="r2")
    expect_code(18, client(sock, "reader", "r", source="test").test.c.find_one)
    check(client(sock, "reader", "r2", source="test").test.c.count_documents({}) == 6,
          "the new password")
    boss.test.command("updateUser", "writer", roles=["read"])
    denied(writer.test.c.insert_one, {"_id": 8})
    check(writer.test.c.count_documents({}) == 6, "still reads")
    expect_code(11, boss.test.command, "updateUser", "ghost", pwd="x")
    # dropUser: its connection is no longer authenticated
    boss.test.command("dropUser", "dba")
    e = expect_code(13, dba.test.command, "profile", -1)
    check("requires authentication" in e.details["errmsg"], "dropped: %r" % e.details)
    # logout
    nego.admin.command("logout")
    expect_code(13, nego.test.c.find_one)

    mongosh(tmp, sock)
    mongoc(sock, 6)
    for cl in (anon, boss, nego, tcp, reader, writer, dba, anyr, uadmin):
        cl.close()
    stop(srv, log)

    # the users persist; `docfs user` adds one from the command line
    r = subprocess.run([DOCFS, "user", store, "add", "cli", "--db", "test",
                        "--roles", "readWrite,read@other"], input="from stdin\n",
                       capture_output=True, text=True)
    check(r.returncode == 0, "docfs user add: %r" % r.stderr)
    r = subprocess.run([DOCFS, "user", store, "add", "cli", "--db", "test"], input="x\n",
                       capture_output=True, text=True)
    check(r.returncode == 1 and "already exists" in r.stderr, "duplicate: %r" % r.stderr)
    r = subprocess.run([DOCFS, "user", store, "add", "bad"], input="caf\u00e9\n",
                       capture_output=True, text=True)
    check(r.returncode == 1 and "ASCII" in r.stderr, "non-ASCII password: %r" % r.stderr)
    r = subprocess.run([DOCFS, "user", store, "add", "bad", "--roles", "root@test"],
                       input="x\n", capture_output=True, text=True)
    check(r.returncode == 1 and "root@test" in r.stderr, "bad role: %r" % r.stderr)
    r = subprocess.run([DOCFS, "user", store, "list"], capture_output=True, text=True)
    check(r.returncode == 0 and "cli@test readWrite@test,read@other\n" in r.stdout and
          "boss@admin root@admin\n" in r.stdout and "dba@" not in r.stdout,
          "docfs user list: %r" % r.stdout)

    # restarted on a non-loopback address: allowed now, and always requires authentication
    port2 = free_port()
    srv = start(store, log, "--listen", sock, "--listen", "0.0.0.0:%d" % port2)
    anon = pymongo.MongoClient("127.0.0.1", port2, serverSelectionTimeoutMS=5000)
    expect_code(13, anon.test.c.find_one)
    cli = client(sock, "cli", "from stdin", source="test")
    cli.test.c.insert_one({"_id": 9})
    check(cli.other.c.count_documents({}) == 1, "cli's read@other")
    denied(cli.other.c.insert_one, {"_id": 9}, db="other")
    boss = pymongo.MongoClient("127.0.0.1", port2, username="boss", password="s3cret pass",
                               authSource="admin", serverSelectionTimeoutMS=5000)
    check(boss.test.c.count_documents({}) == 7, "boss after a restart, over 0.0.0.0")
    # docfs user drop (while a server runs, as add may)
    r = subprocess.run([DOCFS, "user", store, "drop", "cli", "--db", "test"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "docfs user drop: %r" % r.stderr)
    r = subprocess.run([DOCFS, "user", store, "drop", "cli", "--db", "test"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "not found" in r.stderr, "drop twice: %r" % r.stderr)
    anon.close()
    cli.close()
    boss.close()
    stop(srv, log)

    # noauth: nothing enforced, with a warning
    srv = start(store, log, "--listen", sock, "--noauth")
    anon = client(sock)
    check(anon.test.c.count_documents({}) == 7, "noauth: open")
    anon.close()
    stop(srv, log)
    check("the store has users, but noauth" in open(log).read(), "noauth's warning")

    tls(tmp, store, log)
    caller(tmp, store)

    r = subprocess.run([DOCFS, "check", store], capture_output=True, text=True)
    check(r.returncode == 0, "docfs check: %s %s" % (r.stdout, r.stderr))


def mongosh(tmp, sock):
    """mongosh authenticates with a URI's credentials, creates a user, and reports a wrong
    password, a refused command and a missing authentication (one mongosh, several
    connections)."""
    if not os.access(MONGOSH, os.X_OK):
        print("auth_test: mongosh not installed, its part skipped")
        return
    base = sock.replace("/", "%2F")
    ok = "mongodb://boss:s3cret%20pass@" + base + "/test?authSource=admin"
    js = """
print(db.c.countDocuments({}));
db.createUser({user: 'shell', pwd: 'sh', roles: [{role: 'read', db: 'test'}]});
print(JSON.stringify(db.getUser('shell').roles));
print(db.runCommand({connectionStatus: 1}).authInfo.authenticatedUsers[0].user);
function attempt(uri, f) {
  try { const c = new Mongo(uri); print(f(c.getDB('test'))); c.close(); }
  catch (e) { print(e.codeName + ' ' + e.message); }
}
const base = '%s';
attempt('mongodb://shell:sh@' + base + '/test?authSource=test',
        d => d.c.countDocuments({}));
attempt('mongodb://shell:sh@' + base + '/test?authSource=test',
        d => d.c.insertOne({_id: 'x'}));
attempt('mongodb://boss:nope@' + base + '/test?authSource=admin', d => d.c.findOne());
attempt('mongodb://' + base + '/test', d => d.c.findOne());
db.dropUser('shell');
""" % base
    r = subprocess.run([MONGOSH, ok, "--quiet", "--norc", "--eval", js], capture_output=True,
                       text=True, env=dict(os.environ, HOME=tmp), timeout=120)
    out = r.stdout.split("\n")
    check(r.returncode == 0 and len(out) >= 7, "mongosh: %r %r" % (r.stdout, r.stderr))
    check(out[:4] == ["6", '[{"role":"read","db":"test"}]', "boss", "6"],
          "mongosh as boss and as a reader: %r" % out)
    check(out[4].startswith("Unauthorized not authorized on test to execute command"),
          "mongosh's refused insert: %r" % out[4])
    check("Authentication failed" in out[5], "mongosh's wrong password: %r" % out[5])
    check(out[6].startswith("Unauthorized command find requires authentication"),
          "mongosh unauthenticated: %r" % out[6])


def mongoc(sock, n):
    """libmongoc (tests/wire/mongoc_auth.c): SCRAM-SHA-256, a wrong password, a reader."""
    prog = os.environ.get("MONGOC_AUTH")
    if not prog:
        print("auth_test: libmongoc not found at build time, its part skipped")
        return
    def u(cred, query):
        return "mongodb://" + cred + "@" + sock.replace("/", "%2F") + "/?authSource=" + query
    r = subprocess.run([prog, u("boss:s3cret%20pass", "admin&authMechanism=SCRAM-SHA-256"),
                        u("boss:nope", "admin"), u("reader:r2", "test"), str(n)],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "checks passed" in r.stdout,
          "mongoc_auth: %r %r" % (r.stdout, r.stderr))


def tls(tmp, store, log):
    """TLS on TCP (PyMongo, mongosh), plaintext TCP refused with a log line, the Unix socket
    plaintext still; bad certificate files refused at start."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", key, "-out", cert, "-subj", "/CN=localhost", "-days", "2",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("auth_test: no openssl command, the TLS part skipped: %s" % r.stderr)
        return
    # files that do not load, or do not match
    r = subprocess.run([DOCFS, "serve", store, "--listen", "127.0.0.1:%d" % free_port(),
                        "--tls-cert", cert, "--tls-key", os.path.join(tmp, "none.pem")],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "cannot load the TLS key" in r.stderr, "bad key: %r" % r.stderr)
    r = subprocess.run([DOCFS, "serve", store, "--listen", "127.0.0.1:%d" % free_port(),
                        "--tls-cert", key, "--tls-key", key], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 1 and "certificate" in r.stderr, "bad cert: %r" % r.stderr)
    port = free_port()
    sock = os.path.join(tmp, "tls.sock")
    srv = start(store, log, "--listen", "127.0.0.1:%d" % port, "--listen", sock,
                "--tls-cert", cert, "--tls-key", key)
    boss = pymongo.MongoClient("127.0.0.1", port, tls=True, tlsCAFile=cert, username="boss",
                               password="s3cret pass", authSource="admin",
                               serverSelectionTimeoutMS=5000)
    check(boss.test.c.count_documents({}) == 7, "TLS: authenticated count")
    before = open(log).read().count("TLS is required")
    plain = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=1000)
    try:
        plain.admin.command("ping")
        check(False, "a plaintext client was answered")
    except pymongo.errors.ServerSelectionTimeoutError:
        check(True, "plaintext refused")
    plain.close()
    time.sleep(0.2)
    check(open(log).read().count("TLS is required") > before, "plaintext's log line")
    check(client(sock, "boss", "s3cret pass").test.c.count_documents({}) == 7,
          "the Unix socket stays plaintext")
    if os.access(MONGOSH, os.X_OK):
        r = subprocess.run([MONGOSH, "mongodb://boss:s3cret%%20pass@127.0.0.1:%d/test"
                            "?authSource=admin&tls=true" % port, "--tlsCAFile", cert,
                            "--quiet", "--norc", "--eval", "print(db.c.countDocuments({}))"],
                           capture_output=True, text=True, env=dict(os.environ, HOME=tmp),
                           timeout=120)
        check(r.returncode == 0 and r.stdout.strip() == "7",
              "mongosh over TLS: %r %r" % (r.stdout, r.stderr))
    boss.close()
    stop(srv, log)


def caller(tmp, store):
    """A user with customData.uid sees what that uid may read through the mount; the mount's
    -o tls_cert=,tls_key= (when tls() made them)."""
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        print("auth_test: no /dev/fuse (or not root), the caller part skipped")
        return
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    sock = os.path.join(tmp, "m.sock")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    port = free_port()
    opts = "listen=" + sock + ",log=" + tmp + "/mount.log"
    if os.path.exists(cert):
        opts += ",listen=127.0.0.1:%d,tls_cert=%s,tls_key=%s" % (port, cert, key)
    r = subprocess.run([DOCFS, "mount", "-o", opts, store, mnt], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "mount: %r" % r.stderr)
    try:
        if os.path.exists(cert):
            t = pymongo.MongoClient("127.0.0.1", port, tls=True, tlsCAFile=cert,
                                    username="boss", password="s3cret pass",
                                    authSource="admin", serverSelectionTimeoutMS=5000)
            check(t.test.c.count_documents({}) == 7, "the mount's TLS listener")
            t.close()
            plain = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=1000)
            try:
                plain.admin.command("ping")
                check(False, "the mount answered a plaintext client")
            except pymongo.errors.ServerSelectionTimeoutError:
                check(True, "the mount refuses plaintext")
            plain.close()
        boss = client(sock, "boss", "s3cret pass")
        boss.admin.command("createUser", "nob", pwd="n", roles=["readWriteAnyDatabase"],
                           customData={"uid": 65534, "gid": 65534})
        os.chmod(os.path.join(mnt, "test", "c", "1.json"), 0o600)
        nob = client(sock, "nob", "n")
        ids = sorted(d["_id"] for d in nob.test.c.find())
        check(ids == [0, 2, 3, 4, 5, 9], "uid 65534 does not see the 0600 document: %r" % ids)
        check(nob.test.c.count_documents({}) == 6, "nor counts it")
        # root's documents are 0644: readable by uid 65534, not writable
        check(nob.test.c.update_many({}, {"$set": {"seen": 1}}).matched_count == 0,
              "uid 65534 may update none of root's 0644 documents")
        check(boss.test.c.find_one({"_id": 1}) is not None, "root sees it")
        check("seen" not in boss.test.c.find_one({"_id": 1}), "nob's update left it alone")
        nob.close()
        boss.close()
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        for _ in range(50):
            if not os.path.ismount(mnt):
                break
            time.sleep(0.1)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("auth_test: FAILED after %d checks: %s" % (wirelib.checks, e))
        sys.exit(1)
