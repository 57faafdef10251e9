#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: sets up what it needs (Python environment with PyTorch 2.13.0,
# Debian packages for the browser test and software Vulkan), lints (scripts/lint.sh: formatting, then clippy),
# then runs every unit, integration, snapshot and backend test with both backends (tch and wgpu) built in, the
# cross-backend agreement test included.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/system-deps.sh || echo "warning: could not install Debian packages; browser and wgpu tests will skip (or fail under CI=true)" >&2
echo "==> scripts/lint.sh (cargo fmt --check, then clippy with warnings as errors)" >&2
bash scripts/lint.sh
echo "==> cargo test (features: tch, wgpu)" >&2
CI=true cargo test --features tch,wgpu --workspace
