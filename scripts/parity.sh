#!/usr/bin/env bash
# Parity benchmark: the same model, batch and optimizer trained by PyTorch eager (scripts/parity/pytorch_eager.py)
# and by trainbench's tch backend (backends/tch/examples/parity.rs), interleaved round by round with the same
# thread count, from the same initial weights and data; prints each side's result lines and, per model, the
# throughput ratio trainbench / PyTorch by wall-clock median step time and by process CPU seconds per step
# (the latter is what to trust on a machine shared with other work, at THREADS=1).
#
# Usage: scripts/parity.sh [MODEL...]   (default: resnet18-cifar transformer)
# Environment: ROUNDS (3), BATCH (32), WARMUP (10), ITERS (30), THREADS (2); TRAINBENCH_VENV as for env.sh.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
ROUNDS=${ROUNDS:-3} BATCH=${BATCH:-32} WARMUP=${WARMUP:-10} ITERS=${ITERS:-30} THREADS=${THREADS:-2}
MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(resnet18-cifar transformer)
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
# The same fixed glibc malloc policy on both sides. By default glibc adapts its mmap and trim thresholds to
# the process's allocation history (the largest block freed so far), which differs between the two programs
# (NumPy temporaries on one side, weight buffers on the other) and moves step times by a few percent either
# way through page faults. Fixed thresholds take that history out of the comparison. PARITY_MALLOC=default
# leaves glibc's adaptive policy on.
if [ "${PARITY_MALLOC:-fixed}" != default ]; then
  export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456
fi
cargo build -q --release -p trainbench-tch --example parity
TB=target/release/examples/parity
PY="$VENV/bin/python scripts/parity/pytorch_eager.py"
ARGS="--batch $BATCH --warmup $WARMUP --iters $ITERS --threads $THREADS"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
MANIFESTS=$(mktemp -d); trap 'rm -rf "$MANIFESTS"' EXIT
for m in "${MODELS[@]}"; do
  ratios=(); cpu_ratios=()
  # Same weights and data on both sides: the PyTorch model is initialised from trainbench's manifest.
  $TB "$m" --batch "$BATCH" --warmup 0 --iters 1 --threads "$THREADS" --manifest "$MANIFESTS/$m.json" >/dev/null
  for r in $(seq 1 "$ROUNDS"); do
    # Alternate which side goes first, so that neither always follows the other.
    if (( r % 2 )); then
      py=$($PY "$m" $ARGS --init-from "$MANIFESTS/$m.json" | grep '^RESULT'); tb=$($TB "$m" $ARGS | grep '^RESULT')
    else
      tb=$($TB "$m" $ARGS | grep '^RESULT'); py=$($PY "$m" $ARGS --init-from "$MANIFESTS/$m.json" | grep '^RESULT')
    fi
    echo "$py"; echo "$tb"
    pym=$(echo "$py" | field median_s); tbm=$(echo "$tb" | field median_s)
    ratios+=("$(python3 -c "print(f'{$pym / $tbm:.4f}')")")
    pyc=$(echo "$py" | field cpu_s_per_step); tbc=$(echo "$tb" | field cpu_s_per_step)
    cpu_ratios+=("$(python3 -c "print(f'{$pyc / $tbc:.4f}')")")
  done
  median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.4f", m}'; }
  echo "PARITY model=$m batch=$BATCH threads=$THREADS rounds=$ROUNDS wall_ratios=${ratios[*]}" \
    "wall_median=$(median "${ratios[@]}") cpu_ratios=${cpu_ratios[*]} cpu_median=$(median "${cpu_ratios[@]}")" \
    "(trainbench/pytorch throughput; > 1 = trainbench faster)"
done
