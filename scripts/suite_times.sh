#!/usr/bin/env bash
# Build and run times of the whole test suite (features tch,wgpu) at one or more checkouts, side by side:
# the rebuild after touching src/lib.rs (compile of the root crate plus linking every test executable), the
# number and total size of the test executables, and the wall time of the whole suite.
#
#   scripts/suite_times.sh DIR...        e.g. two `git worktree`s at the commits to compare
#
# Uses the CI target dir and Python environment (~/.cache/trainbench-ci). Checkouts sharing one target dir share
# the tch shim's build output (cargo's build-script hash does not depend on the checkout's path), so each
# checkout's shim source is touched first to rebuild it from that checkout's source.
set -uo pipefail
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/trainbench-ci/target}"
export TRAINBENCH_VENV="${TRAINBENCH_VENV:-$HOME/.cache/trainbench-ci/venv}"
log=$(mktemp -d)
for dir in "$@"; do
    (
        cd "$dir" || exit 1
        source scripts/env.sh >/dev/null 2>&1
        touch crates/trainbench-backend-tch/shim/shim.cpp
        cargo test --features tch,wgpu --workspace --no-run >/dev/null 2>&1
        touch src/lib.rs
        s=$(date +%s.%N)
        cargo test --features tch,wgpu --workspace --no-run >"$log/build" 2>&1
        e=$(date +%s.%N)
        mapfile -t exes < <(grep -o '(/[^)]*)' "$log/build" | tr -d '()')
        bytes=0
        for f in "${exes[@]}"; do bytes=$((bytes + $(stat -c %s "$f"))); done
        printf '%s: rebuild after touching src/lib.rs %.1f s; %d test executables, %.2f GB\n' \
            "$dir" "$(echo "$e - $s" | bc)" "${#exes[@]}" "$(echo "$bytes / 1000000000" | bc -l)"
        s=$(date +%s.%N)
        CI=true cargo test --features tch,wgpu --workspace >"$log/test" 2>&1
        rc=$?
        e=$(date +%s.%N)
        counts=$(grep '^test result' "$log/test" | awk '{p += $4; f += $6} END {print p " passed, " f " failed"}')
        printf '%s: whole suite %.0f s (exit %d; %s)\n' "$dir" "$(echo "$e - $s" | bc)" "$rc" "$counts"
    )
done
rm -rf "$log"
