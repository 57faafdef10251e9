#!/usr/bin/env bash
# Sharded data parallelism on this machine's CPU ranks: the smoke GPT (specs/llm/smoke_gpt.toml, full activation
# checkpointing for every run, so ZeRO-3 can replay its blocks and the runs compare alike) at one worker and at
# 2 and 4 workers for all-reduce, ZeRO-1, ZeRO-2 and ZeRO-3, each rank a process of its own through mpirun.
# Printed as a Markdown table, measured beside the performance model's prediction for the same run (recorded
# in each result, on the hardware profile HARDWARE): step time, tokens/s, comm share, bytes each worker sends
# per step, and what one worker held (weights / gradients / optimizer state, measured from its tensors).
# ZeRO-3 runs twice: with its prefetch (topology.overlap, the default) and without (rows "zero-3, no overlap").
#
# Usage: scripts/zero_table.sh
# The profile (HARDWARE, default: this machine calibrated first, into the work folder) gets the ranks' link
# unless it has one: its bandwidth is the bus bandwidth of an exchange of another model (specs/parity/mlp_comm.toml,
# 16.8 MB of gradients, all-reduce over 2 ranks, no overlap), measured first; latency 0 (below what a 16.8 MB
# exchange resolves). So the comm figures predicted for the smoke GPT are not fitted to its own runs.
#
# Environment: BATCH (global, 8), ITERS (12), HARDWARE (a profile), TB=path/to/trainbench skips the release build
#              (features tch, mpi).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
BATCH=${BATCH:-8} ITERS=${ITERS:-12}
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch,mpi
  TB=${CARGO_TARGET_DIR:-target}/release/trainbench
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
if [ -z "${HARDWARE:-}" ]; then
  HARDWARE=$WORK/this-machine.toml
  $TB calibrate --out "$HARDWARE" >/dev/null
fi
if ! grep -q '^\[intra_node\]' "$HARDWARE"; then
  cp "$HARDWARE" "$WORK/profile.toml"; HARDWARE=$WORK/profile.toml
  $TB run specs/parity/mlp_comm.toml --quiet --set 'topology.devices_per_node=2' --set 'topology.strategy="all-reduce"' \
    --set 'topology.overlap=false' --set 'run.repeats=1' --out "$WORK/link" >/dev/null
  bus=$(python3 -c 'import glob,json,sys; r=json.load(open(glob.glob(sys.argv[1]+"/*/*.r0.json")[0])); print(r["distributed"]["bus_bandwidth_gb_s"])' "$WORK/link")
  printf '\n[intra_node]\nkind = "shared-memory"\nname = "MPI shared memory (measured: mlp_comm all-reduce)"\nbandwidth_gbs = %s\nlatency_us = 0.0\n' "$bus" >> "$HARDWARE"
  echo "link: MPI shared memory, bus bandwidth $bus GB/s (mlp_comm all-reduce over 2 ranks)" >&2
fi
TOPOLOGIES='[{devices_per_node=1,strategy="single"}'
for w in 2 4; do
  for s in all-reduce zero-1 zero-2 zero-3; do TOPOLOGIES+=",{devices_per_node=$w,strategy=\"$s\"}"; done
done
TOPOLOGIES+=']'
$TB run specs/llm/smoke_gpt.toml --quiet --hardware "$HARDWARE" --set "sweep.batch_sizes=[$BATCH]" \
  --set "run.iterations=$ITERS" --set 'run.warmup=3' --set 'run.repeats=1' \
  --set 'training.activation_checkpointing="full"' --set "sweep.topologies=$TOPOLOGIES" --out "$WORK" >/dev/null || true
$TB run specs/llm/smoke_gpt.toml --quiet --hardware "$HARDWARE" --set "sweep.batch_sizes=[$BATCH]" \
  --set "run.iterations=$ITERS" --set 'run.warmup=3' --set 'run.repeats=1' --set 'topology.overlap=false' \
  --set 'training.activation_checkpointing="full"' --set 'topology.strategy="zero-3"' \
  --set 'sweep.topologies=[{devices_per_node=2},{devices_per_node=4}]' --out "$WORK/no-overlap" >/dev/null || true
python3 - "$WORK" <<'PY'
import glob, json, os, sys

def mib(b):
    return f"{b / 2**20:.1f}"

rows = []
for path in glob.glob(os.path.join(sys.argv[1], "*", "*.json")) + glob.glob(os.path.join(sys.argv[1], "no-overlap", "*", "*.json")):
    if path.endswith("index.json"):
        continue
    r = json.load(open(path))
    if r.get("outcome", {}).get("status") != "completed" or not r.get("metrics"):
        print(f"{os.path.basename(path)}: {r.get('outcome')}", file=sys.stderr)
        continue
    m, d = r["metrics"], r.get("distributed")
    p = (r.get("prediction") or {}).get("predicted") or r.get("prediction") or {}
    held = m["memory"]["measured"]
    held = (held["weights_bytes"], held["gradients_bytes"], held["optimizer_state_bytes"])
    if d and d["ranks"] and all(x.get("memory") for x in d["ranks"]):
        held = tuple(max(x["memory"][k] for x in d["ranks"]) for k in ("weights", "gradients", "optimizer_state"))
    rows.append({
        "w": r["plan"]["world_size"],
        "s": (d["strategy"] + (", no overlap" if d["strategy"] == "zero-3" and not d.get("overlapped") else "")) if d else "single",
        "step": m["step_time"]["median_s"], "tok": m["throughput"]["items_per_s"],
        "comm": (d or {}).get("comm_share"), "bytes": (d or {}).get("bytes_sent_per_step", 0),
        "p_step": p.get("step_time_s"), "p_tok": p.get("samples_per_s"),
        "p_comm": (p.get("shares") or {}).get("comm"), "p_bytes": p.get("comm_bytes_per_worker"),
        "items": m["throughput"]["items_per_sample"], "held": held,
    })
order = {"single": 0, "all-reduce": 1, "zero-1": 2, "zero-2": 3, "zero-3": 4, "zero-3, no overlap": 5}
print("| workers | strategy | step ms (pred) | tokens/s (pred) | comm share (pred) | bytes sent/step (pred) | held/worker MiB: weights / grads / optimizer |")
print("|---:|---|---:|---:|---:|---:|---|")
fmt = lambda v, f: "-" if v is None else f(v)
for x in sorted(rows, key=lambda x: (x["w"], order.get(x["s"], 9))):
    p_tok = None if x["p_tok"] is None else x["p_tok"] * x["items"]
    print(f"| {x['w']} | {x['s']} | {x['step']*1e3:.1f} ({fmt(x['p_step'], lambda v: f'{v*1e3:.1f}')}) "
          f"| {x['tok']:.0f} ({fmt(p_tok, lambda v: f'{v:.0f}')}) "
          f"| {fmt(x['comm'], lambda v: f'{v:.0%}')} ({fmt(x['p_comm'], lambda v: f'{v:.0%}')}) "
          f"| {mib(x['bytes'])} MiB ({fmt(x['p_bytes'], lambda v: mib(v) + ' MiB')}) "
          f"| {' / '.join(mib(b) for b in x['held'])} |")
PY
