#!/usr/bin/env bash
# Tensor, sequence and pipeline parallelism and their compositions on this machine's CPU ranks, measured beside the
# performance model: the smoke GPT (specs/llm/smoke_gpt.toml) at one rank and at world sizes 2 and 4 in each layout
# (TP2, TP2 + SP, TP4, PP2 with GPipe, 1F1B and interleaved 1F1B, PP4, DP2 x TP2, DP2 x PP2, TP2 x PP2, ZeRO-3 x TP2),
# each rank a process of its own through mpirun, the same global batch everywhere. For each run, one `trainbench run`
# and one `trainbench predict` with the same overrides on the hardware profile HARDWARE. Printed as a Markdown table:
# step time, tokens/s, the bubble (measured idle share per stage; the run's cut replayed with each pass as long as
# its FLOPs; the prediction's replay over its priced passes and hops; the formula), bytes each rank sends per step
# per mesh dimension (tensor / pipeline / data), and the most any rank held (weights + gradients + optimizer state,
# measured from its tensors; the prediction's busiest stage beside it). A layout the runtime refuses prints its
# reason in the row.
#
# Usage: scripts/layout_table.sh
# The profile (HARDWARE, default: this machine calibrated first, into the work folder; CALIBRATE_ARGS passes
# e.g. --allow-loaded to calibrate) gets the ranks' link measured as scripts/zero_table.sh measures it unless it
# has one. Environment: BATCH (global, 8), MICRO (micro-batches, 4), ITERS (12), WARMUP (3), TB=path/to/trainbench skips the
# release build (features tch, mpi).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
BATCH=${BATCH:-8} MICRO=${MICRO:-4} ITERS=${ITERS:-12} WARMUP=${WARMUP:-3}
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch,mpi
  TB=${CARGO_TARGET_DIR:-target}/release/trainbench
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
if [ -z "${HARDWARE:-}" ]; then
  HARDWARE=$WORK/this-machine.toml
  # shellcheck disable=SC2086
  $TB calibrate --out "$HARDWARE" ${CALIBRATE_ARGS:-} >/dev/null
fi
if ! grep -q '^\[intra_node\]' "$HARDWARE"; then
  cp "$HARDWARE" "$WORK/profile.toml"; HARDWARE=$WORK/profile.toml
  $TB run specs/parity/mlp_comm.toml --quiet --set 'topology.devices_per_node=2' --set 'topology.strategy="all-reduce"' \
    --set 'topology.overlap=false' --set 'run.repeats=1' --out "$WORK/link" >/dev/null
  bus=$(python3 -c 'import glob,json,sys; r=json.load(open(glob.glob(sys.argv[1]+"/*/*.r0.json")[0])); print(r["distributed"]["bus_bandwidth_gb_s"])' "$WORK/link")
  printf '\n[intra_node]\nkind = "shared-memory"\nname = "MPI shared memory (measured: mlp_comm all-reduce)"\nbandwidth_gbs = %s\nlatency_us = 0.0\n' "$bus" >> "$HARDWARE"
  echo "link: MPI shared memory, bus bandwidth $bus GB/s (mlp_comm all-reduce over 2 ranks)" >&2
fi
# name | world | strategy | overrides (space-separated key=value, each passed as --set)
LAYOUTS=(
  "one rank|1|single|"
  "TP2|2|all-reduce|topology.tensor_parallel=2"
  "TP2 + SP|2|all-reduce|topology.tensor_parallel=2 topology.sequence_parallel=true"
  "TP4|4|all-reduce|topology.tensor_parallel=4"
  "PP2 GPipe|2|all-reduce|topology.pipeline_parallel=2 topology.pipeline_schedule=\"gpipe\" topology.microbatches=$MICRO"
  "PP2 1F1B|2|all-reduce|topology.pipeline_parallel=2 topology.pipeline_schedule=\"1f1b\" topology.microbatches=$MICRO"
  "PP2 interleaved 1F1B (v2)|2|all-reduce|topology.pipeline_parallel=2 topology.pipeline_schedule=\"interleaved-1f1b\" topology.virtual_stages=2 topology.microbatches=$MICRO"
  "PP4 1F1B|4|all-reduce|topology.pipeline_parallel=4 topology.pipeline_schedule=\"1f1b\" topology.microbatches=$MICRO"
  "DP2 x TP2|4|all-reduce|topology.tensor_parallel=2"
  "DP2 x PP2 1F1B|4|all-reduce|topology.pipeline_parallel=2 topology.microbatches=$MICRO"
  "TP2 x PP2 1F1B|4|all-reduce|topology.tensor_parallel=2 topology.pipeline_parallel=2 topology.microbatches=$MICRO"
  "ZeRO-3 x TP2 (DP2)|4|zero-3|topology.tensor_parallel=2 training.activation_checkpointing=\"full\""
)
i=0
for layout in "${LAYOUTS[@]}"; do
  IFS='|' read -r name world strategy overrides <<<"$layout"
  i=$((i + 1))
  args=(--set "sweep.batch_sizes=[$BATCH]" --set "topology.devices_per_node=$world" --set "topology.strategy=\"$strategy\""
        --set "run.cpu_threads=1")
  [ "$strategy" = single ] || args+=(--set 'topology.overlap=false')
  for o in $overrides; do args+=(--set "$o"); done
  mkdir -p "$WORK/$i"
  echo "$name" > "$WORK/$i/name"
  $TB run specs/llm/smoke_gpt.toml --quiet --hardware "$HARDWARE" "${args[@]}" --set "run.iterations=$ITERS" \
    --set "run.warmup=$WARMUP" --set 'run.repeats=1' --out "$WORK/$i/run" >/dev/null 2>"$WORK/$i/run.err" || true
  $TB predict specs/llm/smoke_gpt.toml --hardware "$HARDWARE" --format json "${args[@]}" >"$WORK/$i/predict.json" \
    2>"$WORK/$i/predict.err" || true
  echo "measured: $name" >&2
