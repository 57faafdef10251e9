#!/usr/bin/env bash
# Whole-process start-up cost of the commands that never train: wall time and peak resident memory of each
# process, measured from outside (fork to reap, `wait4`'s rusage), median of several runs. The 1,000-spec row
# validates copies of the shipped specs (without bench_validate.sh's invalid cases): all valid.
# Usage: scripts/startup_bench.sh [BIN] [RUNS]   (defaults: the release build of this checkout, 7 runs)
# BIN is the front binary; `devices` is timed too, since it is the one listed command that loads a backend.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-}"
RUNS="${2:-7}"
if [[ -z "$BIN" ]]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/trainbench"
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
# Specs that name files relative to their folder (local datasets) would not validate as copies elsewhere.
mapfile -t SPECS < <(find "$ROOT/specs" -name '*.toml' -print0 | xargs -0 grep -L 'path = "\.' | sort)
for ((i = 0; i < 1000; i++)); do
    sed -e "0,/^name = \".*\"/s//name = \"bench-$i\"/" "${SPECS[$((i % ${#SPECS[@]}))]}" \
        >"$DIR/spec-$(printf '%04d' "$i").toml"
done
cd "$ROOT"
python3 - "$BIN" "$RUNS" "$DIR" <<'PY'
import os, statistics, subprocess, sys, time
binary, runs, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cases = [
    ("--version", ["--version"]),
    ("validate (1 spec)", ["validate", "specs/smoke/mlp.toml"]),
    ("validate (1,000 specs)", ["validate", specs]),
    ("plan (1 spec)", ["plan", "specs/smoke/mlp.toml"]),
    ("schema", ["schema"]),
    ("devices (loads backends)", ["devices"]),
]
print(f"binary: {binary}  ({runs} runs each, median; load average {os.getloadavg()[0]:.2f})")
print(f"{'command':<28}{'wall ms':>10}{'peak RSS MiB':>14}{'exit':>6}")
for label, args in cases:
    walls, rss, code = [], [], None
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append((time.perf_counter() - start) * 1000)
        rss.append(usage.ru_maxrss / 1024)
        code = os.waitstatus_to_exitcode(status)
    print(f"{label:<28}{statistics.median(walls):>10.1f}{statistics.median(rss):>14.1f}{code:>6}")
PY
