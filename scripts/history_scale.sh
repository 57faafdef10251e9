#!/usr/bin/env bash
# Scale of the results history (figures in docs/measurements.md): records N results (default 100,000 = 1,000
# configurations x 100 points) into a fresh SQLite store in one `history record` call, then times
# `history list`, `history show` of one series, and `history detect` over every series and over the step-time
# series alone (one per configuration); prints the store's size per result after a WAL checkpoint and after
# VACUUM, and how many of the planted steps detection found.
#
# The results are real mock-backend runs (`trainbench run --backend mock`, done here) multiplied into many
# configurations and points by examples/history_scale.rs: each one is a complete result that passes the same
# integrity check `history record` applies to any result. Every tenth configuration carries a 10% slowdown
# from 60% of its points on.
#
# Usage: scripts/history_scale.sh [--results N] [--points P] [--work DIR]
#   --results N   results to record (default 100000); configurations = N / P
#   --points P    points per series (default 100)
#   --work DIR    keep the results and the store in DIR (default: a temporary folder in /dev/shm when there is
#                 one, removed at the end: on a shared disk reading 100,000 files measures the disk, not trainbench)
# PROFILE=dev uses the unoptimised build (quicker to build, much slower to run: not for the figures).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RESULTS=100000
POINTS=100
WORK=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --results) RESULTS="$2"; shift 2 ;;
        --points) POINTS="$2"; shift 2 ;;
        --work) WORK="$2"; shift 2 ;;
        *) echo "usage: $0 [--results N] [--points P] [--work DIR]" >&2; exit 2 ;;
    esac
done
CONFIGS=$((RESULTS / POINTS))
if ((CONFIGS < 1)); then
    echo "--results must be at least --points ($POINTS)" >&2
    exit 2
fi
RESULTS=$((CONFIGS * POINTS))
if [[ -z "$WORK" ]]; then
    WORK="$(mktemp -d -p "$([[ -d /dev/shm ]] && echo /dev/shm || echo "${TMPDIR:-/tmp}")")"
    trap 'rm -rf "$WORK"' EXIT
else
    rm -rf "$WORK/real" "$WORK/generated" "$WORK"/history.sqlite*
    mkdir -p "$WORK"
fi

PROFILE="${PROFILE:-release}"
PROFILE_DIR=$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")
echo "==> building trainbench and the generator (profile $PROFILE)" >&2
cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --profile "$PROFILE" --bin trainbench --bin trainbench-engine \
    --example history_scale
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE_DIR"
TB="$TARGET/trainbench"
GEN="$TARGET/examples/history_scale"
STORE="$WORK/history.sqlite"

# Milliseconds since some fixed instant.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# `timed NAME CMD...`: run CMD with its output to $WORK/NAME.out, keep its wall time in ms in ELAPSED, its CPU
# time (user + system) in CPU and its peak resident memory in RSS_MIB, and its exit status in STATUS.
timed() {
    local name="$1" start
    shift
    start=$(now_ms)
    STATUS=0
    /usr/bin/time -f "%U %S %M" -o "$WORK/$name.time" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || STATUS=$?
    ELAPSED=$(($(now_ms) - start))
    read -r CPU RSS_MIB < <(tail -n1 "$WORK/$name.time" | awk '{ printf "%.2f %d\n", $1 + $2, $3 / 1024 }')
}
fail() {
    echo "$1 failed (exit $STATUS):" >&2
    cat "$WORK/$2.err" >&2
    exit 1
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); load:$(uptime | sed 's/.*load average://')"
echo "results: $RESULTS = $CONFIGS configurations x $POINTS points; work folder $WORK"

echo "==> real runs on the mock backend" >&2
for spec in mlp transformer_tiny; do
    "$TB" run "$ROOT/specs/smoke/$spec.toml" --backend mock --set run.iterations=200 --set run.repeats=1 \
        --out "$WORK/real" --quiet >/dev/null
done
echo "real runs: $(find "$WORK/real" -name '*.r0.json' | wc -l) results, $(python3 -c "
import json, glob, sys
files = glob.glob(sys.argv[1] + '/*/*.r0.json')
print(sum(len(json.load(open(f))['metrics']['step_times_s']) for f in files) // len(files), end='')
" "$WORK/real") steps each"

timed generate "$GEN" "$WORK/real" "$WORK/generated" "$CONFIGS" "$POINTS"
[[ $STATUS -eq 0 ]] || fail "the generator" generate
cat "$WORK/generate.out"
JSON_BYTES=$(du -sb "$WORK/generated" | cut -f1)
echo "generated in $((ELAPSED / 1000)).$(printf %03d $((ELAPSED % 1000))) s; result files $((JSON_BYTES / RESULTS)) bytes each on disk"

echo "==> history record" >&2
timed record "$TB" history record "$WORK/generated" --store "$STORE" --revision scale
[[ $STATUS -eq 0 ]] || fail "history record" record
RECORD_MS=$ELAPSED RECORD_CPU=$CPU RECORD_RSS=$RSS_MIB
cat "$WORK/record.out"

# Store size: as written (WAL checkpointed into the file), then compacted.
read -r WRITTEN STEPS_BYTES VACUUMED RUNS < <(python3 - "$STORE" <<'PY'
import os, sqlite3, sys
path = sys.argv[1]
db = sqlite3.connect(path)
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
size = lambda: sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))
written = size()
steps, runs = db.execute("SELECT SUM(LENGTH(steps)), COUNT(*) FROM runs").fetchone()
db.execute("VACUUM")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print(written, steps, size(), runs)
PY
)

