#!/usr/bin/env bash
# The GPU check, one prepared script for when a GPU machine is lent (a device call runs at most 10 minutes;
# the steps below are time-boxed to fit in one after the build): builds trainbench in release with the tch
# backend, then on CUDA device 0:
#   devices  `trainbench devices` (name, PCI bus id, driver's CUDA version)
#   calibrate  `trainbench calibrate` of device 0 from its micro-benchmarks alone (one round, kept even when the
#            host's load check marks it loaded, and then marked): $OUT/calibrated.toml. Every run below is then
#            started with `--hardware` on it, so each result records the model's prediction of its own step; the
#            summary sets each against the measured step, and against the published profile of the same GPU
#            (validation/profiles/<gpu>-published.toml, when there is one), and gives the median |error| and the
#            80%-interval coverage over the runs (the held-out rule: the profile is fitted on micro-benchmarks,
#            judged on whole runs)
#   resnet   the TBD ResNet-50 at batch 32 and 128 in fp32 (PyTorch's TF32 defaults: cuDNN on), fp16 and bf16
#   tf32     the same at batch 128 in fp32 with TF32 off everywhere, and on everywhere
#   bert     BERT-base (AdamW, the fused Adam kernel) at batch 32 in fp32 and fp16
#   gpt      the smoke GPT in fp32 and bf16, once a spec for it exists (specs/*/gpt*.toml; skipped until then)
#   heldout  the GPU held-out set (validation/gpu_heldout.tsv, declared before any of it ran on a GPU): each
#            configuration at its precision and batch, predicted on the calibrated profile, a few steps each
#   oom      ResNet-50 at batch 4096: must be recorded out_of_memory, not failed (its log shows the run's
#            progress and the device's memory every 5 s, to tell a slow start from a hang)
#   nccl     ResNet-50 at world size 1 with all-reduce through the NCCL engine
#   zero     the smoke GPT (specs/llm/smoke_gpt.toml, every layer recomputed) at world size 1 with ZeRO-3 through
#            the NCCL engine: its reduce-scatter and all-gather, each layer gathered ahead on the communication
#            thread, and the allocator's peak per rank
#   mesh     with two GPUs or more: the smoke GPT at tensor_parallel 2 and the smoke MoE at expert_parallel 2,
#            each through NCCL groups split from the world's (skipped, and said so, with one GPU: NCCL runs one
#            rank per GPU)
#   parity   PyTorch eager on the same GPU (scripts/parity/cuda_eager.py) at batch 128, fp32 and fp16, against
#            the resnet step's results: per-step median, free-running samples/s, allocator peak
# (--quick: devices, calibrate with a smaller grid, ResNet-50 b128 fp32 and fp16, TF32 on, BERT fp16, gpt in
# bf16, oom, nccl, zero, parity fp32, with fewer steps.)
# Every step has its own time limit; everything lands under $OUT: summary.txt (one line of figures per run:
# throughput per step and free-running, device-time phases, TF32 switches and the peak used, memory breakdown
# against the allocator peak and the analysis's estimate, NVML figures and the device they were mapped to,
# outcome), results.jsonl (every result), parity lines, and logs.txt (the tail of every step's log).
#
#   scripts/gpu_check.sh                  on a GPU machine ($OUT defaults to target/gpu-check)
#   scripts/gpu_check.sh --build-only     only the build (build in one device call, run in the next while the
#                                         machine is warm; target/ stays)
#   scripts/gpu_check.sh --steps a,b      only these steps (names above), e.g. to split the check over two calls
#   scripts/gpu_check.sh --dry            here, without a GPU: the same steps on the CPU (batch 2, a few
#                                         iterations, fp32 and bf16; the TF32 and NCCL runs must be refused with
#                                         exit 2, the OOM probe must be recorded out_of_memory; the calibration of
#                                         the CPU, its GEMMs up to 256; parity on the CPU at batch 2), to check the
#                                         script itself
#   scripts/gpu_check.sh --bundle DIR     from a bundle of scripts/gpu_bundle.sh (no Rust, no build, nothing
#                                         installed): the engine runs through DIR/run.sh on the machine's own
#                                         PyTorch, and the PyTorch side (parity, summary) runs with the machine's
#                                         python3 (TRAINBENCH_PYTHON picks another); with --dry, the CPU rehearsal
#   scripts/gpu_check.sh --quick          fewer configurations and steps, about 6 minutes (a second device call)
#
# The steps after the build share one deadline (GPU_CHECK_BUDGET_S seconds: 560 by default, 360 with --quick,
# 1800 with --dry), so the check fits in one 10-minute device call; a step that would pass it is cut short or
# skipped, and the summary says so.
# TRAINBENCH_BIN=path skips the build and uses that binary (built with `--features tch`; its libtorch is found
# through the absolute path of the environment it was built in, which this script checks first).
# Needs, without --bundle: a Rust toolchain with the crates already fetched (the GPU machine reaches no network),
# and the PyTorch environment of scripts/env.sh (TRAINBENCH_VENV), which on a machine without network must
# already exist. With --bundle: the PyTorch build the bundle was made for, importable by python3.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DRY=0
BUILD_ONLY=0
QUICK=0
BUNDLE=
STEPS=devices,calibrate,resnet,tf32,bert,gpt,heldout,oom,nccl,zero,mesh,parity
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry) DRY=1 ;;
        --build-only) BUILD_ONLY=1 ;;
        --quick) QUICK=1 ;;
        --bundle) BUNDLE=$(cd "$2" && pwd) || exit 2; shift ;;
        --steps) STEPS=$2; shift ;;
        *) echo "usage: $0 [--dry | --build-only] [--quick] [--bundle DIR]" \
               "[--steps devices,calibrate,resnet,tf32,bert,gpt,heldout,oom,nccl,zero,mesh,parity]" >&2; exit 2 ;;
    esac
    shift
