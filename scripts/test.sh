#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: prints the CPU (model, AVX2/AVX-512/AMX flags, any oneDNN cap),
# sets up what it needs (Python environment with PyTorch 2.13.0, Debian packages for the browser test and software
# Vulkan, taplo from npm for the editor-schema test), checks formatting, then builds every test with clippy as
# the compiler of the workspace's own crates (warnings are errors) and runs every unit, integration, snapshot
# and backend test with both backends (tch and wgpu) built in, the cross-backend agreement test included.
# Lint and test share one compilation: `cargo clippy` alone would check every dependency (burn, cubecl, naga,
# wgpu, libtorch's bindings) a second time in check mode; here clippy-driver wraps rustc for the workspace's
# crates only (cargo's RUSTC_WORKSPACE_WRAPPER), so the test build is the lint and each dependency is compiled
# once. It lints the same targets `cargo clippy --all-targets` does (lib, bins, tests, examples; there are no
# benches). `scripts/lint.sh` stays the quick lint for a developer.
# First the CPU the log comes from, so that a failure in a CPU kernel can be read against it (libtorch's oneDNN
# runs some layers only with AVX-512, and ONEDNN_MAX_CPU_ISA can cap what it uses). Never fails: an ARM host or
# a container without /proc/cpuinfo prints "unknown" and "none".
cpu_model=$( (grep -m1 -E '^(model name|Hardware|Model)[[:space:]]*:' /proc/cpuinfo | cut -d: -f2- | sed 's/^[[:space:]]*//') 2>/dev/null || true)
cpu_flags=$( (grep -o -w -E 'avx2|avx512[a-z_0-9]*|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//') 2>/dev/null || true)
echo "==> CPU: ${cpu_model:-unknown}, $(nproc 2>/dev/null || echo '?') logical cores" >&2
echo "==> CPU flags: ${cpu_flags:-none}${ONEDNN_MAX_CPU_ISA:+ (ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA)}${DNNL_MAX_CPU_ISA:+ (DNNL_MAX_CPU_ISA=$DNNL_MAX_CPU_ISA)}" >&2
# Each phase's wall time, printed at the end whether the run passed or failed, so that a slower suite is seen.
phases=()
phase_start=$(date +%s)
phase_name="python environment"
end_phase() {
    local now
    now=$(date +%s)
    phases+=("$(printf '%-34s %5d s' "$phase_name" $((now - phase_start)))")
    phase_start=$now
    phase_name="$1"
}
suite_start=$phase_start
print_phases() {
    local status=$?
    end_phase ""
    echo "==> phases (wall time):" >&2
    printf '    %s\n' "${phases[@]}" >&2
    printf '    %-34s %5d s (exit %d)\n' "whole test command" $(($(date +%s) - suite_start)) "$status" >&2
}
trap print_phases EXIT
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
end_phase "Debian packages"
bash scripts/system-deps.sh || echo "warning: could not install Debian packages; browser, wgpu, MPI, Slurm and PostgreSQL tests will skip (or fail under CI=true)" >&2
end_phase "taplo (npm)"
bash scripts/editor-deps.sh || echo "warning: could not install taplo from npm; the editor-schema test will fail under CI=true" >&2
end_phase "format check"
echo "==> cargo fmt --all --check" >&2
cargo fmt --all --check
end_phase "build the tests (clippy as compiler)"
echo "==> cargo test --no-run (features: tch, wgpu, mpi), the workspace's crates compiled by clippy-driver with warnings as errors" >&2
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
if [[ -z $RUSTC_WORKSPACE_WRAPPER ]]; then
    echo "error: clippy is not installed (no clippy-driver); install it with: rustup component add clippy" >&2
    exit 1
fi
export RUSTC_WORKSPACE_WRAPPER
# clippy-driver's own argument channel (what `cargo clippy -- -D warnings` sets); it is part of the build's
# fingerprint, so the run below, with the same environment, reuses every artifact.
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
CI=true cargo test --features tch,wgpu,mpi --workspace --no-run
end_phase "run the tests"
CI=true cargo test --features tch,wgpu,mpi --workspace
