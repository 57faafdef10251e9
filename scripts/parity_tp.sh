#!/usr/bin/env bash
# Tensor-parallel parity: the smoke GPT split over 2 CPU ranks as Megatron splits it (attention by heads, the SwiGLU
# MLP column- then row-parallel, a vocabulary-parallel embedding, head and loss), the same global batch, trained by
# PyTorch's own tensor-parallel API (torch.distributed.tensor.parallel on a device mesh over Gloo, started by
# torchrun, scripts/parity/tp.py) and by `trainbench run` with `tensor_parallel = 2` (ranks started through mpirun,
# collectives through Open MPI), one intra-op thread per rank on both sides, interleaved round by round. SP=true adds
# sequence parallelism on both sides. Prints each side's median step time (per step, the slowest rank) and the
# throughput ratio trainbench / PyTorch (median over rounds; > 1 = trainbench faster).
#
# Usage: scripts/parity_tp.sh
# Environment: ROUNDS (3), BATCH (global, 8), SP (false | true), WARMUP (5), ITERS (20);
#              TB=path/to/trainbench skips the release build (which needs feature mpi).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
ROUNDS=${ROUNDS:-3} BATCH=${BATCH:-8} SP=${SP:-false} WARMUP=${WARMUP:-5} ITERS=${ITERS:-20}
case $SP in true) sp_flag=--sp ;; false) sp_flag= ;; *) echo "SP must be true or false, not '$SP'" >&2; exit 2 ;; esac
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
          --set "topology.tensor_parallel=2" --set "topology.sequence_parallel=$SP")
ratios=()
for r in $(seq 1 "$ROUNDS"); do
  run_tb() {
    $TB run "$spec" --quiet --format json "${set_args[@]}" --out "$WORK/out-$r" > "$WORK/$r.json"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["median_step_s"])' "$WORK/$r.json"
  }
  run_pt() {
    (cd scripts/parity && "$VENV/bin/torchrun" --standalone --nproc_per_node 2 tp.py --batch "$BATCH" $sp_flag \
      --warmup "$WARMUP" --iters "$ITERS" --threads 1 2>/dev/null | grep '^RESULT')
  }
  if (( r % 2 )); then pt=$(run_pt); tbm=$(run_tb); else tbm=$(run_tb); pt=$(run_pt); fi
  pm=$(echo "$pt" | field median_s)
  ratio=$(python3 -c "print(f'{$pm / $tbm:.4f}')")
  ratios+=("$ratio")
  echo "round $r: pytorch ${pm}s trainbench ${tbm}s ratio $ratio"
done
echo "PARITY-TP model=smoke-gpt tensor_parallel=2 sequence_parallel=$SP batch=$BATCH rounds=$ROUNDS" \
  "ratios=${ratios[*]} median=$(median "${ratios[@]}") (trainbench/PyTorch throughput by median step time; > 1 =" \
  "trainbench faster)"
