#!/usr/bin/env python3
"""run_explain.py - the golden explain tests (tests/query/explain/*.txt) through qrun.

    run_explain.py --qrun PATH DIR_OR_FILES... [-v]

A file is blocks separated by blank lines; '#' starts a comment line; a line starting with
whitespace continues the directive above it. Directives (one per line, "name: value", values
in the codec's shell-literal syntax):

    docs:       the collection, for this and the following cases (until the next docs:)
    indexes:    index specs [{key: {...}, name:, sparse:, partialFilterExpression:}, ...],
                for this and the following cases (until the next indexes:)
    find:       the filter; starts a case
    sort: projection: skip: limit: hint:   options of the case (hint: a key pattern, a
                name as a string, or {$natural: 1|-1})
    count:      true: explain the count of the filter (query/<q>?count=1), not the find
    verbosity:  queryPlanner (default), executionStats or allPlansExecution
    expect:     a subset of the explain document: every field given must equal the actual
                one (numbers by value, whatever their type), arrays element by element and
                of the same length, documents field by field (extra actual fields allowed)
    tree:       the exact format=tree text (a JSON string)
    error:      the explain fails with a message containing this text

Exits 1 on any failure, printing file:line, the expectation and the actual document.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

CASE_KEYS = ("find", "sort", "projection", "skip", "limit", "hint", "count")
DIRECTIVES = ("docs", "indexes") + CASE_KEYS + ("verbosity", "expect", "tree", "error")


def parse_file(path):
    cases, env, block = [], {}, []

    def flush():
        nonlocal block
        if not block:
            return
        d = {k: (n, t) for n, k, t in block}
        for k in ("docs", "indexes"):
            if k in d:
                env[k] = d[k][1]
        if "find" in d:
            c = {"where": "%s:%d" % (os.path.relpath(path), d["find"][0]),
                 "docs": env.get("docs", "[]"), "indexes": env.get("indexes", "[]")}
            for k in CASE_KEYS + ("verbosity", "expect", "tree", "error"):
                if k in d:
                    c[k] = d[k][1]
            cases.append(c)
        block = []

    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            s = line.strip()
            if s.startswith("#"):
                continue
            if not s:
                flush()
                continue
            if line[0] in " \t":
                ln, k, t = block[-1]
                block[-1] = (ln, k, t + " " + s)
                continue
            k, sep, t = line.partition(":")
            if not sep or k not in DIRECTIVES:
                raise SystemExit("%s:%d: expected one of %s" % (path, n, ", ".join(DIRECTIVES)))
            block.append((n, k, t.strip()))
    flush()
    return cases


def plain(v):
    """Canonical Extended JSON numbers to plain numbers (values compare by value)."""
    if isinstance(v, dict):
        if len(v) == 1:
            k, x = next(iter(v.items()))
            if k in ("$numberInt", "$numberLong"):
                return int(x)
            if k == "$numberDouble":
                return float(x)
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def subset(want, got, path="$"):
    """None when every field of want equals got's, else where it differs."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return path
        for k, v in want.items():
            if k not in got:
                return "%s.%s (missing)" % (path, k)
            r = subset(v, got[k], "%s.%s" % (path, k))
            if r:
                return r
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return "%s (length)" % path
        for i, (a, b) in enumerate(zip(want, got)):
            r = subset(a, b, "%s[%d]" % (path, i))
            if r:
                return r
        return None
    if isinstance(want, (int, float)) and not isinstance(want, bool) and \
            isinstance(got, (int, float)) and not isinstance(got, bool):
        return None if float(want) == float(got) else path
    return None if want == got else path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qrun", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        files += sorted(glob.glob(os.path.join(p, "*.txt"))) if os.path.isdir(p) else [p]
    cases = []
    for f in files:
        cases += parse_file(f)
    lines = []
    for c in cases:
        parts = ['"docs": ' + c["docs"], '"indexes": ' + c["indexes"]]
        for k in CASE_KEYS:
            if k in c:
                parts.append('"%s": %s' % ("filter" if k == "find" else k, c[k]))
        parts.append('"explain": "%s"' % c.get("verbosity", "queryPlanner"))
        if "tree" in c:
            parts.append('"format": "tree"')
        lines.append("{" + ", ".join(parts) + "}")
        if "expect" in c:
            lines.append('{"echo": %s}' % c["expect"])
    p = subprocess.run([a.qrun], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("qrun failed: %s" % p.stderr)
    out = p.stdout.splitlines()
    i = fails = 0
    for c in cases:
        got = json.loads(out[i])
        i += 1
        why = None
        if "error" in c:
            want = json.loads(c["error"]) if c["error"].startswith('"') else c["error"]
            if "error" not in got or want not in got["error"]:
                why = "expected an error containing %r" % want
        elif "error" in got:
            why = "failed: %s" % got["error"]
        elif "tree" in c:
            if got["ok"] != json.loads(c["tree"]):
                why = "tree differs:\n%s" % got["ok"]
        if "expect" in c:
            want = json.loads(out[i])
            i += 1
            if "error" in want:
                why = "bad expectation: %s" % want["error"]
            elif why is None:
                r = subset(plain(want["ok"]), plain(got["ok"]))
                if r:
                    why = "differs at %s" % r
        if why:
            fails += 1
            print("FAIL %s: %s" % (c["where"], why))
            if "ok" in got and "tree" not in c:
                print("  actual: %s" % json.dumps(plain(got["ok"])))
        elif a.verbose:
            print("ok   %s" % c["where"])
    print("query-explain: %d passed, %d failed" % (len(cases) - fails, fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
