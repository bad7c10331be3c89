"""wirelib.py - what the wire tests written in Python share: the check counter, expecting an
error code, a free TCP port, starting and stopping `docfs serve` (its stderr kept in a log
that the stop reads for sanitizer reports), and a test's main: serve a temp store, run the
test's body, stop and check the store. Imported by the tests beside it."""
import collections
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from pymongo.errors import OperationFailure

DOCFS = os.environ.get("DOCFS", "build/docfs")
checks = 0
servers = []  # every server started, for the caller to kill at the end whatever happened


def check(cond, what):
    """Counts one check; raises AssertionError(what) when cond is false."""
    global checks
    checks += 1
    if not cond:
        raise AssertionError(what)


def expect_code(code, fn, *a, **kw):
    """Calls fn, which must fail with OperationFailure code; returns the exception."""
    try:
        fn(*a, **kw)
    except OperationFailure as e:
        check(e.code == code, "expected code %d, got %r: %s" % (code, e.code, e))
        return e
    raise AssertionError("expected an error with code %d" % code)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(store, log, *args):
    """Starts `docfs serve STORE ARGS...` with stderr appended to log; returns once it has
    printed "listening on" for each --listen (one when none is given)."""
    p = subprocess.Popen([DOCFS, "serve", store] + list(args), stdout=subprocess.PIPE,
                         stderr=open(log, "a"), text=True)
    nlisten = max(1, sum(1 for a in args if a == "--listen"))
    for _ in range(nlisten):
        line = p.stdout.readline()
        if "listening on" not in line:
            p.kill()
            raise AssertionError("docfs serve did not start: %r %s" % (line, open(log).read()))
    servers.append(p)
    return p


def stop(p, log):
    """Stops a server with SIGTERM; checks its exit status and that its log holds no
    sanitizer report."""
    p.terminate()
    rc = p.wait(timeout=30)
    text = open(log).read()
    check("Sanitizer" not in text and "runtime error" not in text,
          "sanitizer report from docfs serve:\n" + text)
    check(rc == 0, "docfs serve exit status %d: %s" % (rc, text))


Served = collections.namedtuple("Served", "tmp store sock port")


def serve_and_check(name, body, tcp=False):
    """Serves a new temp store on a Unix socket (and on a free TCP port when tcp), calls
    body(Served), then stops the server (exit status, no sanitizer report) and runs
    `docfs check` on the store; prints "NAME: N checks passed"."""
    tmp = tempfile.mkdtemp(prefix="docfs-%s-" % name)
    store = os.path.join(tmp, "store")
    os.mkdir(store)
    log = store + ".log"
    sock = os.path.join(tmp, "docfs.sock")
    args = ["--listen", sock]
    port = None
    if tcp:
        port = free_port()
        args += ["--listen", "127.0.0.1:%d" % port]
    srv = start(store, log, *args)
    try:
        body(Served(tmp, store, sock, port))
        stop(srv, log)
        r = subprocess.run([DOCFS, "check", store], capture_output=True, text=True)
        check(r.returncode == 0, "docfs check: %s %s" % (r.stdout, r.stderr))
        print("%s: %d checks passed" % (name, checks))
    finally:
        if srv.poll() is None:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main(name, body, tcp=False, failures=(AssertionError,)):
    """A test script's entry: serve_and_check, exiting 1 with "NAME: FAILED after N checks:
    why" when one of failures is raised."""
    try:
        serve_and_check(name, body, tcp)
    except failures as e:
        print("%s: FAILED after %d checks: %s" % (name, checks, e))
        sys.exit(1)
