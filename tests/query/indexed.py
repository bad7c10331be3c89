#!/usr/bin/env python3
"""indexed.py - the indexed pass shared by the corpus (run_corpus.py) and the mingo
differential test (diff/run.sh): every case runs again over a generated set of indexes
(qrun's "autoindex": single-field, multikey where the data has arrays, sparse, hashed,
compound and partial ones), once with the planner's choice and once with each candidate plan
forced by a hint (qrun's "allplans", on the same collection), and every run must return what
the collection scan returned. The same runs as counts (qrun's "count", where an exact index
scan reads no document: COUNT_SCAN) must count what the scan returned.

    indexed.py --qrun PATH CASES.jsonl     (qrun input lines; prints failures, exits 1)

Comparison (README.md): without a sort the results compare as a multiset (canonical JSON,
object keys sorted: a covered plan builds documents in key pattern order); with skip or
limit and no sort only the count compares (MongoDB defines no result set then either). With
a sort the sequences of sort keys must be equal, and the documents of each run of equal
keys (a tie group) must be the same multiset: a SORT stage breaks ties by _id, an index
that provides the sort returns them in index order (plan.c note 6), and MongoDB leaves that
order unspecified. A tie group that skip (the first) or limit (the last) cuts may hold
other documents of that group: each of them must be one the whole sorted result (the scan
run without skip and limit, qrun's "unlimited") has in that group.
"""
import argparse
import json
import subprocess
import sys


def run_qrun(qrun, lines):
    p = subprocess.run([qrun], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("qrun failed (%d): %s" % (p.returncode, p.stderr.strip()))
    out = p.stdout.splitlines()
    if len(out) != len(lines):
        raise SystemExit("qrun printed %d lines for %d cases" % (len(out), len(lines)))
    return out


def with_fields(case_text, fields):
    """Adds fields (a dict of JSON-able values) to a qrun case line (an object literal)."""
    t = case_text.rstrip()
    assert t.endswith("}")
    extra = ", ".join('"%s": %s' % (k, json.dumps(v)) for k, v in fields.items())
    return t[:-1] + ", " + extra + "}"


def canon(d):
    return json.dumps(d, sort_keys=True)


def groups(docs, keys):
    """The tie groups of a sorted result: a list of (key, [canonical docs])."""
    out = []
    for d, k in zip(docs, keys):
        if out and out[-1][0] == k:
            out[-1][1].append(d)
        else:
            out.append((k, [d]))
    return out


def same(scan, got, sorted_, has_skip, has_limit, whole=None):
    """None when got agrees with scan, else the reason. whole: the scan's run without skip
    and limit (a sorted case with either), which says what a cut tie group may hold."""
    a, b = json.loads(scan), json.loads(got)
    if isinstance(b.get("ok"), dict):  # a count ({"$numberLong": n}), which drops the sort
        if "error" in a:               # and projection, so their errors do not apply
            return None
        n = int(b["ok"]["$numberLong"])
        return None if n == len(a["ok"]) else "counted %d, not %d" % (n, len(a["ok"]))
    if "error" in a or "error" in b:
        if "error" in a and "error" in b:
            return None
        return "one run failed"
    da, db = [canon(d) for d in a["ok"]], [canon(d) for d in b["ok"]]
    if len(da) != len(db):
        return "%d results instead of %d" % (len(db), len(da))
    if not sorted_:
        if has_skip or has_limit:
            return None
        return None if sorted(da) == sorted(db) else "other documents"
    if da == db:
        return None
    ka = a.get("keys", "").split() if a.get("keys") else []
    kb = b.get("keys", "").split() if b.get("keys") else []
    if ka != kb or len(ka) != len(da):
        return "sort keys differ"
    ga, gb = groups(da, ka), groups(db, kb)
    pool = {}
    if whole is not None:
        w = json.loads(whole)
        wk = w.get("keys", "").split() if w.get("keys") else []
        for k, docs in groups([canon(d) for d in w.get("ok", [])], wk):
            pool.setdefault(k, []).extend(docs)
    for i, ((k, xa), (_, xb)) in enumerate(zip(ga, gb)):
        cut = (i == 0 and has_skip) or (i == len(ga) - 1 and has_limit)
        if not cut:
            if sorted(xa) != sorted(xb):
                return "other documents among ties"
            continue
        left = list(pool.get(k, []))
        for d in xb:
            if d not in left:
                return "a document not in its tie group"
            left.remove(d)
    return None


def check(qrun, cases, where=None, verbose=False, show=10):
    """cases: list of (case_text, sorted, has_skip, has_limit). Returns (failed cases, runs)."""
    scan = run_qrun(qrun, [with_fields(c[0], {"keys": True}) for c in cases])
    out = run_qrun(qrun, [with_fields(c[0], {"autoindex": True, "allplans": True})
                          for c in cases])
    counted = run_qrun(qrun, [with_fields(c[0], {"autoindex": True, "allplans": True,
                                                "count": True}) for c in cases])
    cut = [i for i, c in enumerate(cases) if c[1] and (c[2] or c[3])]
    wholes = dict(zip(cut, run_qrun(qrun, [with_fields(cases[i][0], {"keys": True,
                                                                     "unlimited": True})
                                          for i in cut]))) if cut else {}
    fails = runs = 0
    failed_cases = set()
    for i, c in enumerate(cases):
        r = json.loads(out[i])
        got = [("planner", json.dumps({k: v for k, v in r.items() if k != "plans"}))]
        for p in r.get("plans", []):
            got.append(("hint " + p["plan"], json.dumps({k: v for k, v in p.items()
                                                          if k != "plan"})))
        r = json.loads(counted[i])
        got.append(("count", json.dumps(r)))
        for p in r.get("plans", []):
            got.append(("count, hint " + p["plan"], json.dumps(p)))
        runs += len(got)
        for how, g in got:
            why = same(scan[i], g, c[1], c[2], c[3], wholes.get(i))
            if why is None:
                continue
            fails += 1
            failed_cases.add(i)
            if fails <= show:
                print("FAIL %s (%s): %s" % (where(i) if where else "case %d" % (i + 1), how, why))
                print("  query:   %s" % c[0])
                print("  scan:    %s" % scan[i])
                print("  indexed: %s" % g)
                print("  plans:   %s" % [p["plan"] for p in r.get("plans", [])])
    if verbose:
        print("indexed: %d runs over %d cases" % (runs, len(cases)))
    return len(failed_cases), runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qrun", required=True)
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("cases")
    a = ap.parse_args()
    cases = []
    with open(a.cases, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            c = json.loads(line)
            cases.append((line.strip(), "sort" in c and bool(c["sort"]), "skip" in c,
                          "limit" in c))
    nfail, nruns = check(a.qrun, cases, show=a.show)
    print("query-mingo: pass 'indexed': %d runs over %d cases, %d cases failed"
          % (nruns, len(cases), nfail))
    sys.exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
