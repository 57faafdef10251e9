#!/usr/bin/env bash
# Parity benchmark: the same model, batch and optimizer trained by PyTorch eager (scripts/parity/pytorch_eager.py)
# and by `trainbench run` on a spec of specs/parity/ (tch backend, CPU, all collectors on, as a user runs it),
# interleaved round by round with the same thread count. Prints each side's median step time per round and, per
# model, the throughput ratio trainbench / PyTorch (median over rounds; > 1 = trainbench faster).
#
# Before timing, it checks that both sides build the same model (parameter counts from `trainbench analyze`
# and from PyTorch). `CHECK_LOSSES=1` also trains both from the very same weights and batches with dropout off
# (crates/trainbench-backend-tch/examples/parity.rs writes the manifest scripts/parity/seeded.py reads) and prints both loss
# curves, which agree to every printed digit.
#
# Usage: scripts/parity.sh [MODEL...]   (resnet18-cifar, transformer, smoke-gpt, smoke-moe; default: resnet18-cifar
#        transformer)
# Environment: ROUNDS (5), BATCH (32), WARMUP (10), ITERS (30), THREADS (2); TRAINBENCH_VENV as for env.sh;
#              TB=path/to/trainbench skips the release build.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
ROUNDS=${ROUNDS:-5} BATCH=${BATCH:-32} WARMUP=${WARMUP:-10} ITERS=${ITERS:-30} THREADS=${THREADS:-2}
MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(resnet18-cifar transformer)
# Both sides take their intra-op thread count from here (libtorch reads OMP_NUM_THREADS at start-up).
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
# The same fixed glibc malloc policy on both sides. By default glibc adapts its mmap and trim thresholds to
# the process's allocation history (the largest block freed so far), which differs between the two programs
# and moves step times by a few percent either way through page faults. PARITY_MALLOC=default leaves glibc's
# adaptive policy on.
if [ "${PARITY_MALLOC:-fixed}" != default ]; then
  export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456
fi
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch
  TB=target/release/trainbench
fi
PY="$VENV/bin/python scripts/parity/pytorch_eager.py"
PYARGS="--batch $BATCH --warmup $WARMUP --iters $ITERS --threads $THREADS"
source scripts/parity/common.sh
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
for m in "${MODELS[@]}"; do
  spec=$(spec_of "$m")
  set_args=(--set "sweep.batch_sizes=[$BATCH]" --set "run.warmup=$WARMUP" --set "run.iterations=$ITERS")
  tb_params=$($TB analyze "$spec" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["parameters"])')
  py_params=$($PY "$m" --batch 2 --warmup 0 --iters 1 --threads "$THREADS" | field params)
  if [ "$tb_params" != "$py_params" ]; then
    echo "parity: $m builds different models: trainbench $tb_params parameters, PyTorch $py_params" >&2; exit 1
  fi
  if [ "${CHECK_LOSSES:-0}" = 1 ]; then
    cargo build -q --release -p trainbench-backend-tch --example parity
    EX=target/release/examples/parity
    $EX "$m" --batch "$BATCH" --warmup 0 --iters 1 --threads "$THREADS" --dropout 0 --manifest "$WORK/$m.json" >/dev/null
    $EX "$m" $PYARGS --dropout 0 | grep '^RESULT'
    $PY "$m" $PYARGS --dropout 0 --init-from "$WORK/$m.json" | grep '^RESULT'
  fi
  ratios=()
  for r in $(seq 1 "$ROUNDS"); do
    run_tb() {
      $TB run "$spec" --quiet --format json "${set_args[@]}" --out "$WORK/out-$m-$r" > "$WORK/$m-$r.json"
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["median_step_s"])' "$WORK/$m-$r.json"
    }
    # Alternate which side goes first, so that neither always follows the other.
    if (( r % 2 )); then
      py=$($PY "$m" $PYARGS | grep '^RESULT'); tbm=$(run_tb)
    else
      tbm=$(run_tb); py=$($PY "$m" $PYARGS | grep '^RESULT')
    fi
    pym=$(echo "$py" | field median_s)
    ratio=$(python3 -c "print(f'{$pym / $tbm:.4f}')")
    ratios+=("$ratio")
    echo "round $r $m: pytorch ${pym}s trainbench ${tbm}s ratio $ratio"
  done
  echo "PARITY model=$m params=$tb_params batch=$BATCH threads=$THREADS rounds=$ROUNDS ratios=${ratios[*]}" \
    "median=$(median "${ratios[@]}") (trainbench/pytorch throughput by median step time; > 1 = trainbench faster)"
done
