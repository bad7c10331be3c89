#!/usr/bin/python3
"""dec_math_diff.py - the transcendental operators on decimal128 ($sqrt $exp $ln $log10 $log
$pow) against Python's decimal module in decimal128's context (34 digits, half to even,
exponents -6176..6111, clamped). Python's sqrt, exp, ln and log10 are correctly rounded; $log
with a base other than 10 is ln x / ln b worked out at 90 digits and rounded once; $pow is
Python's power (for integer exponents the exact power rounded once), padded to 34 digits by adding the zero of the least exponent, as MongoDB pads
bid128_pow's result. Each result is compared as text (value and exponent). Then MongoDB's
errors and the special values.

  dec_math_diff.py --arun ARUN [--n N] [--seed S]
"""
import argparse
import decimal
import fractions
import json
import random
import subprocess
import sys

D = decimal.Decimal
CTX = decimal.Context(prec=34, rounding=decimal.ROUND_HALF_EVEN, Emax=6144, Emin=-6143,
                      capitals=1, clamp=1, traps=[])
WIDE = decimal.Context(prec=90, rounding=decimal.ROUND_HALF_EVEN, Emax=10**6, Emin=-10**6,
                       traps=[])
ZERO_LEAST = D("0E-6176")
# rounding to 90 digits toward zero unless the last digit is 0 or 5 keeps the exact value's
# side of every 34-digit midpoint, so the second rounding is the correct one
STICKY = decimal.Context(prec=90, rounding=decimal.ROUND_05UP, Emax=10**6, Emin=-10**6,
                         traps=[])


def power(x, y):
    """Python's power, except for integer exponents: there the exact power, rounded once
    (Python's power of a negative integer exponent is not always correctly rounded: it is
    off by one unit for 0.9999999999999999999999999999999995 ** -13)."""
    if y != y.to_integral_value() or abs(y) > 400:
        return CTX.power(x, y)
    v = fractions.Fraction(x) ** int(y)
    return CTX.plus(STICKY.divide(D(v.numerator), D(v.denominator)))


def ej(d):
    return {"$numberDecimal": str(d)}


def rand_pos(r, lo=-40, hi=40):
    """A positive decimal of 1..34 digits, its leading digit at 10^lo..10^hi."""
    nd = r.choice([1, 2, 3, 5, 9, 17, 25, 33, 34])
    coef = r.randrange(10 ** (nd - 1), 10 ** nd)
    lead = r.choice([0, 0, 1, -1, 2, -2, r.randint(lo, hi)])
    return CTX.create_decimal(f"{coef}E{lead - nd + 1}")


def near_one(r):
    """1 +- less than 10^-k: where a logarithm is tiny and must still have 34 digits."""
    k, m = r.randint(1, 33), r.randint(1, 30)
    delta = CTX.create_decimal(f"{r.randrange(1, 10**m)}E-{k + m}")
    return CTX.add(1, delta) if r.random() < 0.5 else CTX.subtract(1, delta)


