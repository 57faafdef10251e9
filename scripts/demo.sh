#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the main job on the CPU (no GPU needed):
# validate every spec, analyse the TBD ResNet-50, train the smoke suite through libtorch, and write a report.
# Results land in results/demo/, the report in results/demo-report/index.html; each run is also recorded into the
# results history (results/history.sqlite), whose page is written to results/demo-history/history.html, so a second
# demo on the same machine shows two points per series.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/system-deps.sh || echo "warning: could not install Debian packages (not root?); continuing" >&2
echo "==> building trainbench (release, with the tch backend)" >&2
cargo build --release --features tch,mpi
TB=target/release/trainbench
echo "==> trainbench validate specs/" >&2
$TB validate specs/
echo "==> trainbench analyze specs/tbd/resnet50.toml --batch 32" >&2
$TB analyze specs/tbd/resnet50.toml --batch 32
echo "==> trainbench run specs/smoke/ (CPU, libtorch)" >&2
# --overwrite: a second demo replaces the first one's result files; --record keeps every run in the history.
$TB run specs/smoke/*.toml --backend tch --out results/demo --overwrite --record
echo "==> trainbench report" >&2
$TB report results/demo --out results/demo-report
echo "==> trainbench history list, and its page" >&2
$TB history list
$TB history report --out results/demo-history
echo "report: $ROOT/results/demo-report/index.html" >&2
echo "history: $ROOT/results/demo-history/history.html" >&2