done
if [[ -n $BUNDLE && $BUILD_ONLY == 1 ]]; then
    echo "--build-only builds here; a bundle is built by scripts/gpu_bundle.sh" >&2
    exit 2
fi
wanted() { [[ ",$STEPS," == *",$1,"* ]]; }
OUT="${OUT:-$ROOT/target/gpu-check}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
rm -rf "$OUT/results.jsonl" "$OUT/parity.txt" "$OUT/runs" "$OUT/calibrated.toml"
say() { echo "$*" | tee -a "$SUMMARY"; }

# The deadline the steps share (set after the build); RESERVE_S is kept for the summary at the end.
DEADLINE=
RESERVE_S=15
# step NAME LIMIT_S COMMAND...: run with a time limit (never past the deadline), output in $OUT/NAME.log, one
# summary line.
step() {
    local name=$1 limit=$2
    shift 2
    local start rc ms left
    if [[ -n $DEADLINE ]]; then
        left=$(( DEADLINE - RESERVE_S - $(date +%s) ))
        if (( left < 10 )); then
            say "$(printf '%-8s skipped: the deadline is reached' "$name")"
            echo "skipped: out of time" >"$OUT/$name.log"
            return 124
        fi
        (( limit > left )) && limit=$left
    fi
    start=$(date +%s%N)
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1 </dev/null
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    say "$(printf '%-8s rc=%-3s %4d.%01d s  (limit %s s)' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) "$limit")"
    return "$rc"
}

say "gpu_check $(date -u +%FT%TZ) dry=$DRY quick=$QUICK bundle=${BUNDLE:-none} steps=$STEPS" \
    "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
{
    echo "== nvidia-smi"; nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
    nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version,mig.mode.current --format=csv 2>&1 || true
    echo "== CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-} CUDA_DEVICE_ORDER=${CUDA_DEVICE_ORDER:-}"
    echo "== cpu"; nproc; grep -m1 'model name' /proc/cpuinfo
    echo "== glibc"; ldd --version 2>&1 | head -1
    echo "== cargo"; cargo --version 2>&1 || echo "(no cargo)"
    [[ -n $BUNDLE ]] && { echo "== bundle $BUNDLE"; cat "$BUNDLE/bundle.env"; ls -l "$BUNDLE"; }
} >"$OUT/machine.log" 2>&1

