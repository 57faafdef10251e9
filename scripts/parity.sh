#!/usr/bin/env bash
# Parity benchmark: the same model, batch and optimizer trained by PyTorch eager (scripts/parity/pytorch_eager.py)
# and by trainbench's tch backend (backends/tch/examples/parity.rs), interleaved round by round with the same
# thread count; prints each side's median step time and the throughput ratio trainbench / PyTorch.
#
# Usage: scripts/parity.sh [MODEL...]   (default: resnet18-cifar transformer)
# Environment: ROUNDS (3), BATCH (32), WARMUP (10), ITERS (30), THREADS (2); TRAINBENCH_VENV as for env.sh.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
ROUNDS=${ROUNDS:-3} BATCH=${BATCH:-32} WARMUP=${WARMUP:-10} ITERS=${ITERS:-30} THREADS=${THREADS:-2}
MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(resnet18-cifar transformer)
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
cargo build -q --release -p trainbench-tch --example parity
TB=target/release/examples/parity
PY="$VENV/bin/python scripts/parity/pytorch_eager.py"
ARGS="--batch $BATCH --warmup $WARMUP --iters $ITERS --threads $THREADS"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
MANIFESTS=$(mktemp -d); trap 'rm -rf "$MANIFESTS"' EXIT
for m in "${MODELS[@]}"; do
  ratios=()
  # Same weights and data on both sides: the PyTorch model is initialised from trainbench's manifest.
  $TB "$m" --batch "$BATCH" --warmup 0 --iters 1 --threads "$THREADS" --manifest "$MANIFESTS/$m.json" >/dev/null
  for r in $(seq 1 "$ROUNDS"); do
    py=$($PY "$m" $ARGS --init-from "$MANIFESTS/$m.json" | grep '^RESULT'); tb=$($TB "$m" $ARGS | grep '^RESULT')
    echo "$py"; echo "$tb"
    pym=$(echo "$py" | field median_s); tbm=$(echo "$tb" | field median_s)
    ratios+=("$(python3 -c "print(f'{$pym / $tbm:.4f}')")")
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "PARITY model=$m batch=$BATCH threads=$THREADS rounds=$ROUNDS ratios=${ratios[*]} median_ratio=$med (trainbench/pytorch throughput)"
done