done
python3 - "$WORK" "$i" <<'PY'
import glob, json, os, sys

work, count = sys.argv[1], int(sys.argv[2])
mib = lambda b: "" if b is None else f"{b / 2**20:.1f}"


def first_line(path):
    lines = [l.strip() for l in open(path) if l.strip() and not l.startswith("warning")]
    return lines[0].replace("|", "/")[:140] if lines else "no result"


print("| layout | world | step ms (pred) | tokens/s (pred) | bubble (cut replayed / pred / formula) | bytes/rank/step MiB tensor / pipeline / data (pred) | weights + grads + optimizer, most on a rank, MiB (pred) |")
print("|---|---:|---:|---:|---|---|---:|")
for i in range(1, count + 1):
    d = os.path.join(work, str(i))
    name = open(os.path.join(d, "name")).read().strip()
    results = [p for p in glob.glob(os.path.join(d, "run", "*", "*.json")) if not p.endswith("index.json")]
    r = json.load(open(results[0])) if results else None
    if not r or r.get("outcome", {}).get("status") != "completed" or not r.get("metrics"):
        why = first_line(os.path.join(d, "run.err")) if not r else json.dumps(r.get("outcome"))[:140]
        print(f"| {name} | | refused or failed: {why} | | | | |")
        continue
    m, dist = r["metrics"], r.get("distributed") or {}
    world = r["plan"]["world_size"]
    items = m["throughput"]["items_per_sample"]
    try:
        e = json.load(open(os.path.join(d, "predict.json")))["predictions"][0]
    except (OSError, ValueError, KeyError, IndexError):
        e = {}
    pm = e.get("mesh") or {}
    p_step = pm.get("step_time_s", e.get("step_time_s"))
    p_tok = (pm.get("items_per_s") if pm else None) or ((e.get("samples_per_s") or 0) * items or None)
    # Bytes per dimension, measured (mesh_bytes rows; a pipeline's sends; a flat data-parallel run's exchange).
    meas = {"tensor": 0, "pipeline": 0, "data": 0}
    for row in dist.get("mesh_bytes") or []:
        meas[row["dimension"]] = meas.get(row["dimension"], 0) + row["bytes_per_rank"]
    pipe = dist.get("pipeline")
    if pipe:
        meas["pipeline"] = max(meas["pipeline"], pipe.get("bytes_per_step", 0))
    if not dist.get("mesh_bytes") and world > 1 and not pipe:
        meas["data"] = dist.get("bytes_sent_per_step", 0)
    pred = {"tensor": 0.0, "pipeline": 0.0, "data": 0.0}
    for row in pm.get("bytes") or []:
        pred[row["dimension"]] = pred.get(row["dimension"], 0.0) + row["bytes_per_rank"]
    if not pm and world > 1:
        pred["data"] = e.get("comm_bytes_per_worker") or 0.0
    bytes_cell = " / ".join(f"{mib(meas[k])} ({mib(pred[k])})" for k in ("tensor", "pipeline", "data"))
    fmt = lambda x: "-" if x is None else f"{x:.3f}"
    p_bubble = (pm.get("bubble") or {}).get("fraction")
    bubble = (f"{fmt(pipe.get('bubble'))} ({fmt(pipe.get('bubble_replayed'))} / {fmt(p_bubble)} / "
              f"{fmt(pipe.get('bubble_formula'))})" if pipe else "")
    held = [x["memory"] for x in dist.get("ranks") or [] if x.get("memory")]
    if held:
        most = max(h["weights"] + h["gradients"] + h["optimizer_state"] for h in held)
    else:
        mm = m["memory"]["measured"]
        most = mm["weights_bytes"] + mm["gradients_bytes"] + mm["optimizer_state_bytes"]
    stages = pm.get("stages") or []
    p_held = max((st["weights_bytes"] + st["gradients_bytes"] + st["optimizer_bytes"] for st in stages), default=None)
    step = m["step_time"]["median_s"]
    print(f"| {name} | {world} | {step * 1e3:.1f} ({(p_step or 0) * 1e3:.1f}) | {m['throughput']['items_per_s']:,.0f}"
          f" ({(p_tok or 0):,.0f}) | {bubble} | {bytes_cell} | {mib(most)} ({mib(p_held)}) |")
PY
