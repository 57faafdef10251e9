#!/usr/bin/env bash
# Pipeline parity: the smoke GPT cut into 2 stages where trainbench cuts it (3 blocks and the embedding, then 1 block,
# the norm and the head), the same global batch and micro-batches, trained by torch.distributed.pipelining over Gloo
# (started by torchrun, scripts/parity/pp.py) and by `trainbench run` with `pipeline_parallel = 2` (ranks started
# through mpirun, activations and gradients sent through Open MPI), one intra-op thread per rank on both sides,
# interleaved round by round. Prints each side's median step time (per step, the slowest rank) and the throughput
# ratio trainbench / PyTorch (median over rounds; > 1 = trainbench faster).
#
# Usage: scripts/parity_pp.sh
# Environment: ROUNDS (3), BATCH (global, 8), MICRO (micro-batches, 4), SCHEDULE (1f1b | gpipe), WARMUP (5),
#              ITERS (20); TB=path/to/trainbench skips the release build (which needs feature mpi).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
ROUNDS=${ROUNDS:-3} BATCH=${BATCH:-8} MICRO=${MICRO:-4} SCHEDULE=${SCHEDULE:-1f1b} WARMUP=${WARMUP:-5} ITERS=${ITERS:-20}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch,mpi
  TB=${CARGO_TARGET_DIR:-target}/release/trainbench
fi
source scripts/parity/common.sh
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
spec=specs/llm/smoke_gpt.toml
set_args=(--set "sweep.batch_sizes=[$BATCH]" --set "run.warmup=$WARMUP" --set "run.iterations=$ITERS"
          --set "topology.devices_per_node=2" --set 'topology.strategy="all-reduce"' --set "run.cpu_threads=1"
          --set "topology.pipeline_parallel=2" --set "topology.pipeline_schedule=\"$SCHEDULE\""
          --set "topology.microbatches=$MICRO")
ratios=()
for r in $(seq 1 "$ROUNDS"); do
  run_tb() {
    $TB run "$spec" --quiet --format json "${set_args[@]}" --out "$WORK/out-$r" > "$WORK/$r.json"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["median_step_s"])' "$WORK/$r.json"
  }
  run_pt() {
    (cd scripts/parity && "$VENV/bin/torchrun" --standalone --nproc_per_node 2 pp.py --batch "$BATCH" \
      --microbatches "$MICRO" --schedule "$SCHEDULE" --warmup "$WARMUP" --iters "$ITERS" --threads 1 2>/dev/null \
      | grep '^RESULT')
  }
  if (( r % 2 )); then pt=$(run_pt); tbm=$(run_tb); else tbm=$(run_tb); pt=$(run_pt); fi
  pm=$(echo "$pt" | field median_s)
  ratio=$(python3 -c "print(f'{$pm / $tbm:.4f}')")
  ratios+=("$ratio")
  echo "round $r: pytorch ${pm}s trainbench ${tbm}s ratio $ratio"
done
echo "PARITY-PP model=smoke-gpt schedule=$SCHEDULE stages=2 microbatches=$MICRO batch=$BATCH rounds=$ROUNDS" \
  "ratios=${ratios[*]} median=$(median "${ratios[@]}") (trainbench/PyTorch throughput by median step time; > 1 =" \
  "trainbench faster)"
