#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: sets up what it needs (Python environment with PyTorch 2.13.0,
# Debian packages for the browser test and software Vulkan), checks formatting, then runs every unit,
# integration, snapshot and backend test with both backends (tch and wgpu) built in, the cross-backend
# agreement test included. Clippy runs too (scripts/lint.sh is the lint step alone).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/system-deps.sh || echo "warning: could not install Debian packages; browser and wgpu tests will skip (or fail under CI=true)" >&2
echo "==> cargo fmt --check" >&2
cargo fmt --all --check
echo "==> cargo clippy (warnings are errors)" >&2
cargo clippy --workspace --all-targets --features tch,wgpu -- -D warnings
echo "==> cargo test (features: tch, wgpu)" >&2
CI=true cargo test --features tch,wgpu --workspace
