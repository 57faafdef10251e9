#!/usr/bin/env bash
# Long runs in bounded memory and time: runs the mock MLP 8-8-2 (batch 2) at 1e4, 1e5, 1e6 and 1e7 measured
# iterations, the tch MLP at 1e4 and 1e6, and a 1e9-iteration mock run stopped by SIGINT after 10 s, and prints
# for each the peak resident memory of the whole process, the seconds from the end of the last measured step
# (the result's environment.finished_at) to the result on disk (its modification time), the result's size, and
# the steps seen and kept. Flat beyond the step log's cap (10,000 kept steps) is the goal.
# Usage: scripts/long_runs.sh [--quick]   (--quick: the mock at 1e4 and 1e6 only). Release build, tch and mpi.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
cargo build --release --features tch,mpi -q
TB="${CARGO_TARGET_DIR:-$ROOT/target}/release/trainbench"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

spec() { # backend iterations
    cat > "$WORK/long-$1-$2.toml" <<TOML
version = 1
name = "long-$1-$2"
[model]
family = "mlp"
inputs = 8
hidden = [8]
classes = 2
[topology]
backend = "$1"
device = "cpu"
[sweep]
batch_sizes = [2]
[run]
warmup = 1
iterations = $2
repeats = 1
TOML
    echo "$WORK/long-$1-$2.toml"
}

# One row: label, spec, and the seconds to wait before SIGINT (0: let it finish).
row() {
    local label=$1 file=$2 stop_after=$3 out="$WORK/out-$RANDOM" rss
    if [ "$stop_after" = 0 ]; then
        /usr/bin/time -f '%M' -o "$WORK/rss" "$TB" run "$file" --out "$out" --quiet >/dev/null 2>"$WORK/err" || true
    else
        /usr/bin/time -f '%M' -o "$WORK/rss" "$TB" run "$file" --out "$out" --quiet >/dev/null 2>"$WORK/err" &
        sleep "$stop_after"
        pkill -INT -f "trainbench.*run $file" || true
        wait || true
    fi
    rss=$(tail -n 1 "$WORK/rss")
    python3 - "$label" "$out" "$rss" <<'PY'
import glob, json, os, sys, datetime
label, out, rss = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [f for f in glob.glob(f"{out}/*/*.json") if not f.endswith("index.json")]
if not files:
    print(f"| {label} | {rss / 1024:.0f} MB | no result | | | |")
    sys.exit()
path = files[0]
r = json.load(open(path))
end = datetime.datetime.fromisoformat(r["environment"]["finished_at"].replace("Z", "+00:00")).timestamp()
m = r.get("metrics") or {}
seen, kept = m.get("samples_seen"), m.get("samples_kept")
print(f"| {label} | {rss / 1024:.0f} MB | {os.path.getmtime(path) - end:.2f} s | {os.path.getsize(path) / 1e6:.2f} MB "
      f"| {r['outcome']['status']} | {seen} / {kept} |")
PY
}

echo "| run | peak RSS | last step -> result on disk | result size | status | steps seen / kept |"
echo "|---|---:|---:|---:|---|---:|"
if [ "$QUICK" = 1 ]; then
    for n in 10000 1000000; do row "mock $n" "$(spec mock $n)" 0; done
    exit 0
fi
for n in 10000 100000 1000000 10000000; do row "mock $n" "$(spec mock $n)" 0; done
for n in 10000 1000000; do row "tch $n" "$(spec tch $n)" 0; done
row "mock 1e9, SIGINT after 10 s" "$(spec mock 1000000000)" 10
