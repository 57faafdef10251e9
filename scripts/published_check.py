#!/usr/bin/env python3
"""Published GPU training figures against `trainbench predict` (issue 42).

Reads the rows declared in validation/published_rows.toml (which tune, which judge: fixed before fitting), predicts
each predictable row with `trainbench predict --format json` and the row's `--set` overrides, and prints a Markdown
table: published and predicted throughput (tokens/s per GPU, or images/s over all GPUs), the prediction's 80%
interval, the error (predicted / published - 1), whether the published figure lies inside the interval, and what the
figure depends on that the model cannot see. Closing lines: the median and worst |error| over the judged rows (the
goal: median <= 15%), the same over the tuning rows, the interval coverage over judged rows.

Usage: scripts/published_check.py [--bin PATH] [--rows FILE] [--published]  (binary: --bin, else $TRAINBENCH_BIN,
else $CARGO_TARGET_DIR's or target/'s debug build). --published: each row's GPU on the profile built from published
micro-benchmark figures (validation/profiles/<gpu>-published.toml) instead of the shipped datasheet profile.
"""
import json
import os
import statistics
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def binary():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return arg("--bin", os.environ.get("TRAINBENCH_BIN", os.path.join(target, "debug", "trainbench")))


def items_per_sample(row):
    """Tokens per sequence for LLM rows (the override, else the spec's), 1 for images."""
    if row["unit"] == "images/s":
        return 1
    for s in row.get("sets", []):
        if s.startswith("model.seq_len="):
            return int(s.split("=", 1)[1])
    spec = tomllib.load(open(os.path.join(ROOT, row["spec"]), "rb"))
    return int(spec["model"]["seq_len"])


def predict(row, exe):
    hardware = row["hardware"]
    if "--published" in sys.argv:
        hardware = f"validation/profiles/{hardware}-published.toml"
    cmd = [exe, "predict", row["spec"], "--hardware", hardware, "--format", "json", "--set", 'topology.backend="mock"']
    for s in row.get("sets", []):
        cmd += ["--set", s]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[0] if out.stderr.strip() else f"exit {out.returncode}"
    p = json.loads(out.stdout)["predictions"][0]
    scale = items_per_sample(row) / (row["gpus"] if row["unit"] == "tokens/s/GPU" else 1)
    global_batch = p["batch_size"]
    rate = lambda s: global_batch / s * scale if s and s > 0 else float("nan")
    mesh = p.get("mesh")
    if mesh:
        # A device mesh (tensor / pipeline parallelism): its step, interval and memory headline are the mesh's.
        interval, predicted, fits = mesh.get("interval") or {}, rate(mesh["step_time_s"]), mesh["fits"]
    else:
        interval, predicted, fits = p.get("interval") or {}, p["samples_per_s"] * scale, p["figures"]["memory"]["fits"]
    return {
        "predicted": predicted,
        "low": rate(interval.get("high_s")),
        "high": rate(interval.get("low_s")),
        "fits": fits,
        "calibrated": p["calibrated"],
    }, " ".join(cmd[1:])


def main():
    rows = tomllib.load(open(arg("--rows", os.path.join(ROOT, "validation/published_rows.toml")), "rb"))["row"]
    exe = binary()
    print("| row | role | published | predicted | 80% interval | error | inside | fits | unseen by the model |")
    print("|---|---|---:|---:|---:|---:|---|---|---|")
    errs = {"judge": [], "tune": []}
    inside = {"judge": [], "tune": []}
    commands = []
    for row in rows:
        unseen = "; ".join(row.get("unseen", []))
        if not row.get("predictable", False):
            print(f"| {row['id']} | {row['role']} | {row['published']:,.0f} {row['unit']} | not predicted | | | | | {row.get('why_not', '')}; {unseen} |")
            continue
        got, how = predict(row, exe)
        if got is None:
            print(f"| {row['id']} | {row['role']} | {row['published']:,.0f} | predict failed: {how} | | | | | {unseen} |")
            continue
        commands.append(f"{row['id']}: trainbench {how}")
        e = got["predicted"] / row["published"] - 1.0
        held = got["low"] <= row["published"] <= got["high"]
        errs[row["role"]].append(abs(e))
        inside[row["role"]].append(held)
        print(
            f"| {row['id']} | {row['role']} | {row['published']:,.0f} {row['unit']} | {got['predicted']:,.0f} | "
            f"{got['low']:,.0f}-{got['high']:,.0f} | {100 * e:+.1f}% | {'yes' if held else 'NO'} | "
            f"{'yes' if got['fits'] else 'no (priced as if it fit)'} | {unseen} |"
        )
    print()
    for role, name in (("judge", "judged rows"), ("tune", "tuning rows")):
        e = errs[role]
        if e:
            k = inside[role]
            print(
                f"- {name}: median |error| {100 * statistics.median(e):.1f}%, worst {100 * max(e):.1f}% over {len(e)}; "
                f"80% interval holds the published figure in {sum(k)} of {len(k)}"
            )
    print("- goal: median |error| <= 15% over the judged rows")
    print()
    print("Commands:")
    for c in commands:
        print(f"- {c}")


if __name__ == "__main__":
    main()
