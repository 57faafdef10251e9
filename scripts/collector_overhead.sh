#!/usr/bin/env bash
# Collector overhead: step time of the same spec with all collectors on (CPU sampler, NVML sampler, progress
# probe) versus `--no-collectors`, interleaved round by round so drift hits both sides alike. Prints each
# round's steady-state median step time and the median ratio on/off (the issue's target: under 1.01).
#
# Usage: scripts/collector_overhead.sh SPEC [ROUNDS]   (extra `trainbench run` flags via RUN_ARGS, e.g.
#        RUN_ARGS="--set run.iterations=100 --device cuda:0"; TB=path/to/trainbench skips the release build)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
SPEC=${1:?usage: scripts/collector_overhead.sh SPEC [ROUNDS]}
ROUNDS=${2:-5}
# TB overrides the binary (e.g. an existing debug build: libtorch's kernels are optimised either way).
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch
  TB=target/release/trainbench
fi
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  # Alternate which side goes first.
  if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
  for side in $order; do
    flag=""; [ "$side" = off ] && flag="--no-collectors"
    # shellcheck disable=SC2086
    $TB run "$SPEC" --quiet --format json $flag ${RUN_ARGS:-} --out "$OUT/$side-$r" > "$OUT/$side-$r.json"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys, glob, os
out, rounds = sys.argv[1], int(sys.argv[2])
def medians(side, r):
    rows = json.load(open(os.path.join(out, f"{side}-{r}.json")))
    return {row["run_id"]: row["median_step_s"] for row in rows if row["median_step_s"]}
ratios = {}
for r in range(1, rounds + 1):
    on, off = medians("on", r), medians("off", r)
    for run in sorted(on.keys() & off.keys()):
        ratios.setdefault(run, []).append(on[run] / off[run])
        print(f"round {r} {run}: on {on[run]*1e3:.3f} ms  off {off[run]*1e3:.3f} ms  ratio {on[run]/off[run]:.4f}")
for run, rs in ratios.items():
    print(f"OVERHEAD run={run} rounds={len(rs)} median_ratio={statistics.median(rs):.4f} (step time on/off; 1.01 = 1% slower)")
PY
