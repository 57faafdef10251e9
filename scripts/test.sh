#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: sets up what it needs, checks formatting and lints, runs all tests.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
echo "==> cargo fmt --check" >&2
cargo fmt --all --check
echo "==> cargo clippy" >&2
cargo clippy --all-targets --features tch -- -D warnings
echo "==> cargo test" >&2
CI=true cargo test --features tch --workspace
