# Sourced by the other scripts: sets up (idempotently) the project-local Python environment with
# PyTorch 2.13.0, which the tch backend links against, and exports what cargo needs to find it.
# TRAINBENCH_VENV overrides the location (CI keeps one under ~/.cache to reuse it between clones).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TRAINBENCH_VENV:-$ROOT/.venv}"
TORCH_VERSION=2.13.0
TORCHVISION_VERSION=0.28.0

# Header-only CUDA wheels the tch shim's NCCL engine (backends/tch/shim/nccl.cpp) compiles against beside the
# wheel's own CUDA headers (cuda_runtime.h includes CCCL's and the CRT's headers); 3.3 MB, no libraries.
CUDA_CCCL_VERSION=13.0.85
CUDA_CRT_VERSION=13.0.88

if ! "$VENV/bin/python" -c "import torch, torchvision, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    echo "==> installing PyTorch $TORCH_VERSION into $VENV (about 5 GB, a few minutes)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if (m.version('nvidia-cuda-cccl'), m.version('nvidia-cuda-crt')) == ('$CUDA_CCCL_VERSION', '$CUDA_CRT_VERSION') else 1)" 2>/dev/null; then
    echo "==> installing the CUDA header wheels the NCCL engine compiles against into $VENV (3.3 MB)" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "nvidia-cuda-cccl==$CUDA_CCCL_VERSION" "nvidia-cuda-crt==$CUDA_CRT_VERSION"
fi

export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
export LIBTORCH_USE_PYTORCH=1
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
