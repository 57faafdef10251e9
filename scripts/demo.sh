#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the main job on the CPU (no GPU needed):
# validate every spec, analyse the TBD ResNet-50, train the smoke suite through libtorch, and write a report.
# Results land in results/demo/, the report in results/demo-report/index.html.
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
# --overwrite: a second demo replaces the first one's results.
$TB run specs/smoke/*.toml --backend tch --out results/demo --overwrite
echo "==> trainbench report" >&2
$TB report results/demo --out results/demo-report
echo "report: $ROOT/results/demo-report/index.html" >&2
