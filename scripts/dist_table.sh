#!/usr/bin/env bash
# Data-parallel runs on this machine's CPU ranks: the smoke MLP and Transformer at one worker, all-reduce over 2
# and 4 ranks, and 2 workers + 1 parameter server (each rank a process of its own through mpirun), printed as a
# Markdown table: median step time (per step, the slowest worker), samples/s, scaling efficiency against one
# worker, comm share, bytes each worker sends per step, and the algorithm bandwidth.
#
# Usage: scripts/dist_table.sh [SPEC...]   (default: scripts/dist_table/mlp_data_parallel.toml specs/smoke/transformer_tiny.toml)
# Environment: BATCH (global, 32), ITERS (40); TB=path/to/trainbench skips the release build (feature mpi).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
BATCH=${BATCH:-32} ITERS=${ITERS:-40}
SPECS=("$@"); [ ${#SPECS[@]} -eq 0 ] && SPECS=(scripts/dist_table/mlp_data_parallel.toml specs/smoke/transformer_tiny.toml)
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch,mpi
  TB=${CARGO_TARGET_DIR:-target}/release/trainbench
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
TOPOLOGIES='[{devices_per_node=1,strategy="single"},{devices_per_node=2,strategy="all-reduce"},{devices_per_node=4,strategy="all-reduce"},{devices_per_node=2,strategy="parameter-server",parameter_servers=1}]'
echo "| spec | workers | strategy | step (ms) | samples/s | efficiency | comm share | bytes sent / step | algbw (GB/s) |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
for spec in "${SPECS[@]}"; do
  $TB run "$spec" --quiet --backend tch --set "sweep.batch_sizes=[$BATCH]" --set "run.iterations=$ITERS" \
    --set 'run.repeats=1' --set "sweep.topologies=$TOPOLOGIES" --out "$WORK" >/dev/null || true
  python3 - "$WORK" "$spec" <<'PY'
import glob, json, os, sys
work, spec = sys.argv[1], sys.argv[2]
rows = []
for path in sorted(glob.glob(os.path.join(work, "*", "*.json"))):
    if path.endswith("index.json"):
        continue
    r = json.load(open(path))
    if r.get("outcome", {}).get("status") != "completed" or not r.get("metrics"):
        continue
    m, d = r["metrics"], r.get("distributed")
    rows.append((r["plan"]["world_size"], d["strategy"] if d else "single", m["step_time"]["median_s"],
                 m["throughput"]["samples_per_s"], d))
    os.remove(path)
one = next((x[3] for x in rows if x[0] == 1 and x[1] == "single"), None)
name = os.path.basename(spec).removesuffix(".toml")
for w, s, step, sps, d in sorted(rows, key=lambda x: (x[1] != "single", x[0], x[1])):
    eff = f"{sps / (w * one):.2f}" if one and s != "single" else "-"
    share = f"{d['comm_share']:.0%}" if d and d.get("comm_share") is not None else "-"
    sent = f"{d['bytes_sent_per_step'] / 1e6:.2f} MB" if d else "-"
    bw = f"{d['algorithm_bandwidth_gb_s']:.2f}" if d and d.get("algorithm_bandwidth_gb_s") else "-"
    print(f"| {name} | {w} | {s} | {step * 1e3:.2f} | {sps:.0f} | {eff} | {share} | {sent} | {bw} |")
PY
done
