#!/usr/bin/env bash
# The report screenshot of docs/measurements.md (docs/report.png): trains the tiny ResNet and Transformer smoke
# specs over a batch sweep on the CPU (3 repeats, each in a process of its own), renders `trainbench report` and
# photographs it in headless Chromium: the overview table, then the grids of throughput, utilisation, phase
# shares, memory and step times (the detail tables at the end are left out; HEIGHT sets the picture's height).
# The compare table beside it comes from scripts/compare_demo.sh.
#
# Usage: scripts/report_screenshot.sh [OUT_PNG]   (default docs/report.png)
#   TB=path/to/trainbench   skips the build (a binary built with --features tch, unless RESULTS is set)
#   RESULTS=dir             skips the run and photographs the report of the results in dir
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
PNG=${1:-docs/report.png}
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch
  TB=target/release/trainbench
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
if [ -z "${RESULTS:-}" ]; then
  SPECS=(specs/smoke/resnet_tiny.toml specs/smoke/transformer_tiny.toml)
  SETS=(--set "sweep.batch_sizes=[2,4,8,16,32]" --set run.iterations=30 --set run.repeats=3)
  RESULTS="$WORK/base"
  $TB run "${SPECS[@]}" --backend tch --quiet --out "$RESULTS" "${SETS[@]}" >/dev/null
fi
$TB report "$RESULTS" --out "$WORK/report" >&2
# Drop the detail tables at the end (every configuration's figures, every run's environment), then photograph.
python3 - "$WORK/report/index.html" "$WORK/report/shot.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
drop = ("details", "environment")
html = re.sub(r'<section id="([^"]+)">.*?</section>', lambda m: "" if m.group(1) in drop else m.group(0), html, flags=re.S)
html = re.sub(r'<a href="#(details|environment)">[^<]*</a>', "", html)
open(sys.argv[2], "w").write(html)
PY
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$WORK/profile" --hide-scrollbars \
  --window-size=1280,${HEIGHT:-2640} --screenshot="$PNG" "file://$WORK/report/shot.html" >/dev/null 2>&1
echo "screenshot: $PNG" >&2