if [[ -n $BUNDLE ]]; then
    # The bundle brings the engine; this machine brings PyTorch (its python3), which run.sh checks is the exact
    # build the bundle was compiled against. Nothing is built or installed.
    PY="${TRAINBENCH_PYTHON:-python3}"
    export TRAINBENCH_PYTHON="$PY"
    BIN="$BUNDLE/run.sh"
    # A copy that lost its modes on the way still runs.
    chmod +x "$BIN" "$BUNDLE/trainbench" "$BUNDLE/trainbench-engine" 2>/dev/null
    # shellcheck disable=SC2016
    if ! step bundle 60 bash -c '"$1" --bundle-info && "$2" -c "import torch; print(torch.__version__, torch.cuda.is_available())"' \
        _ "$BIN" "$PY"; then
        say "the bundle cannot start here (exit 2 is a PyTorch it was not built for):"
        grep -v '^bundle:\|^here:\|^libraries:\|^missing from' "$OUT/bundle.log" | head -5 | tee -a "$SUMMARY"
        cat "$OUT/machine.log" "$OUT/bundle.log" >"$OUT/logs.txt"
        rm -f "$OUT"/*.log
        exit 1
    fi
    grep '^bundle:\|^here:\|^missing from' "$OUT/bundle.log" | tee -a "$SUMMARY"
else
    export TRAINBENCH_VENV="${TRAINBENCH_VENV:-/root/.cache/trainbench-ci/venv}"
    if ! step env 300 bash -c "source scripts/env.sh && python -c 'import torch; print(torch.__version__, torch.cuda.is_available())'"; then
        say "the PyTorch environment is missing and could not be made (see env.log): nothing else can run"
        exit 1
    fi
    # shellcheck source=env.sh
    source scripts/env.sh
    set +e # env.sh turns on errexit; a failed step must not end the check
    PY="$VENV/bin/python"
    if [[ -n "${TRAINBENCH_BIN:-}" ]]; then
        BIN="$TRAINBENCH_BIN"
        say "using $BIN (no build)"
        # A binary finds libtorch through the absolute path of the environment it was built in: say so plainly
        # instead of letting the loader's message stand alone.
        missing=$(ldd "$BIN" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
        if [[ -n "$missing" ]]; then
            runpath=$(readelf -d "$BIN" 2>/dev/null | sed -n 's/.*R\(UN\)\?PATH.*\[\(.*\)\]/\2/p' | head -1)
            say "$BIN cannot start here: $missing not found; it looks for libtorch in ${runpath:-?} (the" \
                "environment it was built in). Build on this machine, or put that environment's torch/lib on" \
                "LD_LIBRARY_PATH, or use a bundle (scripts/gpu_bundle.sh, then --bundle)."
            exit 1
        fi
    else
        export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
        touch crates/trainbench-backend-tch/shim/shim.cpp
        # The build prints whether the NCCL engine was compiled (a cargo warning names what is missing when not).
        step build 540 cargo build --release --locked --offline --features tch || {
            say "the release build failed (build.log): nothing else can run"
            exit 1
        }
        BIN="$CARGO_TARGET_DIR/release/trainbench"
    fi
fi
if [[ $BUILD_ONLY == 1 ]]; then
    tail -n 80 "$OUT/build.log" >"$OUT/logs.txt"
    rm -f "$OUT"/*.log
    say "built $BIN; done $(date -u +%FT%TZ)"
    exit 0
fi
if [[ $DRY == 1 ]]; then
    BUDGET=${GPU_CHECK_BUDGET_S:-1800}
elif [[ $QUICK == 1 ]]; then
    BUDGET=${GPU_CHECK_BUDGET_S:-360}
else
    BUDGET=${GPU_CHECK_BUDGET_S:-560}
fi
DEADLINE=$(( $(date +%s) + BUDGET ))

wanted devices && step devices 30 "$BIN" devices --format json

RESNET=specs/tbd/resnet50.toml
# The OOM probe without cuDNN's benchmark: at batch 4096 the search for each layer's algorithm can outlast the
# step's time limit before the first allocation fails (seen on an H200: interrupted at 30 s, no outcome).
NOBENCH=(--set training.cudnn_benchmark=false)
BERT=specs/extra/bert_base.toml
# The smoke GPT of the modern workloads, once a spec for it exists.
GPT=$(ls specs/smoke/gpt*.toml specs/*/gpt*.toml 2>/dev/null | head -1)
ONE=(--set run.repeats=1 --quiet)
if [[ $DRY == 1 ]]; then
    # The CPU stands in: same specs, batch 2, a few iterations, bf16 for the half precision (fp16 is CUDA-only).
    CPU=(--set 'topology.device="cpu"' --set run.warmup=1 --set run.iterations=3 "${ONE[@]}")
    RES=("${CPU[@]}" --set 'sweep.batch_sizes=[2]' --set 'sweep.precisions=["fp32","bf16"]')
    BIG=("${CPU[@]}" --set 'sweep.batch_sizes=[2]' --set 'sweep.precisions=["fp32"]')
    # BERT-base takes over 10 s a step on two cores: two layers at sequence 32 check the same path.
    BERTS=("${CPU[@]}" --set 'sweep.batch_sizes=[2]' --set 'sweep.precisions=["fp32"]' --set run.iterations=2
        --set model.layers=2 --set model.seq_len=32)
    GPTS=("${CPU[@]}" --set 'sweep.batch_sizes=[2]' --set 'sweep.precisions=["fp32"]')
    OOMS=("${CPU[@]}" --set 'sweep.batch_sizes=[65536]')
    PARITY=(--device cpu --batch 2 --warmup 1 --iters 2 --free 2)
    PARITY_PRECISIONS=(fp32)
    L_RES=170 L_BIG=80 L_BERT=100 L_GPT=120 L_HELD=120 L_OOM=60 L_NCCL=60 L_ZERO=60 L_MESH=60 L_PAR=120 L_CAL=900
    CAL=(--device cpu --max-gemm 256)
