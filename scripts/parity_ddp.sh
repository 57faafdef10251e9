#!/usr/bin/env bash
# Data-parallel parity: the same model, global batch and world size trained by PyTorch DDP over Gloo (started by
# torchrun, scripts/parity/ddp.py) and by `trainbench run` with `strategy = "all-reduce"` (ranks started through
# mpirun, gradients all-reduced through Open MPI, each bucket during the backward pass), one intra-op thread per
# rank on both sides, interleaved round by round. With STRATEGY=zero-3 trainbench shards with ZeRO-3 and PyTorch
# with FSDP2 (`fully_shard` over Gloo) instead. Prints each side's median step time (per step, the slowest rank)
# and the throughput ratio trainbench / PyTorch (median over rounds; > 1 = trainbench faster).
#
# Usage: scripts/parity_ddp.sh [MODEL...]   (default: transformer resnet18-cifar mlp-comm; also smoke-gpt, whose
#        layers ZeRO-3 and FSDP2 shard one by one, each recomputed in the backward pass on both sides)
# Environment: ROUNDS (3), BATCH (global, 32), BATCH_MLP (mlp-comm's global batch, 16), WORLD (2), WARMUP (10), ITERS (30),
#              STRATEGY (all-reduce | zero-3), OVERLAP (true | false: trainbench's topology.overlap);
#              TB=path/to/trainbench skips the release build (which needs feature mpi).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
ROUNDS=${ROUNDS:-3} BATCH_ALL=${BATCH:-32} BATCH_MLP=${BATCH_MLP:-16} WORLD=${WORLD:-2} WARMUP=${WARMUP:-10} ITERS=${ITERS:-30}
STRATEGY=${STRATEGY:-all-reduce} OVERLAP=${OVERLAP:-true}
case "$STRATEGY" in all-reduce) FSDP=() ;; zero-3) FSDP=(--fsdp) ;; *) echo "STRATEGY: all-reduce or zero-3" >&2; exit 2 ;; esac
MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(transformer resnet18-cifar mlp-comm)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch,mpi
  TB=${CARGO_TARGET_DIR:-target}/release/trainbench
fi
source scripts/parity/common.sh
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
for m in "${MODELS[@]}"; do
  spec=$(spec_of "$m")
  if [ "$m" = mlp-comm ]; then BATCH=$BATCH_MLP; else BATCH=$BATCH_ALL; fi
  set_args=(--set "sweep.batch_sizes=[$BATCH]" --set "run.warmup=$WARMUP" --set "run.iterations=$ITERS"
            --set "topology.devices_per_node=$WORLD" --set "topology.strategy=\"$STRATEGY\"" --set "run.cpu_threads=1")
  set_args+=(--set "topology.overlap=$OVERLAP")
  [ "$STRATEGY" = zero-3 ] && [ "$m" = smoke-gpt ] && set_args+=(--set 'training.activation_checkpointing="full"')
  ratios=()
  for r in $(seq 1 "$ROUNDS"); do
    run_tb() {
      $TB run "$spec" --quiet --format json "${set_args[@]}" --out "$WORK/out-$m-$r" > "$WORK/$m-$r.json"
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["median_step_s"])' "$WORK/$m-$r.json"
    }
    run_ddp() {
      (cd scripts/parity && "$VENV/bin/torchrun" --standalone --nproc_per_node "$WORLD" ddp.py "$m" --batch "$BATCH" \
        --warmup "$WARMUP" --iters "$ITERS" --threads 1 "${FSDP[@]}" 2>/dev/null | grep '^RESULT')
    }
    if (( r % 2 )); then ddp=$(run_ddp); tbm=$(run_tb); else tbm=$(run_tb); ddp=$(run_ddp); fi
    dm=$(echo "$ddp" | field median_s)
    ratio=$(python3 -c "print(f'{$dm / $tbm:.4f}')")
    ratios+=("$ratio")
    echo "round $r $m: pytorch ${dm}s trainbench ${tbm}s ratio $ratio"
  done
  echo "PARITY-DDP model=$m strategy=$STRATEGY overlap=$OVERLAP world=$WORLD batch=$BATCH rounds=$ROUNDS" \
    "ratios=${ratios[*]} median=$(median "${ratios[@]}") (trainbench/PyTorch throughput by median step time; > 1 =" \
    "trainbench faster)"
done
