#!/usr/bin/env bash
# Lints: formatting and clippy with warnings as errors, over every target of the workspace, with both backends
# (tch and wgpu) built in.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
cargo fmt --all --check
cargo clippy --workspace --all-targets --features tch,wgpu,mpi -- -D warnings
