#!/usr/bin/env bash
# `history detect` on real runs (libtorch on the CPU, `history_real/mlp.toml`), not synthetic numbers:
# 1. a shifted series: BEFORE runs, then AFTER runs beside a CPU load on the runs' core (a busy loop spinning
#    DUTY of every PERIOD seconds, `history_real/busy.py`), each run recorded with `run --record --revision`;
#    prints every point, the measured slowdown, and where `history detect` put the change point against the
#    point where the load started;
# 2. a stationary series of STATIONARY runs without the load, and its change points (there should be none).
# Runs are pinned as `history_real/common.sh` says (PIN=rt|pinned|none); the load average is printed before
# and after each part, since other work on the machine is noise the runs see.
#
# Usage: scripts/history_real_detect.sh [BEFORE] [AFTER] [STATIONARY]     (defaults 12 12 30)
# DUTY (default 0.2) and PERIOD (0.002 s) set the load; WORK keeps the stores and results (default: a new
# temporary folder, printed); TRAINBENCH_BIN skips the build; PROFILE=dev builds the quicker unoptimised binary.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
source scripts/history_real/common.sh

BEFORE="${1:-12}" AFTER="${2:-12}" STATIONARY="${3:-30}"
DUTY="${DUTY:-0.2}" PERIOD="${PERIOD:-0.002}"
WORK="${WORK:-$(mktemp -d)}"
mkdir -p "$WORK"
trap hr_load_stop EXIT
hr_build
echo "trainbench: $TB; work folder: $WORK"

# series STORE NAME FROM TO [LOADED_FROM]: runs FROM..TO-1 into STORE, the load on from run LOADED_FROM.
series() {
    local store="$1" name="$2" from="$3" to="$4" loaded_from="${5:-}" i
    hr_run "$WORK/$name/warm-up" # unrecorded: the first run after a pause loads libtorch from a cold cache
    for ((i = from; i < to; i++)); do
        [[ -n "$loaded_from" && $i -eq $loaded_from ]] && hr_load_start "$DUTY" "$PERIOD"
        hr_run "$WORK/$name/p$(printf %03d "$i")" --record --store "$store" --revision "$(printf "$name%03d" "$i")"
    done
    hr_load_stop
}

# report STORE TRUTH: the step-time points, the slowdown, and the change points `history detect` found.
report() {
    local store="$1" truth="$2"
    "$TB" history show :step_time --store "$store" --format json > "$WORK/show.json"
    set +e
    "$TB" history detect --store "$store" --format json > "$WORK/detect.json"
    local code=$?
    set -e
    python3 - "$WORK/show.json" "$WORK/detect.json" "$truth" "$code" <<'PY'
import json, statistics, sys
show, detect = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
truth, code = int(sys.argv[3]), int(sys.argv[4])
values = [p["value"] * 1e3 for p in show["points"]]
print("step time per point (ms): " + " ".join(
    f"{'|' if i == truth else ''}{v:.2f}" for i, v in enumerate(values)))
if 0 < truth < len(values):
    before, after = values[:truth], values[truth:]
    m0, m1 = statistics.median(before), statistics.median(after)
    print(f"load from point #{truth}: median {m0:.3f} ms before, {m1:.3f} ms after: slowdown {(m1 / m0 - 1) * 100:+.1f}% "
          f"(spread before: {statistics.stdev(before) / statistics.mean(before) * 100:.1f}% CV, "
          f"after: {statistics.stdev(after) / statistics.mean(after) * 100:.1f}% CV)")
total = 0
for s in detect["series"]:
    d = s["detection"]
    changes = d.get("changes", [])
    total += len(changes)
    if s["metric"] == "step_time" or changes:
        where = ", ".join(
            f"#{c['first_point']['index']} {c['direction']} {c['relative_change'] * 100:+.1f}% (p = {c['p_value']:.1e})"
            for c in changes) or ("none" if d["status"] == "checked" else d["status"])
        print(f"  {s['metric']:<12} {len(changes)} change point(s): {where}")
step = next(s for s in detect["series"] if s["metric"] == "step_time")
found = [c["first_point"]["index"] for c in step["detection"].get("changes", [])]
if 0 < truth < len(values):
    near = [i for i in found if abs(i - truth) <= 1]
    verdict = f"found at #{near[0]} (truth #{truth}, off by {near[0] - truth})" if near else "NOT found within one point"
    print(f"step-time change point: {verdict}; {len(found)} in the series, {total} over all {len(detect['series'])} series; "
          f"detect exit {code}")
else:
    print(f"stationary: {len(found)} step-time change point(s), {total} over all {len(detect['series'])} series; "
          f"detect exit {code}")
PY
}

echo "== 1. $BEFORE runs, then $AFTER beside a load of duty $DUTY every $PERIOD s on core $HR_CORE"
hr_machine_load
series "$WORK/shift.sqlite" shift 0 $((BEFORE + AFTER)) "$BEFORE"
hr_machine_load
report "$WORK/shift.sqlite" "$BEFORE"

[[ "$STATIONARY" -gt 0 ]] || exit 0
echo "== 2. $STATIONARY runs, no load"
hr_machine_load
series "$WORK/stationary.sqlite" stationary 0 "$STATIONARY"
hr_machine_load
report "$WORK/stationary.sqlite" 0
