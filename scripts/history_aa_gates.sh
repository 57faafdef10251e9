#!/usr/bin/env bash
# The gate's false alarms on this machine: GATES A/A gates of the same build and spec (`history_real/mlp.toml`,
# libtorch on the CPU). Records BASELINE runs (one point each), then runs GATES candidates of CANDIDATE repeats
# each; gates every one with `history gate CANDIDATE --baseline B --format json`, then records it, as a main
# line records each of its runs, so the series' history (whose point-to-point noise the gate uses) grows as a
# real one would. Nothing changed between baseline and candidates, so every `regression` (or `improvement`) is
# a false alarm; `inconclusive` is the right answer when the noise is too high. Prints each gate's figures, the
# counts of pass / regression / improvement / inconclusive, and the load average before and after.
#
# MODE=fixed (the default): B is the revision of the BASELINE runs recorded first (`aa-base`), as a PR gate
# against its merge-base; MODE=rolling: B is `last:BASELINE`, the series' latest points, as a gate against the
# main line's last N points.
#
# Usage: scripts/history_aa_gates.sh [GATES] [BASELINE] [CANDIDATE]     (defaults 40 10 3)
# PIN=rt|pinned|none as in `history_real/common.sh` (none: runs as a user starts them); WORK keeps the store and
# results (default: a new temporary folder, printed); results already in WORK are not run again, only recorded
# into a new store and gated (to judge a change of the statistics on the same runs); TRAINBENCH_BIN skips the
# build; PROFILE=dev builds the quicker unoptimised binary.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
source scripts/history_real/common.sh

GATES="${1:-40}" BASELINE="${2:-10}" CANDIDATE="${3:-3}" MODE="${MODE:-fixed}"
case "$MODE" in
    fixed) GATE_BASELINE=aa-base ;;
    rolling) GATE_BASELINE="last:$BASELINE" ;;
    *) echo "MODE must be fixed or rolling, not \`$MODE\`" >&2; exit 2 ;;
esac
WORK="${WORK:-$(mktemp -d)}"
mkdir -p "$WORK"
hr_build
STORE="$WORK/aa-$MODE.sqlite"
rm -f "$STORE" "$STORE-wal" "$STORE-shm"
echo "trainbench: $TB; work folder: $WORK; baseline: $GATE_BASELINE"
hr_machine_load
[[ -d "$WORK/base" ]] || hr_run "$WORK/warm-up" # unrecorded: the first run after a pause loads libtorch cold
for ((i = 0; i < BASELINE; i++)); do
    out="$WORK/base/b$(printf %03d "$i")"
    [[ -d "$out" ]] || hr_run "$out"
    "$TB" history record "$out" --store "$STORE" --revision aa-base > /dev/null
done
for ((i = 0; i < GATES; i++)); do
    out="$WORK/cand/c$(printf %03d "$i")"
    [[ -d "$out" ]] || hr_run "$out" --set "run.repeats=$CANDIDATE"
    set +e
    "$TB" history gate "$out" --baseline "$GATE_BASELINE" --store "$STORE" --format json > "$WORK/gate-$MODE-$i.json"
    set -e
    "$TB" history record "$out" --store "$STORE" --revision "aa-cand-$i" > /dev/null
done
hr_machine_load

python3 - "$WORK" "$GATES" "$MODE" <<'PY'
import collections, json, sys
work, gates, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
counts = collections.Counter()
pct = lambda x: "-" if x is None else f"{x * 100:+6.2f}%"
for i in range(gates):
    v = json.load(open(f"{work}/gate-{mode}-{i}.json"))
    s = v["series"][0]
    counts[s["outcome"]] += 1
    interval = s["interval"] or [None, None]
    print(f"gate {i:2d} {s['outcome']:<13} change {pct(s['relative_change'])} [{pct(interval[0])}, {pct(interval[1])}] "
          f"p {s['p_value'] if s['p_value'] is None else format(s['p_value'], '.1e')} noise {pct(s['noise'])} "
          f"series noise {pct(s.get('series_noise'))} "
          f"runs {s['baseline_runs']}/{s['candidate_runs']}"
          + (f" more repeats: {s['more_repeats_needed']}" if s.get("more_repeats_needed") else ""))
print(f"{gates} A/A gates ({mode} baseline): " + ", ".join(f"{counts[k]} {k}" for k in ("pass", "regression", "improvement", "inconclusive")))
PY