elif [[ $QUICK == 1 ]]; then
    GPU=(--set run.warmup=10 --set run.iterations=30 --set run.timeout_s=60 "${ONE[@]}")
    RES=("${GPU[@]}" --set 'sweep.batch_sizes=[128]' --set 'sweep.precisions=["fp32","fp16"]')
    BIG=("${GPU[@]}" --set 'sweep.batch_sizes=[128]' --set 'sweep.precisions=["fp32"]')
    BERTS=("${GPU[@]}" --set 'sweep.batch_sizes=[32]' --set 'sweep.precisions=["fp16"]' --set run.iterations=20)
    GPTS=("${GPU[@]}" --set 'sweep.precisions=["bf16"]')
    OOMS=(--set 'sweep.batch_sizes=[4096]' --set run.warmup=2 --set run.iterations=3 --set run.repeats=1 "${NOBENCH[@]}")
    PARITY=(--batch 128 --warmup 10 --iters 30 --free 30)
    PARITY_PRECISIONS=(fp32)
    L_RES=60 L_BIG=30 L_BERT=35 L_GPT=30 L_HELD=30 L_OOM=60 L_NCCL=35 L_ZERO=30 L_MESH=40 L_PAR=35 L_CAL=200
    CAL=(--device cuda:0 --max-gemm 4096 --repeats 3)
else
    GPU=(--set run.warmup=20 --set run.iterations=60 --set run.timeout_s=120 "${ONE[@]}")
    RES=("${GPU[@]}" --set 'sweep.batch_sizes=[32,128]' --set 'sweep.precisions=["fp32","fp16","bf16"]')
    BIG=("${GPU[@]}" --set 'sweep.batch_sizes=[128]' --set 'sweep.precisions=["fp32"]')
    BERTS=("${GPU[@]}" --set 'sweep.batch_sizes=[32]' --set 'sweep.precisions=["fp32","fp16"]' --set run.iterations=40)
    GPTS=("${GPU[@]}" --set 'sweep.precisions=["fp32","bf16"]')
    OOMS=(--set 'sweep.batch_sizes=[4096]' --set run.warmup=2 --set run.iterations=3 --set run.repeats=1 "${NOBENCH[@]}")
    PARITY=(--batch 128 --warmup 20 --iters 60 --free 50)
    PARITY_PRECISIONS=(fp32 fp16)
    L_RES=150 L_BIG=45 L_BERT=70 L_GPT=45 L_HELD=45 L_OOM=90 L_NCCL=50 L_ZERO=40 L_MESH=60 L_PAR=45 L_CAL=300
    CAL=(--device cuda:0 --max-gemm 8192 --repeats 3)
fi

# GPU_CHECK_CALIBRATE_S overrides the calibrate step's limit (a larger grid, a slower device).
L_CAL=${GPU_CHECK_CALIBRATE_S:-$L_CAL}

# The calibration: its figures come from micro-benchmarks only; the runs below are predicted on it.
HW=()
if wanted calibrate; then
    if step calibrate "$L_CAL" "$BIN" calibrate --backend tch "${CAL[@]}" --rounds 1 --allow-loaded --overwrite \
        --out "$OUT/calibrated.toml" && [[ -s $OUT/calibrated.toml ]]; then
        HW=(--hardware "$OUT/calibrated.toml")
        say "calibrate: $(grep -m1 '^name\|^description' "$OUT/calibrated.toml"); every run below is predicted on it"
    else
        say "calibrate: no profile (calibrate.log); the runs below are not predicted"
    fi
