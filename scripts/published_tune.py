#!/usr/bin/env python3
"""The one coefficient the tuning rows of validation/published_rows.toml may set: the per-operation fixed cost
(`op_overhead_us`) of the GPU profiles built from published figures, one number for all of them. Tries 0 to 20 us
in steps of 1 on temporary copies of validation/profiles/*-published.toml, predicts the TUNING rows only (never a
judged one), and prints the median |error| of each value; the smallest wins (ties: the smaller value). With
--write, the winner is written into the four profiles.

Usage: scripts/published_tune.py [--bin PATH] [--write]
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import published_check as check  # noqa: E402

GPUS = ("a100", "h100", "h200", "b200")


def with_overhead(text, us):
    return re.sub(r"(?m)^op_overhead_us = .*$", f"op_overhead_us = {us}", text, count=1)


def main():
    rows = [r for r in tomllib.load(open(os.path.join(ROOT, "validation/published_rows.toml"), "rb"))["row"]
            if r["role"] == "tune" and r.get("predictable")]
    exe = check.binary()
    tmp = tempfile.mkdtemp()
    results = []
    for us in range(0, 21):
        for gpu in GPUS:
            src = open(os.path.join(ROOT, f"validation/profiles/{gpu}-published.toml")).read()
            open(os.path.join(tmp, f"{gpu}.toml"), "w").write(with_overhead(src, float(us)))
        errs = []
        for r in rows:
            row = dict(r, hardware=os.path.join(tmp, f"{r['hardware']}.toml"))
            got, _ = check.predict(row, exe)
            if got:
                errs.append(abs(got["predicted"] / r["published"] - 1.0))
        results.append((statistics.median(errs), us, errs))
        print(f"op_overhead_us = {us:2d}: tuning rows median |error| {100 * statistics.median(errs):.1f}% "
              f"({', '.join(f'{100 * e:.1f}%' for e in errs)})")
    best = min(results)
    print(f"chosen: op_overhead_us = {best[1]} (median |error| {100 * best[0]:.1f}% over {len(best[2])} tuning rows)")
    if "--write" in sys.argv:
        for gpu in GPUS:
            path = os.path.join(ROOT, f"validation/profiles/{gpu}-published.toml")
            open(path, "w").write(with_overhead(open(path).read(), float(best[1])))


if __name__ == "__main__":
    main()
