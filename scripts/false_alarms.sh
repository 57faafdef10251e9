#!/usr/bin/env bash
# False-alarm rate of `trainbench compare`: runs PAIRS pairs of identical smoke runs (same spec, same machine, one
# after the other) and compares each pair. Any significant verdict (slower or faster) is a false alarm, since
# nothing changed between the two runs of a pair.
#
# Usage: scripts/false_alarms.sh [--pairs N] [--repeats R] [--backend tch|mock] [--threshold 5%] [--spec FILE]
# Defaults: 20 pairs, 1 repeat per run, the tch backend on the CPU, a small ResNet at 32x32 (written below).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

PAIRS=20 REPEATS=1 BACKEND=tch THRESHOLD=5% SPEC=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --pairs) PAIRS="$2"; shift 2 ;;
        --repeats) REPEATS="$2"; shift 2 ;;
        --backend) BACKEND="$2"; shift 2 ;;
        --threshold) THRESHOLD="$2"; shift 2 ;;
        --spec) SPEC="$2"; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

FEATURES=()
[[ "$BACKEND" == tch ]] && FEATURES=(--features tch)
cargo build --release --quiet "${FEATURES[@]}"
TB="${CARGO_TARGET_DIR:-$ROOT/target}/release/trainbench"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [[ -z "$SPEC" ]]; then
    SPEC="$WORK/false-alarms.toml"
    cat > "$SPEC" <<'TOML'
version = 1
name = "false-alarms"
description = "Small ResNet on 32x32 synthetic images: a smoke-scale CPU benchmark for measuring compare's noise."

[model]
family = "resnet"
depth = 18
width = 16
classes = 10
image_size = 32

[sweep]
batch_sizes = [32]

[topology]
device = "cpu"

[run]
warmup = 5
iterations = 40
TOML
fi

declare -i slower=0 faster=0 unchanged=0 other=0
changes=()
for i in $(seq 1 "$PAIRS"); do
    for side in a b; do
        "$TB" run "$SPEC" --backend "$BACKEND" --quiet --out "$WORK/$i/$side" \
            --set "run.repeats=$REPEATS" --set "training.seed=$((1000 + i))" > /dev/null
    done
    set +e
    "$TB" compare "$WORK/$i/a" "$WORK/$i/b" --threshold "$THRESHOLD" --format json > "$WORK/$i/compare.json"
    set -e
    read -r verdict change < <(python3 - "$WORK/$i/compare.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
p = c["pairs"][0]
r = p["step_time"]["ratio"] if p.get("step_time") else float("nan")
print(p["verdict"], f"{(r - 1) * 100:+.2f}")
PY
)
    changes+=("$change")
    case "$verdict" in
        slower) slower+=1 ;;
        faster) faster+=1 ;;
        no_change) unchanged+=1 ;;
        *) other+=1 ;;
    esac
    printf 'pair %2d: %-10s median step time change %s%%\n' "$i" "$verdict" "$change"
done

abs_sorted="$(printf '%s\n' "${changes[@]}" | tr -d '+-' | sort -g)"
echo "backend $BACKEND, $PAIRS pairs, $REPEATS repeat(s) per run, threshold $THRESHOLD"
echo "false alarms: $((slower + faster)) of $PAIRS ($slower flagged slower = CI failures, $faster flagged faster); $unchanged no change; $other other"
echo "|median step-time change| between identical runs: median $(echo "$abs_sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')%, max $(echo "$abs_sorted" | tail -1)%"
