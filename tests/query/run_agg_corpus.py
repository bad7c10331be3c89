#!/usr/bin/env python3
"""run_agg_corpus.py - runs the aggregation corpus (tests/query/agg_corpus/*.txt) through arun
and compares every result with its expectation, type-exactly.

    run_agg_corpus.py --arun PATH [-v] CORPUS_DIR_OR_FILES...

The format (tests/query/README.md, "The aggregation corpus") is the find corpus's: blocks
separated by blank lines, '#' comment lines, continuation lines start with whitespace.

    docs: [...]            collection "c" for this and the following cases (until docs:)
    colls: {name: [...]}   more collections, same lifetime as docs: (reset by docs:)
    pipeline: [...]        the pipeline; starts a case
    mem: n  now: ms  out: "name"   options (see arun.c)
    expect: [...]          the results, in order, type-exact, field order sensitive
    expect_set: [...]      the results in any order (each document type-exact, field order
                           sensitive; compared as multisets), for pipelines that fix no order
    error: text            the pipeline fails with a message containing text
    spills: true           also require that a $sort/$group spilled (needs mem:)

Expected values are canonicalized by arun itself ({"echo": ...}), so the comparison is a
comparison of canonical Extended JSON text. Exits 1 on any failure, printing file:line.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

DIRECTIVES = ("docs", "colls", "pipeline", "mem", "now", "out", "expect", "expect_set", "error",
              "spills")
OPTIONS = ("mem", "now", "out")


class Case:
    def __init__(self, path, line):
        self.path, self.line = path, line
        self.docs = self.colls = None
        self.fields = {}
        self.kind = self.want = None
        self.spills = False

    def where(self):
        return "%s:%d" % (os.path.relpath(self.path), self.line)

    def text(self):
        parts = ['"docs": ' + self.docs, '"pipeline": ' + self.fields["pipeline"]]
        if self.colls:
            parts.append('"colls": ' + self.colls)
        for k in OPTIONS:
            if k in self.fields:
                parts.append('"%s": %s' % (k, self.fields[k]))
        return "{" + ", ".join(parts) + "}"


def parse_file(path):
    cases, block = [], []
    state = {"docs": None, "colls": None}

    def flush():
        nonlocal block
        if not block:
            return
        d = dict((k, (n, t)) for n, k, t in block)
        if len(d) != len(block):
            raise SystemExit("%s:%d: a directive appears twice in one block" % (path, block[0][0]))
        if "docs" in d:
            state["docs"] = d["docs"][1]
            state["colls"] = None
        if "colls" in d:
            state["colls"] = d["colls"][1]
        if "pipeline" in d:
            if state["docs"] is None:
                raise SystemExit("%s:%d: a case before any docs:" % (path, d["pipeline"][0]))
            c = Case(path, d["pipeline"][0])
            c.docs, c.colls = state["docs"], state["colls"]
            for k in ("pipeline",) + OPTIONS:
                if k in d:
                    c.fields[k] = d[k][1]
            kinds = [k for k in ("expect", "expect_set", "error") if k in d]
            if len(kinds) != 1:
                raise SystemExit("%s:%d: a case needs exactly one of expect:, expect_set:, error:"
                                 % (path, c.line))
            c.kind, c.want = kinds[0], d[kinds[0]][1]
            c.spills = "spills" in d and d["spills"][1].strip() == "true"
            cases.append(c)
        else:
            extra = [k for k in d if k not in ("docs", "colls")]
            if extra:
                raise SystemExit("%s:%d: %s: without pipeline:" % (path, block[0][0], extra[0]))
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


def run_arun(arun, lines):
    p = subprocess.run([arun], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("arun failed (%d): %s" % (p.returncode, p.stderr.strip()))
    # arun never writes to stderr on success: anything there is a sanitizer report (UBSan
    # continues after reporting unless halt_on_error is set)
    if p.stderr.strip():
        raise SystemExit("arun wrote to stderr: %s" % p.stderr.strip()[:2000])
    out = p.stdout.splitlines()
    if len(out) != len(lines):
        raise SystemExit("arun printed %d lines for %d inputs" % (len(out), len(lines)))
    return out


def docs_text(result_line):
    r = json.loads(result_line)
    if "ok" not in r:
        return None
    return [json.dumps(d) for d in r["ok"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arun", required=True)
    ap.add_argument("-v", action="store_true")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        files += sorted(glob.glob(os.path.join(p, "*.txt"))) if os.path.isdir(p) else [p]
    cases = [c for f in files for c in parse_file(f)]
    lines = []
    for c in cases:
        lines.append(c.text())
        if c.kind != "error":
            lines.append('{"echo": %s}' % c.want)
    out = run_arun(a.arun, lines)
    fails, i = 0, 0
    for c in cases:
        got = out[i]
        i += 1
        ok, why = True, ""
        if c.kind == "error":
            want = c.want.strip()
            if want.startswith('"'):
                want = json.loads(want)
            r = json.loads(got)
            ok = "error" in r and want in r["error"]
        else:
            want_line = out[i]
            i += 1
            if "error" in json.loads(want_line):
                ok, why = False, "bad expectation: " + want_line
            else:
                w, g = docs_text(want_line), docs_text(got)
                if g is None:
                    ok = False
                elif c.kind == "expect":
                    ok = w == g
                else:
                    ok = sorted(w) == sorted(g)
                if ok and c.spills:
                    sp = json.loads(got).get("spills")
                    n = int(sp["$numberLong"]) if isinstance(sp, dict) else 0
                    ok, why = n > 0, "expected the case to spill (spills: %s)" % sp
        if ok:
            if a.v:
                print("ok   %s" % c.where())
            continue
        fails += 1
        print("FAIL %s: %s" % (c.where(), c.text()))
        print("  want %s: %s" % (c.kind, c.want))
        print("  got: %s" % got)
        if why:
            print("  " + why)
    print("query-agg-corpus: %d cases, %d passed, %d failed" % (len(cases), len(cases) - fails, fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
