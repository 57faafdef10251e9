# Sourced by the other scripts: sets up (idempotently) the project-local Python environment with
# PyTorch 2.13.0, which the tch backend links against, and exports what cargo needs to find it.
# TRAINBENCH_VENV overrides the location (CI keeps one under ~/.cache to reuse it between clones).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TRAINBENCH_VENV:-$ROOT/.venv}"
TORCH_VERSION=2.13.0
TORCHVISION_VERSION=0.28.0

source "$ROOT/scripts/wheels.sh"

if ! has_wheels "$VENV" torch "$TORCH_VERSION" torchvision "$TORCHVISION_VERSION"; then
    echo "==> installing PyTorch $TORCH_VERSION into $VENV (about 5 GB, a few minutes)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
fi
if ! has_wheels "$VENV" nvidia-cuda-cccl "$CUDA_CCCL_VERSION" nvidia-cuda-crt "$CUDA_CRT_VERSION"; then
    echo "==> installing the CUDA header wheels the NCCL engine compiles against into $VENV (3.3 MB)" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "nvidia-cuda-cccl==$CUDA_CCCL_VERSION" "nvidia-cuda-crt==$CUDA_CRT_VERSION"
fi

if ! has_wheels "$VENV" mlperf-logging "$MLPERF_LOGGING_VERSION"; then
    echo "==> installing mlperf-logging $MLPERF_LOGGING_VERSION (MLCommons' compliance checker, for tests/it/mlperf.rs) into $VENV" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "mlperf-logging==$MLPERF_LOGGING_VERSION"
fi

export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
export LIBTORCH_USE_PYTORCH=1
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
