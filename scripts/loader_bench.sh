#!/usr/bin/env bash
# The image input pipeline against PyTorch's: trainbench's image-folder loader and torchvision's ImageFolder +
# DataLoader with the same recipe (RandomResizedCrop(224), flip, normalise), batch 32 and worker count, on one
# generated folder of JPEGs (~500x375, 10 classes); prints images/s side by side and the ratio.
#
#   scripts/loader_bench.sh [WORKER_COUNTS...]      (default: 1 2)
#   IMAGES=2000 BATCHES=40 ROUNDS=2 DATA=/tmp/tb-loader-bench scripts/loader_bench.sh 1 2
#
# The folder is generated once (Pillow, scripts/loader_bench/gen_jpegs.py) and reused. Each worker count is
# measured ROUNDS times, trainbench and PyTorch alternating; the best round of each is reported.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/env.sh >/dev/null
py="${TRAINBENCH_VENV:-$root/.venv}/bin/python"
data="${DATA:-${TMPDIR:-/tmp}/tb-loader-bench}"
images="${IMAGES:-2000}"
batches="${BATCHES:-40}"
rounds="${ROUNDS:-2}"
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 2)

if [ ! -f "$data/.done-$images" ]; then
    echo "generating $images JPEGs in $data ..." >&2
    rm -rf "$data"
    "$py" scripts/loader_bench/gen_jpegs.py "$data" --images "$images"
    touch "$data/.done-$images"
fi
cargo build --release -q -p trainbench-data --example loader_bench
bench="${CARGO_TARGET_DIR:-$root/target}/release/examples/loader_bench"

rate() { sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p'; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }
printf '%-8s %18s %18s %8s\n' workers "trainbench img/s" "pytorch img/s" ratio
for w in "${counts[@]}"; do
    tb=(); pt=()
    for _ in $(seq "$rounds"); do
        tb+=("$("$bench" "$data" "$w" "$batches" | rate)")
        pt+=("$("$py" scripts/loader_bench/torch_loader.py "$data" "$w" "$batches" | rate)")
    done
    t="$(best "${tb[@]}")"; p="$(best "${pt[@]}")"
    printf '%-8s %18.1f %18.1f %7.2fx\n' "$w" "$t" "$p" "$(awk -v t="$t" -v p="$p" 'BEGIN { print t / p }')"
done
echo "host: $(nproc) logical CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