def log_base(x, b):
    """log10 is Python's; any other base: ln x / ln b at 90 digits, rounded once, with 34
    digits even when exact (docfs pads those, as it cannot tell them from inexact ones)."""
    if b == 10:
        return CTX.log10(x)
    return CTX.add(CTX.plus(WIDE.divide(WIDE.ln(x), WIDE.ln(b))), ZERO_LEAST)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arun", required=True)
    ap.add_argument("--n", type=int, default=700)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)

    cases, wants = [], []

    def add(expr_args, want):
        cases.append((expr_args, want))

    for _ in range(a.n):
        x = rand_pos(r) if r.random() < 0.8 else near_one(r)
        if x <= 0:
            x = D(2)
        add({"$sqrt": ej(x)}, CTX.sqrt(x))
        add({"$ln": ej(x)}, CTX.ln(x))
        add({"$log10": ej(x)}, CTX.log10(x))
        b = r.choice([D(2), D(10), D("0.5"), rand_pos(r, -5, 5), near_one(r)])
        if b != 1 and x != 1 and not (b == 2 and x == 2 ** round(float(CTX.ln(x) / CTX.ln(D(2))))):
            add({"$log": [ej(x), ej(b)]}, log_base(x, b))
        t = CTX.create_decimal(f"{'-' if r.random() < 0.5 else ''}{r.randrange(1, 10**r.choice([1, 3, 9, 20, 34]))}E{r.randint(-40, 2)}")
        if abs(t) < 20000:
            add({"$exp": ej(t)}, CTX.exp(t))
        base = rand_pos(r, -3, 3) if r.random() < 0.8 else near_one(r)
        kind = r.random()
        if kind < 0.35:
            y = D(r.randint(-40, 40))
        elif kind < 0.7:
            y = CTX.create_decimal(f"{r.randint(-999, 999)}E-{r.randint(1, 3)}")
        else:
            y = CTX.create_decimal(f"{'-' if r.random() < 0.5 else ''}{r.randrange(1, 10**r.choice([5, 20, 34]))}E-{r.randint(30, 36)}")
        if r.random() < 0.15 and y == y.to_integral_value():
            base = -base  # a negative base with an integer exponent
        if y != 0 and base != 1:
            add({"$pow": [ej(base), ej(y)]}, CTX.add(power(base, y), ZERO_LEAST))

    # the far ends of the exponent range: subnormal and overflowing results
    for _ in range(max(a.n // 10, 10)):
        nd = r.randint(1, 34)
        x = CTX.create_decimal(f"{r.randrange(10 ** (nd - 1), 10 ** nd)}E{r.randint(-6176, 6111 - nd + 1)}")
        add({"$sqrt": ej(x)}, CTX.sqrt(x))
        add({"$ln": ej(x)}, CTX.ln(x))
        add({"$log10": ej(x)}, CTX.log10(x))
        t = CTX.create_decimal(f"{r.choice(['-', ''])}{r.randint(14000, 14300)}.{r.randrange(10**20)}")
        add({"$exp": ej(t)}, CTX.exp(t))
        base = rand_pos(r, -3, 3)
        y = CTX.create_decimal(f"{r.choice(['-', ''])}{r.randint(1000, 99999)}.{r.randint(1, 99)}")
        add({"$pow": [ej(base), ej(y)]}, CTX.add(power(base, y), ZERO_LEAST))

    # exact results and the exponents they keep
    for x, want in [("4", "2"), ("4.00", "2.0"), ("0.0004", "0.02"), ("1E+2", "1E+1"),
                    ("2.25", "1.5"), ("0", "0"), ("0E+5", "0E+2"), ("-0", "-0"),
                    ("1E-6176", "1E-3088"), ("NaN", "NaN"), ("Infinity", "Infinity")]:
        add({"$sqrt": ej(D(x))}, D(want))
    for x, want in [("0", "1"), ("-0.00", "1"), ("NaN", "NaN"), ("Infinity", "Infinity"),
                    ("-Infinity", "0"), ("100000", "Infinity"), ("-100000", "0E-6176"),
                    ("1", "2.718281828459045235360287471352662")]:
        add({"$exp": ej(D(x))}, D(want))
    for x, want in [("1", "0"), ("1.000", "0"), ("NaN", "NaN"), ("Infinity", "Infinity")]:
        add({"$ln": ej(D(x))}, D(want))
    for x, want in [("1000", "3"), ("1000.0", "3"), ("1E-6176", "-6176"), ("0.01", "-2"),
                    ("1", "0")]:
        add({"$log10": ej(D(x))}, D(want))
    for x, b, want in [("8", "2", "3"), ("0.125", "2", "-3"), ("1024.0", "2.0", "10"),
                       ("100", "10", "2"), ("1", "7", "0")]:
        add({"$log": [ej(D(x)), ej(D(b))]}, D(want))
    pad = lambda s: str(CTX.add(D(s), ZERO_LEAST))
    for x, y, want in [("2", "10", pad("1024")), ("1.10", "2", pad("1.21")),
                       ("-8", "3", pad("-512")), ("4", "0.5", pad("2")),
                       ("-8", "0.5", "NaN"), ("5", "0", pad("1")), ("1", "NaN", pad("1")),
                       ("NaN", "0", pad("1")), ("0", "3", "0E-6176"),
                       ("10", "7000", "Infinity"), ("10", "-7000", "0E-6176"),
                       ("0.5", "Infinity", "0E-6176"), ("2", "Infinity", "Infinity"),
                       ("2", "-0.5", "0.7071067811865475244008443621048490")]:
        add({"$pow": [ej(D(x)), ej(D(y))]}, D(want))

    docs_cases = [{"docs": [{"_id": 1}],
                   "pipeline": [{"$project": {"_id": 0, "r": e}}]} for e, _ in cases]
    # MongoDB's errors: each must fail
    errors = [{"$sqrt": ej(D("-1"))}, {"$sqrt": ej(D("-1E-6176"))}, {"$ln": ej(D("0"))},
              {"$ln": ej(D("-2"))}, {"$log10": ej(D("0E-6176"))}, {"$log10": ej(D("-Infinity"))},
              {"$log": [ej(D("0")), 10]}, {"$log": [ej(D("5")), ej(D("1"))]},
              {"$log": [ej(D("5")), ej(D("0"))]}, {"$log": [ej(D("5")), ej(D("-2"))]},
              {"$log": [ej(D("5")), ej(D("1.000"))]}, {"$pow": [ej(D("0")), ej(D("-1"))]}]
    err_cases = [{"docs": [{"_id": 1}], "pipeline": [{"$project": {"_id": 0, "r": e}}]}
                 for e in errors]

    p = subprocess.run([a.arun], input="\n".join(json.dumps(c) for c in docs_cases + err_cases)
                       + "\n", capture_output=True, text=True, check=True)
    got = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    bad = 0
    per_op = {}
    for (expr, want), g in zip(cases, got[:len(cases)]):
        op = next(iter(expr))
        n_ok = per_op.setdefault(op, [0, 0])
        n_ok[1] += 1
        v = g.get("ok", [{}])[0].get("r", {}).get("$numberDecimal") if "ok" in g else g
        if v == str(want):
            n_ok[0] += 1
            continue
        bad += 1
        if bad <= 20:
            print(f"FAIL {json.dumps(expr)}\n  want {want}\n  got  {v}")
    for e, g in zip(errors, got[len(cases):]):
        if "ok" in g:
            bad += 1
            print(f"FAIL {json.dumps(e)} should be refused, gave {g}")
    if len(got) != len(cases) + len(errors):
        print(f"FAIL: {len(got)} answers for {len(cases) + len(errors)} cases")
        bad += 1
    print("dec_math_diff: " + ", ".join(f"{op} {k[0]}/{k[1]}" for op, k in sorted(per_op.items()))
          + f"; {len(errors)} refusals; {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