echo "==> history list, show, detect" >&2
timed list "$TB" history list --store "$STORE" --format json
[[ $STATUS -eq 0 ]] || fail "history list" list
LIST_MS=$ELAPSED LIST_CPU=$CPU
read -r SERIES STEP_SERIES SHOWN < <(python3 -c "
import json, sys
series = json.load(open(sys.argv[1]))['series']
step = [s['name'] for s in series if s['metric'] == 'step_time']
print(len(series), len(step), step[0])
" "$WORK/list.out")
SHOW_TIMES=()
for _ in 1 2 3 4 5; do
    timed show "$TB" history show "$SHOWN" --store "$STORE"
    [[ $STATUS -eq 0 ]] || fail "history show" show
    SHOW_TIMES+=("$ELAPSED")
done
SHOW_MS=$(printf '%s\n' "${SHOW_TIMES[@]}" | sort -n | sed -n 3p)
timed detect "$TB" history detect --store "$STORE"
[[ $STATUS -le 1 ]] || fail "history detect" detect
DETECT_MS=$ELAPSED DETECT_CPU=$CPU
timed detect_step "$TB" history detect :step_time --store "$STORE" --format json
[[ $STATUS -le 1 ]] || fail "history detect :step_time" detect_step
DETECT_STEP_MS=$ELAPSED DETECT_STEP_CPU=$CPU
FOUND=$(python3 - "$WORK/detect_step.out" "$POINTS" <<'PY'
import json, re, sys
series = json.load(open(sys.argv[1]))["series"]
truth = int(sys.argv[2]) * 3 // 5
planted = found = exact = false_alarms = 0
for s in series:
    config = int(re.search(r"-s(\d{4})\.", s["name"]).group(1))
    changes = s["detection"].get("changes", [])
    if config % 10 == 0:
        planted += 1
        near = [c for c in changes if abs(c["first_point"]["index"] - truth) <= 1]
        found += bool(near)
        exact += any(c["first_point"]["index"] == truth for c in near)
        false_alarms += len(changes) - bool(near)
    else:
        false_alarms += len(changes)
print(f"{found} of {planted} planted steps found within one point ({exact} exactly); "
      f"{false_alarms} other change point(s) in {len(series)} step-time series")
PY
)

seconds() { echo "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }
verdict() { if python3 -c "import sys; sys.exit(0 if $1 else 1)"; then echo met; else echo MISSED; fi; }
RATE=$(python3 -c "print(round($RESULTS * 1000 / max($RECORD_MS, 1)))")
PER_RESULT=$((VACUUMED / RESULTS))
echo
echo "record   $RESULTS results in $(seconds "$RECORD_MS") s: $RATE results/s (goal >= 2000: $(verdict "$RATE >= 2000"));" \
    "CPU $RECORD_CPU s, peak RSS $RECORD_RSS MiB"
echo "store    $((WRITTEN / RESULTS)) bytes/result as written, $PER_RESULT bytes/result after VACUUM" \
    "(goal < 20 KB: $(verdict "$PER_RESULT < 20480")); raw steps $((STEPS_BYTES / RUNS)) bytes/result;" \
    "$RUNS runs, $((VACUUMED / 1048576)) MiB"
echo "list     $SERIES series in $(seconds "$LIST_MS") s (CPU $LIST_CPU s)"
echo "show     one series ($POINTS points) in $(seconds "$SHOW_MS") s, median of 5: ${SHOW_TIMES[*]} ms" \
    "(goal < 0.050 s: $(verdict "$SHOW_MS < 50"))"
echo "detect   all $SERIES series in $(seconds "$DETECT_MS") s (CPU $DETECT_CPU s)"
echo "detect   the $STEP_SERIES step-time series ($POINTS points each) in $(seconds "$DETECT_STEP_MS") s" \
    "(CPU $DETECT_STEP_CPU s)" \
    "(goal < 5 s for 1000 series: $(verdict "$DETECT_STEP_MS < 5000"))"
echo "detect   $FOUND"
echo "load:$(uptime | sed 's/.*load average://')"
