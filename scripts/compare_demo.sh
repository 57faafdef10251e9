#!/usr/bin/env bash
# The `compare` table of docs/measurements.md: trains the smoke suite twice on the CPU (tch, 30 iterations,
# 3 repeats, each repeat in a process of its own) with the tiny ResNet made deliberately heavier in the second
# run (width 12 instead of 8), then prints `trainbench compare --format markdown` of the two. The heavier
# ResNet must be flagged SLOWER; the unchanged specs should not be flagged.
#
# Usage: scripts/compare_demo.sh [--set KEY=VALUE]...   (extra overrides for every run, e.g.
#        `--set run.cpu_threads=1`; TB=path/to/trainbench skips the build)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch
  TB="${CARGO_TARGET_DIR:-$ROOT/target}/release/trainbench"
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set run.iterations=30 --set run.repeats=3 "$@")
OTHERS=(specs/smoke/custom.toml specs/smoke/mlp.toml specs/smoke/seq2seq_tiny.toml specs/smoke/transformer_tiny.toml)
"$TB" run specs/smoke/*.toml --backend tch --quiet --out "$WORK/base" "${SETS[@]}" >/dev/null
"$TB" run "${OTHERS[@]}" --backend tch --quiet --out "$WORK/cand" "${SETS[@]}" >/dev/null
"$TB" run specs/smoke/resnet_tiny.toml --backend tch --quiet --out "$WORK/cand" "${SETS[@]}" --set model.width=12 >/dev/null
set +e
"$TB" compare "$WORK/base" "$WORK/cand" --format markdown
echo "(compare exit code: $?)"
