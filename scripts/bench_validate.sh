#!/usr/bin/env bash
# Times `trainbench validate` over 1,000 generated spec files with the release binary and prints files/second.
# The files are copies of the real specs under specs/ with varied names and batch sizes; one in five is a copy
# of a case from the invalid corpus (tests/invalid/), so the figure covers both outcomes.
# Usage: scripts/bench_validate.sh [FILES] [ROUNDS]   (defaults: 1000 files, best of 3 rounds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-1000}"
ROUNDS="${2:-3}"

cargo build --release --quiet --bin trainbench --manifest-path "$ROOT/Cargo.toml"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/trainbench"

DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
mapfile -t SPECS < <(find "$ROOT/specs" -name '*.toml' | sort)
mapfile -t BAD < <(find "$ROOT/tests/invalid" -name '*.toml' | sort)
for ((i = 0; i < N; i++)); do
    out="$DIR/spec-$(printf '%04d' "$i").toml"
    if ((i % 5 == 4)); then
        cp "${BAD[$((i / 5 % ${#BAD[@]}))]}" "$out"
    else
        b=$((8 * (1 + i % 16)))
        sed -e "0,/^name = \".*\"/s//name = \"bench-$i\"/" \
            -e "s/^batch_sizes = .*/batch_sizes = [$b, $((2 * b))]/" \
            "${SPECS[$((i % ${#SPECS[@]}))]}" >"$out"
    fi
done

best=""
for ((r = 0; r < ROUNDS; r++)); do
    start=$(date +%s.%N)
    code=0
    "$BIN" validate "$DIR" >"$DIR.out" || code=$?
    end=$(date +%s.%N)
    secs=$(echo "$end - $start" | bc -l)
    if [[ -z "$best" ]] || (($(echo "$secs < $best" | bc -l))); then best=$secs; fi
done
summary=$(tail -n 1 "$DIR.out")
rm -f "$DIR.out"
echo "$summary (exit code $code)"
printf 'validated %d files in %.3f s (best of %d): %.0f files/second\n' "$N" "$best" "$ROUNDS" "$(echo "$N / $best" | bc -l)"
