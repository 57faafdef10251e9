#!/usr/bin/env bash
# The GPU check, one prepared script for when a GPU machine is lent (15 minutes of device time in all, start
# included): builds trainbench in release with the tch backend, then lists the devices, trains a TBD spec
# (ResNet-50) on CUDA in fp32 and fp16 at one small batch, and runs it at world size 1 with all-reduce, which goes
# through the NCCL engine (trainbench's own launcher, one rank, a real NCCL communicator). Every step has its own
# time limit; everything (logs, result JSONs, a summary with the figures) lands under $OUT.
#
#   scripts/gpu_check.sh               on a GPU machine ($OUT defaults to target/gpu-check)
#   scripts/gpu_check.sh --build-only  only the build (a device call runs at most 10 minutes: build in one call,
#                                      then run the rest in the next while the machine is warm; target/ stays)
#   scripts/gpu_check.sh --dry         here, without a GPU: the same steps on what this machine has (the TBD runs
#                                      on the CPU at batch 2, fp32 and bf16, a few iterations; the NCCL step must
#                                      be refused with exit 2), to check the script itself
#
# TRAINBENCH_BIN=path skips the build and uses that binary (it must have been built with `--features tch`).
# Needs: a Rust toolchain with the crates already fetched (the GPU machine reaches no network), and the PyTorch
# environment of scripts/env.sh (TRAINBENCH_VENV), which on a machine without network must already exist.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DRY=0
BUILD_ONLY=0
case "${1:-}" in
    --dry) DRY=1 ;;
    --build-only) BUILD_ONLY=1 ;;
    "") ;;
    *) echo "usage: $0 [--dry | --build-only]" >&2; exit 2 ;;
esac
OUT="${OUT:-$ROOT/target/gpu-check}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME LIMIT_S COMMAND...: run with a time limit, output in $OUT/NAME.log, one summary line.
step() {
    local name=$1 limit=$2
    shift 2
    local start rc ms
    start=$(date +%s%N)
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    say "$(printf '%-8s rc=%-3s %4d.%01d s  (limit %s s)' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) "$limit")"
    return "$rc"
}

say "gpu_check $(date -u +%FT%TZ) dry=$DRY commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
{
    echo "== nvidia-smi"; nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
    echo "== cpu"; nproc; grep -m1 'model name' /proc/cpuinfo
    echo "== cargo"; cargo --version 2>&1 || echo "(no cargo)"
} >"$OUT/machine.log" 2>&1

export TRAINBENCH_VENV="${TRAINBENCH_VENV:-/root/.cache/trainbench-ci/venv}"
if ! step env 300 bash -c "source scripts/env.sh && python -c 'import torch; print(torch.__version__, torch.cuda.is_available())'"; then
    say "the PyTorch environment is missing and could not be made (see env.log): nothing else can run"
    exit 1
fi
# shellcheck source=env.sh
source scripts/env.sh
set +e # env.sh turns on errexit; a failed step must not end the check

if [[ -n "${TRAINBENCH_BIN:-}" ]]; then
    BIN="$TRAINBENCH_BIN"
    say "using $BIN (no build)"
else
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
    touch backends/tch/shim/shim.cpp
    # The build prints whether the NCCL engine was compiled (a cargo warning names what is missing when not).
    step build 480 cargo build --release --locked --offline --features tch || {
        say "the release build failed (build.log): nothing else can run"
        exit 1
    }
    BIN="$CARGO_TARGET_DIR/release/trainbench"
