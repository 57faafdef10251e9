# Sourced by history_real_detect.sh and history_aa_gates.sh: the trainbench to run (built with the tch backend,
# or $TRAINBENCH_BIN), the core every run is pinned to, and a CPU load on that core that the scripts start and
# stop themselves.
#
# PIN chooses how runs share the machine:
# - `rt` (the default where `chrt` may set real-time priorities, i.e. as root): each run pinned to the last
#   core at real-time priority 1, so ordinary processes (other builds, other users) never take its core while it
#   runs; the load at priority 2 on that core, so it takes exactly its duty cycle from the run and the slowdown
#   is the load's, not the neighbours';
# - `pinned`: the same pinning at ordinary priority (neighbours share the core and add their noise);
# - `none`: runs as a user would start them, unpinned (the load is still pinned to the last core).
# Pinning changes what a run reports as the CPU's logical cores (the machine identity of a CPU series), so every
# run of one script uses the same PIN.

HR_DIR="$ROOT/scripts/history_real"
HR_SPEC="$HR_DIR/mlp.toml"
HR_CORE="$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')"
if [[ -z "${PIN:-}" ]]; then
    if chrt -f 1 true 2>/dev/null && command -v taskset > /dev/null; then PIN=rt; else PIN=pinned; fi
fi
case "$PIN" in
    rt) HR_RUN=(chrt -f 1 taskset -c "$HR_CORE") HR_LOAD=(chrt -f 2 taskset -c "$HR_CORE") ;;
    pinned) HR_RUN=(taskset -c "$HR_CORE") HR_LOAD=(taskset -c "$HR_CORE") ;;
    none) HR_RUN=() HR_LOAD=(taskset -c "$HR_CORE") ;;
    *) echo "PIN must be rt, pinned or none, not \`$PIN\`" >&2; exit 2 ;;
esac

# The trainbench binary: $TRAINBENCH_BIN, else a build with the tch backend (PROFILE=dev for the quicker build).
hr_build() {
    if [[ -n "${TRAINBENCH_BIN:-}" ]]; then
        TB="$TRAINBENCH_BIN"
    else
        local profile="${PROFILE:-release}" dir
        cargo build --quiet --profile "$profile" --features tch
        dir="$profile"; [[ "$profile" == dev ]] && dir=debug
        TB="${CARGO_TARGET_DIR:-$ROOT/target}/$dir/trainbench"
    fi
}

# hr_run OUT [ARG...]: one `trainbench run` of the spec into OUT, pinned as PIN says; ARGs go to `run`.
hr_run() {
    local out="$1"
    shift
    "${HR_RUN[@]}" "$TB" run "$HR_SPEC" --quiet --overwrite --out "$out" "$@" > /dev/null
}

HR_LOAD_PID=""
# hr_load_start DUTY PERIOD_S: a busy loop on the runs' core, spinning DUTY of every PERIOD_S.
hr_load_start() {
    "${HR_LOAD[@]}" python3 "$HR_DIR/busy.py" "$1" "$2" &
    HR_LOAD_PID=$!
    sleep 1
}

hr_load_stop() {
    if [[ -n "$HR_LOAD_PID" ]]; then
        kill "$HR_LOAD_PID" 2>/dev/null || true
        wait "$HR_LOAD_PID" 2>/dev/null || true
        HR_LOAD_PID=""
    fi
}

# What else the machine was doing: the load average and the runnable processes.
hr_machine_load() {
    echo "machine: $(nproc) core(s), runs pinned to core $HR_CORE (PIN=$PIN); $(uptime | sed 's/.*load/load/')"
}