fi
RES+=("${HW[@]}")
BIG+=("${HW[@]}")
BERTS+=("${HW[@]}")
GPTS+=("${HW[@]}")

wanted resnet && step resnet "$L_RES" "$BIN" run "$RESNET" --out "$OUT/runs/resnet" "${RES[@]}"

if wanted tf32; then
    OFF=(--set 'training.tf32.matmul=false' --set 'training.tf32.cudnn=false')
    ON=(--set 'training.tf32.matmul=true' --set 'training.tf32.cudnn=true')
    if [[ $DRY == 1 ]]; then
        # On the CPU the switches must be refused before anything starts (exit 2, the field named).
        step tf32 60 "$BIN" run "$RESNET" --out "$OUT/runs/tf32" "${BIG[@]}" "${ON[@]}"
        rc=$?
        if [[ $rc == 2 ]] && grep -q "training.tf32" "$OUT/tf32.log"; then
            say "tf32: refused on the CPU as expected"
        else
            say "tf32: expected exit 2 naming training.tf32, got $rc (tf32.log)"
        fi
    else
        [[ $QUICK == 1 ]] || step tf32off "$L_BIG" "$BIN" run "$RESNET" --out "$OUT/runs/tf32off" "${BIG[@]}" "${OFF[@]}"
        step tf32on "$L_BIG" "$BIN" run "$RESNET" --out "$OUT/runs/tf32on" "${BIG[@]}" "${ON[@]}"
    fi
fi

wanted bert && step bert "$L_BERT" "$BIN" run "$BERT" --out "$OUT/runs/bert" "${BERTS[@]}"

if wanted gpt; then
    if [[ -n $GPT ]]; then
        step gpt "$L_GPT" "$BIN" run "$GPT" --out "$OUT/runs/gpt" "${GPTS[@]}"
    else
        say "gpt: skipped (no GPT spec in specs/ yet)"
    fi
fi

