#!/usr/bin/env python3
"""run_update_corpus.py - runs the data-driven update corpus (tests/query/update_corpus/*.txt)
through urun and compares every result with its expectation, type-exactly and field-order
sensitively.

    run_update_corpus.py --urun PATH [-v] CORPUS_DIR_OR_FILES...

The format is described in tests/query/README.md ("The update corpus"). Each case becomes one
urun input line; an expected document becomes an {"echo": ...} line so that urun renders it
as canonical Extended JSON with the same codec, and the comparison is a comparison of the
canonical text. Prints each failing case with file:line, expected and actual; exits 1 on any
failure (and when the corpus holds no case at all).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

DIRECTIVES = ("doc", "update", "arrayFilters", "filter", "upsert", "now", "let", "expect",
              "expect_types", "changed", "error")
CASE_FIELDS = ("update", "arrayFilters", "filter", "upsert", "now", "let")  # now before let

# canonical Extended JSON wrapper -> the $type name it stands for
EJSON_TYPES = {"$numberInt": "int", "$numberLong": "long", "$numberDouble": "double",
               "$numberDecimal": "decimal", "$date": "date", "$timestamp": "timestamp",
               "$oid": "objectId", "$regularExpression": "regex", "$binary": "binData",
               "$minKey": "minKey", "$maxKey": "maxKey", "$undefined": "undefined",
               "$symbol": "symbol", "$code": "javascript"}


class Case:
    def __init__(self, path, line):
        self.path, self.line = path, line
        self.doc = None
        self.fields = {}
        self.kind = None  # expect | expect_types | error
        self.want = None
        self.changed = None

    def where(self):
        return "%s:%d" % (os.path.relpath(self.path), self.line)

    def text(self):
        parts = ['"doc": ' + (self.doc or "{}")]
        for k in CASE_FIELDS:
            if k in self.fields:
                parts.append('"%s": %s' % (k, self.fields[k]))
        return "{" + ", ".join(parts) + "}"


def parse_file(path):
    cases = []
    doc = None
    block = []  # (line number, directive, text)

    def flush():
        nonlocal doc, block
        if not block:
            return
        d = dict((k, (n, t)) for n, k, t in block)
        if len(d) != len(block):
            raise SystemExit("%s:%d: a directive appears twice in one block" % (path, block[0][0]))
        if "doc" in d:
            doc = d["doc"][1]
        if "update" in d:
            c = Case(path, d["update"][0])
            c.doc = doc
            for k in CASE_FIELDS:
                if k in d:
                    c.fields[k] = d[k][1]
            if doc is None and "upsert" not in d:
                raise SystemExit("%s:%d: a case before any doc: (and no upsert:)" % (path, c.line))
            kinds = [k for k in ("expect", "expect_types", "error") if k in d]
            if len(kinds) != 1:
                raise SystemExit("%s:%d: a case needs exactly one of expect:, expect_types:, "
                                 "error:" % (path, c.line))
            c.kind = kinds[0]
            c.want = d[c.kind][1]
            if "changed" in d:
                if d["changed"][1] not in ("true", "false"):
                    raise SystemExit("%s:%d: changed: must be true or false" % (path, d["changed"][0]))
                c.changed = d["changed"][1] == "true"
            cases.append(c)
        else:
            extra = [k for k in d if k != "doc"]
            if extra:
                raise SystemExit("%s:%d: %s: without update:" % (path, block[0][0], extra[0]))
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
                if not block:
                    raise SystemExit("%s:%d: continuation line outside a directive" % (path, n))
                ln, k, t = block[-1]
                block[-1] = (ln, k, t + " " + s)
                continue
            k, sep, t = line.partition(":")
            if not sep or k not in DIRECTIVES:
                raise SystemExit("%s:%d: expected one of %s" % (path, n, ", ".join(DIRECTIVES)))
            block.append((n, k, t.strip()))
    flush()
    return cases


def run_urun(urun, lines):
    p = subprocess.run([urun], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("urun failed (%d): %s" % (p.returncode, p.stderr.strip()))
    out = p.stdout.splitlines()
    if len(out) != len(lines):
        raise SystemExit("urun printed %d lines for %d cases" % (len(out), len(lines)))
    return out


def type_of(v):
    """The $type name of a canonical EJSON value."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        if len(v) >= 1:
            k = next(iter(v))
            if k in EJSON_TYPES and (len(v) == 1 or k == "$code"):
                return EJSON_TYPES[k]
        return "object"
    return "?"


def value_at(doc, path):
    v = doc
    for p in path.split("."):
        if isinstance(v, dict) and p in v:
            v = v[p]
        elif isinstance(v, list) and p.isdigit() and int(p) < len(v):
            v = v[int(p)]
        else:
            return "missing"
    return type_of(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urun", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        files += sorted(glob.glob(os.path.join(p, "*.txt"))) if os.path.isdir(p) else [p]
    cases = []
    for f in files:
        cases += parse_file(f)
    if not cases:
        raise SystemExit("query-update-corpus: no cases found")

    lines = []
    for c in cases:
        lines.append(c.text())
        if c.kind in ("expect", "expect_types"):
            lines.append('{"echo": %s}' % c.want)
    out = run_urun(a.urun, lines)
    fails = 0
    i = 0
    for c in cases:
        got = out[i]
        i += 1
        r = json.loads(got)
        ok = False
        if c.kind == "error":
            want_s = c.want
            if want_s.startswith('"') and want_s.endswith('"'):
                want_s = json.loads(want_s)
            ok = "error" in r and want_s in r["error"]
            shown_want = "an error containing %r" % want_s
        else:
            want = json.loads(out[i])
            i += 1
            if "error" in want:
                print("%s: bad expectation: %s" % (c.where(), want["error"]))
                fails += 1
                continue
            if "ok" in r:
                if c.kind == "expect":
                    ok = json.dumps(r["ok"]) == json.dumps(want["ok"])
                    shown_want = json.dumps(want["ok"])
                else:
                    types = want["ok"]
                    ok = all(value_at(r["ok"], p) == t for p, t in types.items())
                    shown_want = "types %s" % json.dumps(types)
            else:
                shown_want = json.dumps(want["ok"])
            if ok and c.changed is not None:
                ok = r.get("changed") == c.changed
                shown_want += "   changed: %s" % ("true" if c.changed else "false")
        if not ok:
            fails += 1
            print("FAIL %s" % c.where())
            print("  case:     %s" % c.text())
            print("  expected: %s" % shown_want)
            print("  actual:   %s" % got)
        elif a.verbose:
            print("ok   %s" % c.where())
    print("query-update-corpus: %d passed, %d failed" % (len(cases) - fails, fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
