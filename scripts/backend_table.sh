#!/usr/bin/env bash
# Step time (median), throughput (the graph's items per second: tokens for a language model, else samples) and
# achieved FLOP/s of every smoke spec (or of the specs named with --spec) on both backends, side by side, as a
# Markdown table:
# tch on the CPU and wgpu on its best adapter (lavapipe, software Vulkan, on a machine without a GPU). Uses the
# release binary with both backends (built first when needed; PROFILE=dev for the debug one). Each spec runs at batch 8 with 3 warm-up and 20
# measured iterations; extra arguments are passed to every `trainbench run` (e.g. `--set run.iterations=50`).
# Run it on an otherwise idle machine: step times of a shared CPU are noise.
# Usage: scripts/backend_table.sh [--spec FILE]... [--device-wgpu SELECTOR] [--device-tch SELECTOR] [trainbench run options...]
# e.g. scripts/backend_table.sh --spec specs/llm/smoke_gpt.toml
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
DEV_TCH=cpu
DEV_WGPU=wgpu
SPECS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --spec) SPECS+=("$2"); shift 2 ;;
        --device-tch) DEV_TCH="$2"; shift 2 ;;
        --device-wgpu) DEV_WGPU="$2"; shift 2 ;;
        *) break ;;
    esac
done
# PROFILE=dev measures the debug binary instead (dependencies at opt-level 2, trainbench's own crates unoptimised);
# TRAINBENCH_BIN=path measures that binary as it is (built with both backends), without building.
if [ -n "${TRAINBENCH_BIN:-}" ]; then
    BIN="$TRAINBENCH_BIN"
elif [ "${PROFILE:-release}" = dev ]; then
    cargo build --features tch,wgpu --quiet
    BIN="$ROOT/target/debug/trainbench"
else
    cargo build --release --features tch,wgpu --quiet
    BIN="$ROOT/target/release/trainbench"
fi
OUT="$(mktemp -d /tmp/trainbench-backend-table.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
[ ${#SPECS[@]} -gt 0 ] || SPECS=(specs/smoke/*.toml)
for spec in "${SPECS[@]}"; do
    name="$(basename "$spec" .toml)"
    for pair in "tch:$DEV_TCH" "wgpu:$DEV_WGPU"; do
        backend="${pair%%:*}"
        device="${pair#*:}"
        echo "==> $name on $backend ($device)" >&2
        "$BIN" run "$spec" --backend "$backend" --device "$device" --quiet --format json --out "$OUT/$backend" \
            --set 'sweep.batch_sizes=[8]' --set run.warmup=3 --set run.iterations=20 --set run.repeats=1 "$@" \
            >"$OUT/$name.$backend.json"
    done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys

out = sys.argv[1]
rows, devices = [], {}
for summary in sorted(glob.glob(os.path.join(out, "*.tch.json"))):
    name = os.path.basename(summary)[: -len(".tch.json")]
    cells = [name]
    for backend in ("tch", "wgpu"):
        runs = json.load(open(os.path.join(out, f"{name}.{backend}.json")))
        run = runs[0]
        result = json.load(open(run["file"]))
        metrics = result.get("metrics") or {}
        device = (result["environment"].get("device") or {})
        api = (device.get("details") or {}).get("api")
        devices[backend] = device.get("name", "?") + (f" ({api})" if api else "")
        median = metrics.get("step_time", {}).get("median_s")
        flops = (metrics.get("flops") or {}).get("achieved_flop_per_s")
        throughput = metrics.get("throughput") or {}
        items = throughput.get("items_per_s")
        unit = throughput.get("item_unit", "items")
        cells.append(f"{median * 1e3:.2f}" if median else "-")
        cells.append(f"{items:.1f} {unit}/s" if items else "-")
        cells.append(f"{flops / 1e9:.2f}" if flops else "-")
    rows.append(cells)
print(f"tch: {devices.get('tch', '?')}; wgpu: {devices.get('wgpu', '?')}. Batch 8, median of 20 steps after 3 warm-up;")
print("GFLOP/s = the analysis's training FLOPs per sample x samples/s.")
print()
print("| spec | tch step (ms) | tch throughput | tch GFLOP/s | wgpu step (ms) | wgpu throughput | wgpu GFLOP/s |"
      " wgpu / tch time |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for c in rows:
    try:
        ratio = f"{float(c[4]) / float(c[1]):.1f}x"
    except ValueError:
        ratio = "-"
    print("| " + " | ".join(c + [ratio]) + " |")
PY
