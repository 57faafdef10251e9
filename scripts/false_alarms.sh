#!/usr/bin/env bash
# False-alarm rate of `trainbench compare`: runs PAIRS pairs of identical runs of one spec (same machine, one
# after the other, a different seed per run) and compares each pair. Since nothing changed between the two runs
# of a pair, every significant verdict (slower or faster) is a false alarm; `slower` ones would fail a CI gate.
#
# Usage: scripts/false_alarms.sh [--pairs N] [--backend tch|wgpu|mock] [--threshold 5%] [--spec FILE]
#                                [--set KEY=VALUE]... [--candidate-set KEY=VALUE]...
# Defaults: 20 pairs of specs/smoke/resnet_tiny.toml (two batch sizes, so 40 compared configurations) on the
# tch backend (CPU). Extra --set overrides go to every run, e.g. `--set run.repeats=3`. --candidate-set
# overrides go to the second run of each pair only (e.g. `--candidate-set model.width=12`, a heavier model):
# then the pairs are real changes and the script reports how many were detected (the test's power).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

PAIRS=20 BACKEND=tch THRESHOLD=5% SPEC=specs/smoke/resnet_tiny.toml
SETS=()
CAND=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --pairs) PAIRS="$2"; shift 2 ;;
        --backend) BACKEND="$2"; shift 2 ;;
        --threshold) THRESHOLD="$2"; shift 2 ;;
        --spec) SPEC="$2"; shift 2 ;;
        --set) SETS+=(--set "$2"); shift 2 ;;
        --candidate-set) CAND+=(--set "$2"); shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

FEATURES=()
[[ "$BACKEND" == tch || "$BACKEND" == wgpu ]] && FEATURES=(--features "$BACKEND")
cargo build --release --quiet "${FEATURES[@]}"
TB="${CARGO_TARGET_DIR:-$ROOT/target}/release/trainbench"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

for i in $(seq 1 "$PAIRS"); do
    for side in a b; do
        seed=$((1000 + 2 * i)); [[ $side == b ]] && seed=$((seed + 1))
        extra=(); [[ $side == b ]] && extra=("${CAND[@]}")
        "$TB" run "$SPEC" --backend "$BACKEND" --quiet --out "$WORK/$i/$side" \
            --set "training.seed=$seed" "${SETS[@]}" "${extra[@]}" > /dev/null
    done
    set +e
    "$TB" compare "$WORK/$i/a" "$WORK/$i/b" --threshold "$THRESHOLD" --format json > "$WORK/$i/compare.json"
    set -e
    python3 - "$WORK/$i/compare.json" "$i" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for p in c["pairs"]:
    s = p.get("step_time")
    change = f"{(s['ratio'] - 1) * 100:+6.2f}% [{(s['ratio_ci'][0] - 1) * 100:+.2f}%, {(s['ratio_ci'][1] - 1) * 100:+.2f}%]" if s else "-"
    floor = f"threshold used {s['threshold'] * 100:.1f}%" if s and 'threshold' in s else ""
    print(f"pair {int(sys.argv[2]):2d} {p['config']:<32} {p['verdict']:<10} {change}  {floor}")
PY
done | tee "$WORK/verdicts.txt"

python3 - "$WORK/verdicts.txt" "$PAIRS" "$BACKEND" "$THRESHOLD" "$SPEC" "${CAND[*]}" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
verdicts = [l.split()[3] for l in lines]
changes = [abs(float(m.group(1))) for l in lines if (m := re.search(r"([+-]\d+\.\d+)%", l))]
slower, faster = verdicts.count("slower"), verdicts.count("faster")
candidate = sys.argv[6].replace("--set ", "")
print(f"\n{sys.argv[5]} on {sys.argv[3]}: {sys.argv[2]} pairs of runs, {len(verdicts)} compared configurations, threshold {sys.argv[4]}")
if candidate:
    print(f"candidate changed by: {candidate}")
    print(f"detected as slower: {slower} of {len(verdicts)} ({faster} flagged faster, {len(verdicts) - slower - faster} no change)")
else:
    print(f"false alarms: {slower + faster} of {len(verdicts)} ({slower} flagged slower, i.e. a failed CI gate; {faster} flagged faster)")
if changes:
    what = "between the pair's runs" if candidate else "between identical runs"
    print(f"|median step-time change| {what}: median {statistics.median(changes):.2f}%, "
          f"90th percentile {sorted(changes)[int(0.9 * (len(changes) - 1))]:.2f}%, max {max(changes):.2f}%")
PY