if wanted heldout; then
    # Each declared configuration (name, spec, precision, batch) at a few steps, predicted on the calibration.
    if [[ $DRY == 1 ]]; then
        # Its models take minutes a step on two cores; the set is read and listed instead.
        say "heldout: GPU only; declared: $(grep -v '^#' validation/gpu_heldout.tsv | cut -f1 | xargs)"
    else
        while IFS=$'\t' read -r name spec precision batch; do
            [[ -z $name || $name == \#* ]] && continue
            HELD=(--set run.warmup=10 --set run.iterations=20 --set run.timeout_s=60 "${ONE[@]}"
                --set "sweep.batch_sizes=[$batch]" --set "sweep.precisions=[\"$precision\"]")
            step "heldout-$name" "$L_HELD" "$BIN" run "$spec" --out "$OUT/runs/heldout-$name" "${HELD[@]}" "${HW[@]}"
        done <validation/gpu_heldout.tsv
    fi
fi

if wanted oom; then
    # Progress every 5 s and the device's memory beside it: a probe cut short says how far it got.
    if [[ $DRY == 0 ]] && command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -l 5 >"$OUT/oom-memory.log" 2>&1 &
        SAMPLER=$!
    fi
    TRAINBENCH_PROGRESS_INTERVAL_S=5 step oom "$L_OOM" "$BIN" run "$RESNET" --out "$OUT/runs/oom" "${OOMS[@]}"
    [[ -n ${SAMPLER:-} ]] && kill "$SAMPLER" 2>/dev/null
    if grep -rqs '"out_of_memory"' "$OUT/runs/oom"; then
        say "oom: recorded out_of_memory as expected"
    else
        say "oom: expected an out_of_memory outcome (oom.log and the result)"
    fi
fi

if wanted nccl; then
    # World size 1 through NCCL: all-reduce with one CUDA worker (a rank started by trainbench's own launcher).
    NCCL=(--set 'topology.devices_per_node=1' --set 'topology.strategy="all-reduce"')
    if [[ $DRY == 1 ]]; then
        # Here the CUDA spec must be refused before anything starts (exit 2, the reason named).
        step nccl 60 "$BIN" run "$RESNET" --out "$OUT/runs/nccl" --set 'sweep.batch_sizes=[16]' "${NCCL[@]}"
        rc=$?
        if [[ $rc == 2 ]] && grep -q "NCCL engine" "$OUT/nccl.log"; then
            say "nccl: refused as expected without a GPU: $(grep -m1 -o 'trains through the NCCL engine: [^;]*' "$OUT/nccl.log")"
        else
            say "nccl: expected exit 2 naming the NCCL engine, got $rc (nccl.log)"
        fi
    else
        step nccl "$L_NCCL" "$BIN" run "$RESNET" --out "$OUT/runs/nccl" "${BIG[@]}" --set run.iterations=30 "${NCCL[@]}"
    fi
fi

if wanted zero; then
    # ZeRO-3 through NCCL at world size 1: every layer a unit, gathered ahead while the one before computes.
    ZERO=(--set 'topology.device="cuda"' --set 'topology.devices_per_node=1' --set 'topology.strategy="zero-3"'
        --set 'topology.overlap=true'
        --set 'training.activation_checkpointing="full"' --set 'sweep.precisions=["bf16"]')
    if [[ $DRY == 1 ]]; then
        step zero 60 "$BIN" run specs/llm/smoke_gpt.toml --out "$OUT/runs/zero" --set 'sweep.batch_sizes=[2]' "${ZERO[@]}"
        rc=$?
        if [[ $rc == 2 ]] && grep -q "NCCL engine" "$OUT/zero.log"; then
            say "zero: refused as expected without a GPU"
        else
            say "zero: expected exit 2 naming the NCCL engine, got $rc (zero.log)"
        fi
    else
        step zero "$L_ZERO" "$BIN" run specs/llm/smoke_gpt.toml --out "$OUT/runs/zero" "${GPTS[@]}" "${ZERO[@]}" \
            --set 'sweep.batch_sizes=[16]'
    fi
fi

if wanted mesh; then
    # Tensor and expert parallelism through NCCL groups split from the world's: two ranks, one GPU each.
    MESH=(--set 'topology.device="cuda"' --set 'topology.devices_per_node=2' --set 'topology.strategy="all-reduce"')
    TP=("${MESH[@]}" --set 'topology.tensor_parallel=2' --set 'sweep.batch_sizes=[8]')
    EP=("${MESH[@]}" --set 'topology.expert_parallel=2' --set 'sweep.batch_sizes=[8]')
    GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [[ $DRY == 1 ]]; then
        # Here the CUDA mesh must be refused before anything starts (exit 2, the NCCL engine named), not split.
        step mesh 60 "$BIN" run specs/llm/smoke_gpt.toml --out "$OUT/runs/mesh" "${ONE[@]}" "${TP[@]}"
        rc=$?
        if [[ $rc == 2 ]] && grep -q "NCCL engine" "$OUT/mesh.log"; then
            say "mesh: refused as expected without a GPU"
        else
            say "mesh: expected exit 2 naming the NCCL engine, got $rc (mesh.log)"
        fi
    elif (( GPUS < 2 )); then
        say "mesh: skipped: $GPUS GPU(s) here; tensor_parallel 2 and expert_parallel 2 need two (one NCCL rank per GPU)"
    else
        step mesh "$L_MESH" "$BIN" run specs/llm/smoke_gpt.toml --out "$OUT/runs/mesh" "${GPTS[@]}" "${TP[@]}"
        step mesh-ep "$L_MESH" "$BIN" run specs/llm/smoke_moe.toml --out "$OUT/runs/mesh-ep" "${GPU[@]}" "${EP[@]}" "${HW[@]}" \
            --set 'sweep.precisions=["fp32"]'
    fi
fi

if wanted parity; then
    # PyTorch eager with this machine's PyTorch (the venv's, or with --bundle the machine's python3; torchvision
    # is used when installed, else the script's own ResNet-50 of the same layers); on the CPU with --dry.
    for p in "${PARITY_PRECISIONS[@]}"; do
        step "parity-$p" "$L_PAR" "$PY" scripts/parity/cuda_eager.py "${PARITY[@]}" --precision "$p"
        grep '^RESULT' "$OUT/parity-$p.log" | tee -a "$OUT/parity.txt" >/dev/null
    done
fi

# Results and figures (few files come back from a device run): the summary with one line per run, every result
# in results.jsonl, the parity lines, and every step's log (its last 80 lines) in logs.txt.
TRAINBENCH_BIN="$BIN" "$PY" scripts/gpu_check_summary.py "$OUT" | tee -a "$SUMMARY"
for f in "$OUT"/*.log; do
    echo "===== $(basename "$f") (last 80 lines)"
    tail -n 80 "$f"
done >"$OUT/logs.txt"
rm -rf "$OUT/runs" "$OUT"/*.log
say "done $(date -u +%FT%TZ)"
