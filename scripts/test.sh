#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: sets up what it needs (Python environment with PyTorch 2.13.0,
# Debian packages for the browser test), checks formatting, then runs every unit, integration, snapshot and
# backend test with the tch backend built in. Lints: scripts/lint.sh.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/system-deps.sh || echo "warning: could not install Debian packages; browser tests will say they skip" >&2
echo "==> cargo fmt --check" >&2
cargo fmt --all --check
echo "==> cargo test (features: tch)" >&2
CI=true cargo test --features tch --workspace
