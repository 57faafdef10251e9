#!/usr/bin/env bash
# The report screenshot of docs/measurements.md (docs/report.png): trains the tiny ResNet and Transformer smoke
# specs over a batch sweep on the CPU, renders `trainbench report` and photographs its memory-breakdown and
# step-time sections in headless Chromium (HEIGHT sets the picture's height). The compare table beside it comes
# from scripts/compare_demo.sh.
#
# Usage: scripts/report_screenshot.sh [OUT_PNG]   (default docs/report.png; TB=path/to/trainbench skips the build)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
PNG=${1:-docs/report.png}
if [ -z "${TB:-}" ]; then
  cargo build -q --release --features tch
  TB=target/release/trainbench
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SPECS=(specs/smoke/resnet_tiny.toml specs/smoke/transformer_tiny.toml)
SETS=(--set "sweep.batch_sizes=[2,4,8,16,32]" --set run.iterations=30 --set run.repeats=3)
$TB run "${SPECS[@]}" --backend tch --quiet --out "$WORK/base" "${SETS[@]}" >/dev/null
$TB report "$WORK/base" --out "$WORK/report" >&2
# Keep the title and the memory-breakdown and step-time sections: drop the other <section>s, then photograph.
python3 - "$WORK/report/index.html" "$WORK/report/shot.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
keep = ("memory", "step-times")
html = re.sub(r'<section id="([^"]+)">.*?</section>', lambda m: m.group(0) if m.group(1) in keep else "", html, flags=re.S)
html = re.sub(r"<ul>.*?</ul>", "", html, count=1, flags=re.S)  # the table of contents
open(sys.argv[2], "w").write(html)
PY
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$WORK/profile" --hide-scrollbars \
  --window-size=1280,${HEIGHT:-2250} --screenshot="$PNG" "file://$WORK/report/shot.html" >/dev/null 2>&1
echo "screenshot: $PNG" >&2