fi
if [[ $BUILD_ONLY == 1 ]]; then
    tail -n 80 "$OUT/build.log" >"$OUT/logs.txt"
    rm -f "$OUT"/*.log
    say "built $BIN; done $(date -u +%FT%TZ)"
    exit 0
fi

step devices 60 "$BIN" devices

SPEC=specs/tbd/resnet50.toml
if [[ $DRY == 1 ]]; then
    # The CPU stands in: same spec, batch 2, a few iterations, bf16 for the half-precision run (fp16 is
    # CUDA-only).
    COMMON=(--set 'sweep.batch_sizes=[2]' --set 'topology.device="cpu"' --set run.warmup=1 --set run.iterations=3)
    HALF=bf16
else
    COMMON=(--set 'sweep.batch_sizes=[16]' --set run.warmup=20 --set run.iterations=100)
    HALF=fp16
fi
COMMON+=(--set run.repeats=1 --set run.timeout_s=150 --quiet)

step fp32 200 "$BIN" run "$SPEC" --out "$OUT/runs/fp32" "${COMMON[@]}"
step "$HALF" 200 "$BIN" run "$SPEC" --out "$OUT/runs/$HALF" "${COMMON[@]}" --set "training.precision=\"$HALF\""

# World size 1 through NCCL: all-reduce with one CUDA worker (a rank started by trainbench's own launcher).
NCCL=(--set 'topology.devices_per_node=1' --set 'topology.strategy="all-reduce"')
if [[ $DRY == 1 ]]; then
    # Here the CUDA spec must be refused before anything starts (exit 2, the reason named).
    step nccl 120 "$BIN" run "$SPEC" --out "$OUT/runs/nccl" --set 'sweep.batch_sizes=[16]' "${NCCL[@]}"
    rc=$?
    if [[ $rc == 2 ]] && grep -q "NCCL engine" "$OUT/nccl.log"; then
        say "nccl: refused as expected without a GPU: $(grep -m1 -o 'trains through the NCCL engine: [^;]*' "$OUT/nccl.log")"
    else
        say "nccl: expected exit 2 naming the NCCL engine, got $rc (nccl.log)"
    fi
else
    step nccl 240 "$BIN" run "$SPEC" --out "$OUT/runs/nccl" "${COMMON[@]}" "${NCCL[@]}"
fi

# Results and figures (at most 8 files come back from a device run): the summary with one line per run, each
# result JSON, and every step's log (its last 80 lines) in logs.txt.
python3 - "$OUT" <<'EOF' | tee -a "$SUMMARY"
import glob, json, os, shutil, sys
out = sys.argv[1]
for path in sorted(glob.glob(os.path.join(out, "runs", "*", "*", "*.json"))):
    try:
        r = json.load(open(path))
    except Exception:
        continue
    if not isinstance(r, dict) or "plan" not in r:
        continue
    step = os.path.basename(os.path.dirname(os.path.dirname(path)))
    shutil.copyfile(path, os.path.join(out, f"{step}-{os.path.basename(path)}"))
    m = r.get("metrics") or {}
    outcome = r.get("outcome")
    outcome = outcome if isinstance(outcome, str) else json.dumps(outcome)[:300]
    line = f"{r['plan']['id']} [{r['plan'].get('device')}]: {outcome}"
    if m:
        st, ph, mem = m.get("step_time", {}), m.get("phases", {}), m.get("memory", {}).get("measured", {})
        line += (f"; {m.get('throughput', {}).get('samples_per_s', 0):.1f} samples/s, median step "
                 f"{1e3 * st.get('median_s', 0):.2f} ms (p95 {1e3 * st.get('p95_s', 0):.2f}), "
                 f"FLOP/s {m.get('flops', {}).get('achieved_flop_per_s')}, peak alloc {mem.get('peak_allocated_bytes')}")
        comm = ph.get("comm") or {}
        if comm:
            line += f", comm phase {json.dumps(comm)[:120]}"
    d = r.get("distributed") or {}
    if d:
        line += (f"; engine {d.get('engine')} ({d.get('engine_version')}), launcher {d.get('launcher')}, "
                 f"hosts {d.get('hosts')}, gradient bytes {d.get('gradient_bytes')}, comm share {d.get('comm_share')}, "
                 f"algbw {d.get('algorithm_bandwidth_gb_s')} GB/s")
    print(line)
EOF
for f in "$OUT"/*.log; do
    echo "===== $(basename "$f") (last 80 lines)"
    tail -n 80 "$f"
done >"$OUT/logs.txt"
rm -rf "$OUT/runs" "$OUT"/*.log
say "done $(date -u +%FT%TZ)"
