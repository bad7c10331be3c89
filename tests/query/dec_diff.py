#!/usr/bin/python3
"""dec_diff.py - decimal128 arithmetic against Python's decimal module (an independent
implementation of the same IEEE 754-2008 arithmetic) with decimal128's context: 34 digits,
half to even, exponents -6176..6111 (clamped). Random operands of every length and scale go
through $add, $subtract, $multiply, $divide, $round, $trunc, $abs, $ceil, $floor and $sum
(arun: the aggregation engine) and $inc and $mul (urun: the update engine); each result is
compared as text, so the value and its exponent must both agree.

  dec_diff.py --arun ARUN --urun URUN [--n N] [--seed S]
"""
import argparse
import decimal
import json
import random
import subprocess
import sys

D = decimal.Decimal
CTX = decimal.Context(prec=34, rounding=decimal.ROUND_HALF_EVEN, Emax=6144, Emin=-6143,
                      capitals=1, clamp=1, traps=[])


def rand_dec(r):
    """A finite decimal of 1..34 digits at a scale that is mostly moderate, sometimes far."""
    nd = r.choice([1, 2, 3, 5, 8, 12, 16, 20, 25, 30, 33, 34])
    coef = r.randrange(10 ** (nd - 1) if nd > 1 else 0, 10 ** nd)
    exp = r.choice([0, 0, -1, -2, -3, -5, -10, -20, 1, 3, 10, r.randint(-40, 40)])
    sign = r.choice(["", "-"])
    return CTX.create_decimal(f"{sign}{coef}E{exp}")


def ej(d):
    return {"$numberDecimal": str(d)}


def rounded(d, places, mode):
    """$round/$trunc/$ceil/$floor as MongoDB: an exponent at or above -places is kept."""
    if d.as_tuple().exponent >= -places:
        return d
    q = D(1).scaleb(-places)
    return d.quantize(q, rounding=mode, context=CTX)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arun", required=True)
    ap.add_argument("--urun", required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)

    agg_cases, agg_want, upd_cases, upd_want = [], [], [], []
    # the cases, with MongoDB's documented answers
    agg_cases.append({"docs": [{"_id": 1, "a": ej(D("1234567890123456789012345678901234")),
                                "b": ej(D("9876543210987654321098765432109876"))}],
                      "pipeline": [{"$project": {"_id": 0, "m": {"$multiply": ["$a", "$b"]},
                                                 "s": {"$add": ["$a", ej(D("1E-20"))]}}}]})
    agg_want.append({"m": "1.219326311370217952261850327338667E+67",
                     "s": "1234567890123456789012345678901234"})
    for i in range(a.n):
        x, y = rand_dec(r), rand_dec(r)
        z = rand_dec(r)
        if y == 0:  # a zero divisor is $divide's error, not arithmetic
            y = CTX.create_decimal("7E-3")
        places = r.randint(0, 12)
        proj = {
            "add": {"$add": ["$x", "$y"]},
            "sub": {"$subtract": ["$x", "$y"]},
            "mul": {"$multiply": ["$x", "$y"]},
            "div": {"$divide": ["$x", "$y"]},
            "round": {"$round": ["$x", places]},
            "trunc": {"$trunc": ["$x", places]},
            "abs": {"$abs": "$x"},
            "ceil": {"$ceil": "$y"},
            "floor": {"$floor": "$y"},
        }
        want = {
            "add": CTX.add(x, y),
            "sub": CTX.subtract(x, y),
            "mul": CTX.multiply(x, y),
            "div": CTX.divide(x, y),
            "round": rounded(x, places, decimal.ROUND_HALF_EVEN),
            "trunc": rounded(x, places, decimal.ROUND_DOWN),
            "abs": CTX.copy_abs(x),
            "ceil": rounded(y, 0, decimal.ROUND_CEILING),
            "floor": rounded(y, 0, decimal.ROUND_FLOOR),
        }
        agg_cases.append({"docs": [{"_id": i, "x": ej(x), "y": ej(y)}],
                          "pipeline": [{"$project": dict(proj, _id=0)}]})
        agg_want.append({k: str(v) for k, v in want.items()})
        # an accumulator: three values summed in order
        agg_cases.append({"docs": [{"_id": 1, "v": ej(x)}, {"_id": 2, "v": ej(y)},
                                   {"_id": 3, "v": ej(z)}],
                          "pipeline": [{"$sort": {"_id": 1}},
                                       {"$group": {"_id": None, "s": {"$sum": "$v"}}}]})
        # MongoDB's sum starts from a zero of exponent 0 (Decimal128's normalized zero)
        agg_want.append({"s": str(CTX.add(CTX.add(CTX.add(D(0), x), y), z))})
        upd_cases.append({"doc": {"_id": 1, "a": ej(x)}, "update": {"$inc": {"a": ej(y)}}})
        upd_want.append(str(CTX.add(x, y)))
        upd_cases.append({"doc": {"_id": 1, "a": ej(x)}, "update": {"$mul": {"a": ej(y)}}})
        upd_want.append(str(CTX.multiply(x, y)))

    def run(prog, cases):
        p = subprocess.run([prog], input="\n".join(json.dumps(c) for c in cases) + "\n",
                           capture_output=True, text=True, check=True)
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]

    bad = 0
    for case, want, got in zip(agg_cases, agg_want, run(a.arun, agg_cases)):
        if "ok" not in got or len(got["ok"]) != 1:
            print("FAIL", json.dumps(case), "->", got)
            bad += 1
            continue
        res = got["ok"][0]
        for k, v in want.items():
            g = res.get(k, {}).get("$numberDecimal")
            if g != v:
                bad += 1
                if bad <= 20:
                    print(f"FAIL {k}: {json.dumps(case)}\n  want {v}\n  got  {g}")
    for case, want, got in zip(upd_cases, upd_want, run(a.urun, upd_cases)):
        g = got.get("ok", {}).get("a", {}).get("$numberDecimal")
        if g != want:
            bad += 1
            if bad <= 20:
                print(f"FAIL update: {json.dumps(case)}\n  want {want}\n  got  {g}")
    print(f"dec_diff: {a.n} operand sets, {len(agg_cases)} aggregation and {len(upd_cases)} "
          f"update cases, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
