#!/usr/bin/env python3
"""run_corpus.py - runs the data-driven query corpus (tests/query/corpus/*.txt) through qrun
and compares every result with its expectation, type-exactly.

    run_corpus.py --qrun PATH [--pass scan|indexed|all] [-v] CORPUS_DIR_OR_FILES...

The format is described in tests/query/README.md. Each case becomes one qrun input line; an
expected value becomes an {"echo": ...} line so that qrun renders it as canonical Extended
JSON with the same codec, and the comparison is then a comparison of canonical text
(type-exact, field-order sensitive). Prints each failing case with file:line, expected and
actual; exits 1 on any failure.

Passes: 'scan' runs the corpus as it is (no indexes but _id_: collection scans) against the
expectations. 'indexed' runs every case again over a generated index set, with the
planner's choice and with each candidate plan hinted, and expects the scan's results
(indexed.py).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

DIRECTIVES = ("docs", "find", "sort", "projection", "skip", "limit", "expect", "expect_ids",
              "error")


class Case:
    def __init__(self, path, line):
        self.path, self.line = path, line
        self.docs = None
        self.fields = {}
        self.kind = None  # expect | expect_ids | error
        self.want = None

    def where(self):
        return "%s:%d" % (os.path.relpath(self.path), self.line)

    def query_text(self):
        parts = ['"docs": ' + self.docs]
        for k in ("find", "sort", "projection", "skip", "limit"):
            if k in self.fields:
                parts.append('"%s": %s' % ("filter" if k == "find" else k, self.fields[k]))
        return "{" + ", ".join(parts) + "}"


def parse_file(path):
    """Yields the cases of one corpus file."""
    cases = []
    docs = None
    block = []  # (line number, directive, text)

    def flush():
        nonlocal docs, block
        if not block:
            return
        d = dict((k, (n, t)) for n, k, t in block)
        if len(d) != len(block):
            raise SystemExit("%s:%d: a directive appears twice in one block" % (path, block[0][0]))
        if "docs" in d:
            docs = d["docs"][1]
        if "find" in d:
            if docs is None:
                raise SystemExit("%s:%d: a case before any docs:" % (path, d["find"][0]))
            c = Case(path, d["find"][0])
            c.docs = docs
            for k in ("find", "sort", "projection", "skip", "limit"):
                if k in d:
                    c.fields[k] = d[k][1]
            kinds = [k for k in ("expect", "expect_ids", "error") if k in d]
            if len(kinds) != 1:
                raise SystemExit("%s:%d: a case needs exactly one of expect:, expect_ids:, error:"
                                 % (path, c.line))
            c.kind = kinds[0]
            c.want = d[c.kind][1]
            cases.append(c)
        else:
            extra = [k for k in d if k != "docs"]
            if extra:
                raise SystemExit("%s:%d: %s: without find:" % (path, block[0][0], extra[0]))
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
            if line[0] in " \t":  # continuation of the previous directive
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


def run_qrun(qrun, lines):
    p = subprocess.run([qrun], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("qrun failed (%d): %s" % (p.returncode, p.stderr.strip()))
    out = p.stdout.splitlines()
    if len(out) != len(lines):
        raise SystemExit("qrun printed %d lines for %d cases" % (len(out), len(lines)))
    return out


def ids_of(result_line):
    r = json.loads(result_line)
    if "ok" not in r:
        return None
    return [json.dumps(d.get("_id")) for d in r["ok"]]


def scan_pass(qrun, cases, verbose):
    lines = []
    for c in cases:
        lines.append(c.query_text())
        if c.kind == "expect":
            lines.append('{"echo": %s}' % c.want)
        elif c.kind == "expect_ids":
            lines.append('{"echo": %s}' % c.want)
    out = run_qrun(qrun, lines)
    fails = 0
    i = 0
    for c in cases:
        got = out[i]
        i += 1
        ok = False
        if c.kind == "error":
            want_s = c.want
            if want_s.startswith('"') and want_s.endswith('"'):
                want_s = json.loads(want_s)
            r = json.loads(got)
            ok = "error" in r and want_s in r["error"]
            shown_want = "an error containing %r" % want_s
        else:
            want = out[i]
            i += 1
            if "error" in json.loads(want):
                print("%s: bad expectation: %s" % (c.where(), json.loads(want)["error"]))
                fails += 1
                continue
            if c.kind == "expect":
                ok = got == want
                shown_want = want
            else:
                want_ids = [json.dumps(v) for v in json.loads(want)["ok"]]
                got_ids = ids_of(got)
                ok = got_ids == want_ids
                shown_want = "ids [%s]" % ", ".join(want_ids)
                if got_ids is not None:
                    got = "ids [%s]   (%s)" % (", ".join(got_ids), got)
        if not ok:
            fails += 1
            print("FAIL %s" % c.where())
            print("  query:    %s" % c.query_text())
            print("  expected: %s" % shown_want)
            print("  actual:   %s" % got)
        elif verbose:
            print("ok   %s" % c.where())
    return fails


def indexed_pass(qrun, cases, verbose):
    """The corpus's second run, with indexes (STYLE.md, "Tests"): every case again over
    qrun's generated index set, with the planner's choice and with every candidate plan
    hinted, each compared with the collection scan (indexed.py says how)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import indexed
    items = []
    for c in cases:
        items.append((c.query_text(), "sort" in c.fields, "skip" in c.fields,
                      "limit" in c.fields))
    fails, runs = indexed.check(qrun, items, where=lambda i: cases[i].where(), verbose=verbose,
                                show=1000)
    print("query-corpus: pass 'indexed': %d runs" % runs)
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qrun", required=True)
    ap.add_argument("--pass", dest="which", default="all", choices=("scan", "indexed", "all"))
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        files += sorted(glob.glob(os.path.join(p, "*.txt"))) if os.path.isdir(p) else [p]
    cases = []
    for f in files:
        cases += parse_file(f)
    total_pass = total_fail = 0
    passes = [("scan", scan_pass), ("indexed", indexed_pass)]
    for name, fn in passes:
        if a.which not in ("all", name):
            continue
        fails = fn(a.qrun, cases, a.verbose)
        if fails is None:
            continue
        total_fail += fails
        total_pass += len(cases) - fails
        print("query-corpus: pass '%s': %d passed, %d failed" % (name, len(cases) - fails, fails))
    print("query-corpus: %d passed, %d failed" % (total_pass, total_fail))
    sys.exit(1 if total_fail else 0)


if __name__ == "__main__":
    main()
