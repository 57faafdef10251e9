#!/usr/bin/env bash
# predict against run on this machine: calibrates the CPU (tch) into a profile unless one is given, then for
# each configuration below runs `trainbench predict` on that profile and `trainbench run` (tch, CPU), and prints
# a Markdown table: measured median step time, the prediction of five model variants (plain roofline at the
# calibrated peaks; + per-size GEMM/conv efficiency curves, the convolution grid and per-operation overhead;
# + memory bandwidth by working set and element-wise operations' measured cost (model 3); + the training step's
# per-node, layer and optimizer costs; + unequal products on the calibrated grid = the full model), the errors,
# their median absolute value and the worst case. The calibration includes the link between two local ranks (`calibrate --link`) for the world-size-2
# rows.
# Three sets of configurations: the tuning set (the 21 the model was tuned on, configuration by configuration), a
# held-out set, fixed before any further tuning and never to be looked at while changing the model, and the seen
# set (rows once held out, looked at since while changing the model): each set's median and worst |error| are
# reported apart, with the 80%-interval coverage (the share of references inside the full model's `interval`; and
# the same without the machine's drift, the calibration's `load.probe_drift`, which every interval carries). The sets are declared in scripts/predict_validation_configs.txt: a row keeps its
# `held-out` label only while that file is committed and unchanged (the commit is recorded in declared.txt);
# otherwise every row is measured as `undeclared`. Then the term ablations: the held-out (and tuning) error with each
# term of the model switched off (`predict --without-term`), pure `predict` calls on the stored measurements.
# Usage: scripts/predict_validation.sh [--profile P.toml] [--keep-profile P.toml] [--iterations N] [--threads T]
#   [--rounds R] [--calibrations C] [--configs FILE] [--store DIR] [--from DIR] [--allow-loaded] [--sets LIST]
#   --sets LIST: only the rows of these sets, comma-separated (e.g. `tuning,held-out`: the seen set's rows take
#   half the run); default: every row.
#   --store DIR: keep the measured results, the profile and `measured.txt` (each configuration's set, reference
#   and rounds) in DIR. --from DIR: measure nothing; predict (and ablate) against DIR's stored measurements and
#   profile.
#   --rounds: passes over the whole list (default 3); each configuration's reference is the median of its rounds'
#   references, so a stretch of time when other work slowed the machine moves one round, not the figure (the same
#   configuration's step moved by up to 30% between runs minutes apart on the shared development machine).
#   --calibrations: complete calibrations whose median per figure is the profile (`calibrate --rounds`, default 3):
#   one calibration that catches a busy minute prices everything 10-40% high on the shared development machine.
#   --keep-profile: where to keep a copy of the profile the script calibrated.
#   --allow-loaded: keep a calibration taken on a loaded machine (`calibrate --allow-loaded`): the profile is marked
#   loaded, and the table says so above its figures; without it such a calibration is refused and nothing is measured.
#   --threads: intra-op threads of both the calibration and the runs (default 1: on a shared 2-core machine a
#   second thread waits on a descheduled peer and the figures become scheduling noise).
#   FILE: lines `set spec batch [world [key=value ...]]`, set `tuning`, `seen` or `held-out` (world > 1: all-reduce over
#   `world` local ranks, `--set topology.devices_per_node=<world>`; each `key=value` one more `--set`, a device
#   mesh's keys: `topology.tensor_parallel=2`; a mesh row is judged by `predict`'s mesh step), `#` comments;
#   default: scripts/predict_validation_configs.txt.
# TRAINBENCH_BIN=path uses that binary (built with tch); else the debug binary is built (`--features tch`).
# Step times of a shared CPU are noisy: run it on an otherwise idle machine, and read each row's spread.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
PROFILE_PATH=""
ITER=12
ROUNDS=3
CALIBRATIONS=3
THREADS=1
CONFIGS=""
KEEP=""
STORE=""
FROM=""
ALLOW_LOADED=""
SETS_WANTED=""
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) PROFILE_PATH="$2"; shift 2 ;;
        --keep-profile) KEEP="$2"; shift 2 ;;
        --iterations) ITER="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --calibrations) CALIBRATIONS="$2"; shift 2 ;;
        --threads) THREADS="$2"; shift 2 ;;
        --configs) CONFIGS="$2"; shift 2 ;;
        --store) STORE="$2"; shift 2 ;;
        --from) FROM="$2"; shift 2 ;;
        --allow-loaded) ALLOW_LOADED="--allow-loaded"; shift ;;
        --sets) SETS_WANTED="$2"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -n "${TRAINBENCH_BIN:-}" ]; then
    BIN="$TRAINBENCH_BIN"
else
    cargo build --features tch --quiet
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/trainbench"
fi
if [ -n "$FROM" ]; then
    OUT="$FROM"
    [ -z "$PROFILE_PATH" ] && PROFILE_PATH="$OUT/this-machine.toml"
elif [ -n "$STORE" ]; then
    mkdir -p "$STORE"
    OUT="$(cd "$STORE" && pwd)"
else
    OUT="$(mktemp -d /tmp/trainbench-predict-validation.XXXXXX)"
    trap 'rm -rf "$OUT"' EXIT
fi
if [ -n "$FROM" ]; then
    :
elif [ -z "$PROFILE_PATH" ]; then
    PROFILE_PATH="$OUT/this-machine.toml"
    "$BIN" calibrate --backend tch --device cpu --cpu-threads "$THREADS" --cpu-clock --link --rounds "$CALIBRATIONS" \
        --out "$PROFILE_PATH" $ALLOW_LOADED >&2
    [ -n "$KEEP" ] && cp "$PROFILE_PATH" "$KEEP"
elif [ -n "$STORE" ]; then
    cp "$PROFILE_PATH" "$OUT/this-machine.toml"
    PROFILE_PATH="$OUT/this-machine.toml"
fi
# The ablations: without the calibration table (plain roofline at the best measured rate and the measured
# bandwidth); + the GEMM/conv curves, the convolution grid and the per-operation overhead (one bandwidth for every
# working set); + the
# bandwidth by working set and the element-wise operations' cost (model 3, the model before this change); + the
# training step's per-node and optimizer costs; the full model adds the grid of unequal products.
python3 - "$PROFILE_PATH" "$OUT" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# A version 2 profile stores the coefficients fitted from its whole calibration: each variant drops those (the
# `fitted` tables, last in the file) and says version 1, so that it is fitted from what it keeps when loaded.
if "\n[fitted." in text:
    text = text[: text.index("\n[fitted.") + 1]
text = re.sub(r"^version = 2$", "version = 1", text, count=1, flags=re.M)
cut = text.index("[calibration]")
peaks = text[:cut]
def without(t, *tables):
    # Each entry of the array of tables, with its keys and any sub-table of its own (an element-wise point's
    # `attention_shape`).
    for table in tables:
        entry = r"\[\[calibration\." + table + r"\]\]\s*\n(?:[a-z_]+ = [^\n]*\n)+"
        own = r"(?:\s*\[calibration\." + table + r"\.[a-z_]+\]\s*\n(?:[a-z_]+ = [^\n]*\n)+)*"
        t = re.sub(entry + own, "", t)
    return t
def write(variant, t):
    open(sys.argv[2] + "/" + variant + ".toml", "w").write(t.replace('name = "', 'name = "' + variant + '-', 1))
write("roofline", peaks)
write("overhead", without(text, "bandwidth", "elementwise", "node", "optimizer", "gemm_shapes"))
write("model3", without(text, "node", "optimizer", "gemm_shapes"))
write("steps", without(text, "gemm_shapes"))
PY
# A stored folder keeps the list it measured.
[ -n "$FROM" ] && [ -z "$CONFIGS" ] && CONFIGS="$OUT/configs.txt"
if [ -z "$CONFIGS" ]; then
    CONFIGS="$ROOT/scripts/predict_validation_configs.txt"
fi
# The declaration: a row keeps its `held-out` label only if the list was committed, unchanged, before it is
# measured (the commit is recorded in declared.txt); otherwise every row is measured as `undeclared`.
if [ -z "$FROM" ]; then
    if git -C "$ROOT" ls-files --error-unmatch "$CONFIGS" >/dev/null 2>&1 && git -C "$ROOT" diff --quiet HEAD -- "$CONFIGS"; then
        echo "declared $(git -C "$ROOT" log -1 --format='%H %cI' -- "$CONFIGS") $CONFIGS" >"$OUT/declared.txt"
    else
        echo "undeclared: $CONFIGS is not committed unchanged; its sets are not trusted" >"$OUT/declared.txt"
        echo "warning: $CONFIGS is not committed unchanged: every row is measured as undeclared" >&2
    fi
    [ "$CONFIGS" != "$OUT/configs.txt" ] && cp "$CONFIGS" "$OUT/configs.txt"
    CONFIGS="$OUT/configs.txt"
fi
UNDECLARED=0
grep -q '^undeclared' "$OUT/declared.txt" 2>/dev/null && UNDECLARED=1
# The terms switched off one at a time in the ablations (`trainbench predict --without-term`).
TERMS="roofline-compute memory-traffic elementwise-work rnn-cell-work rnn-weight-gradients bias-pass in-step-excess per-op-overhead \
gradient-sums tied-weights step-fixed first-node-cold-start optimizer fresh-pages reclaimed-pages zero-moment-sqrt exchange product-grid conv-grid conv-classes \
working-set-bandwidth backward-working-set measured-node-costs measured-optimizer"
wanted() {
    # Whether a row of set $1 is measured: every set unless --sets names some.
    [ -z "$SETS_WANTED" ] && return 0
    case ",$SETS_WANTED," in *",$1,"*) return 0 ;; esac
    return 1
}
predict_one() {
    # One prediction into BASE.json; one that fails leaves its first error line in BASE.err (the table marks the
    # row failed and names it) instead of stopping the script.
    local base=$1; shift
    if ! "$BIN" predict "$@" --format json >"$base.json" 2>"$base.err"; then
        rm -f "$base.json"
        echo "prediction failed: $(grep -m1 -v '^warning' "$base.err" || echo "exit status")" >&2
    fi
}
predict_all() {
    # The predictions of every configuration: the five profile variants, then each term switched off.
    local i=0
    : >"$OUT/index.txt"
    while read -r set spec batch world keys; do
        [ -z "$spec" ] && continue
        case "$set" in '#'*) continue ;; esac
        wanted "$set" || continue
        [ "$UNDECLARED" = 1 ] && set=undeclared
        i=$((i + 1))
        local sets=(--set "sweep.batch_sizes=[$batch]" --set "sweep.precisions=[\"fp32\"]" --set "sweep.topologies=[]")
        if [ -n "${world:-}" ] && [ "$world" -gt 1 ]; then
            sets+=(--set "topology.devices_per_node=$world" --set 'topology.strategy="all-reduce"')
        fi
        for kv in ${keys:-}; do sets+=(--set "$kv"); done
        for variant in roofline overhead model3 steps full; do
            local prof="$PROFILE_PATH"
            [ "$variant" != full ] && prof="$OUT/$variant.toml"
            predict_one "$OUT/$i.$variant" "$spec" --hardware "$prof" "${sets[@]}"
        done
        for term in $TERMS; do
            predict_one "$OUT/$i.without-$term" "$spec" --hardware "$PROFILE_PATH" --without-term "$term" "${sets[@]}"
        done
        echo "$i $set $spec $batch ${world:-1} ${keys:-}" >>"$OUT/index.txt"
    done <"$CONFIGS"
}
predict_all
[ -n "$FROM" ] && ROUNDS=0
for round in $(seq 1 "$ROUNDS"); do
# The machine's 1-minute load average as each round starts: a shared machine's speed moves between rounds.
echo "$round $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo unknown)" >>"$OUT/load.txt"
i=0
while read -r set spec batch world keys; do
    [ -z "$spec" ] && continue
    case "$set" in '#'*) continue ;; esac
    wanted "$set" || continue
    [ "$UNDECLARED" = 1 ] && set=undeclared
    i=$((i + 1))
    sets=(--set "sweep.batch_sizes=[$batch]" --set "sweep.precisions=[\"fp32\"]" --set "sweep.topologies=[]")
    if [ -n "${world:-}" ] && [ "$world" -gt 1 ]; then
        sets+=(--set "topology.devices_per_node=$world" --set 'topology.strategy="all-reduce"')
    fi
    for kv in ${keys:-}; do sets+=(--set "$kv"); done
    echo "==> round $round: $set $spec batch $batch ${world:+world $world} ${keys:-}" >&2
    "$BIN" run "$spec" --backend tch --device cpu --quiet --format json --out "$OUT/results-$i-$round" "${sets[@]}" \
        --set run.warmup=5 --set "run.iterations=$ITER" --set run.repeats=1 --set "run.cpu_threads=$THREADS" \
        >"$OUT/$i.run.$round.json"
done <"$CONFIGS"
done
[ -z "$FROM" ] && echo "$ROUNDS" >"$OUT/rounds.txt"
ROUNDS="$(cat "$OUT/rounds.txt")"
python3 - "$OUT" "$PROFILE_PATH" "$THREADS" "$ROUNDS" "$TERMS" <<'PY'
import json, math, os, statistics, sys
out, profile, threads, rounds, terms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split()
VARIANTS = ("roofline", "overhead", "model3", "steps", "full")
SETS = ("tuning", "seen", "held-out", "undeclared")
rows, phase_rows, failures = [], [], []
errs = {(s, v): [] for s in SETS for v in VARIANTS + tuple("without-" + t for t in terms)}
round_errs = {(s, r): [] for s in SETS for r in range(rounds)}
inside = {s: [] for s in SETS}
# The same intervals without the machine's drift (the calibration's `load.probe_drift`, added to every interval in
# quadrature): what the drift adds to the coverage.
inside_steady = {s: [] for s in SETS}
# The same intervals without the model's own error where it was tuned (each prediction's `model_error`, added in
# quadrature): what that sigma adds to the coverage.
inside_unmodelled = {s: [] for s in SETS}
model_error = 0.0
Z80 = 1.281551565545


def held_without(step, interval, sigma, reference):
    """Whether `reference` lies inside the interval around `step` with the whole-step `sigma` taken out of its
    width (the widths add in quadrature)."""
    w = (max(0.0, (interval["log_half_width"] / Z80) ** 2 - sigma**2)) ** 0.5 * Z80
    return step * math.exp(-w) <= reference <= step * math.exp(w)


try:
    import tomllib
    drift = ((tomllib.load(open(sys.argv[2], "rb")).get("calibration") or {}).get("load") or {}).get("probe_drift") or 0.0
except (OSError, ValueError):
    drift = 0.0


def reference(result, world):
    """What the step costs with a core to itself (one intra-op thread), bounded from above twice: by its CPU time
    (mean step x busy; too high for sub-millisecond steps, where the process's other threads and the run's setup
    add CPU time) and by its median wall time (too high for steps longer than a scheduler slice on a loaded
    machine); the smaller bound is taken. With several ranks the exchange is waiting, not CPU time (Open MPI's
    oversubscribed ranks yield while they wait), and the link was calibrated on the wall clock: those rows are
    taken against the median wall step (as the link: a descheduled rank makes the other wait in a few steps)."""
    m = result["metrics"]
    st = m["step_time"]
    busy = (m.get("cpu") or {}).get("busy_cores") or 1.0
    return (min(st["mean_s"] * busy, st["median_s"]) if world == "1" else st["median_s"]), busy


SHORT = {"tensor_parallel": "tp", "pipeline_parallel": "pp", "sequence_parallel": "sp", "pipeline_schedule": "",
         "microbatches": "mb", "virtual_stages": "v"}


def short(kv):
    """A row's `key=value` override as a run id names it: `topology.pipeline_parallel=2` -> `pp2`."""
    key, value = kv.split("=", 1)
    key, value = key.split(".")[-1], value.strip('"')
    return SHORT.get(key, key) + ("" if value == "true" else value)


def result_file(i, r):
    run = json.load(open(f"{out}/{i}.run.{r}.json"))[0]
    path = run["file"]
    if not os.path.exists(path):
        # A stored folder moved since: the same file under this folder.
        path = os.path.join(out, path[path.index(f"results-{i}-{r}"):])
    return json.load(open(path))


measured_lines = []
for line in open(out + "/index.txt"):
    i, set_, spec, batch, world, *keys = line.split()
    # A mesh row is named by its layout (`topology.tensor_parallel=2` -> `-tp2`).
    layout = "".join("-" + short(k) for k in keys)
    measured = []
    for r in range(1, rounds + 1):
        result = result_file(i, r)
        ref, busy = reference(result, world)
        measured.append((ref, busy, result["metrics"]))
    # The round of the median reference (the lower middle one for an even count): its figures and phases.
    ordered = sorted(measured, key=lambda x: x[0])
    cpu_step, busy, m = ordered[(len(ordered) - 1) // 2]
    measured_lines.append(f"{i} {set_} {spec} {batch} {world} {cpu_step:.9e} " + " ".join(f"{x[0]:.9e}" for x in measured))
    st = m["step_time"]
    name = spec.split("/")[-1][:-5] + layout
    spread = f"{ordered[0][0] * 1e3:.2f}-{ordered[-1][0] * 1e3:.2f}"
    cells = [set_, name, batch, world, f"{st['median_s'] * 1e3:.2f}", f"{busy:.2f}", f"{cpu_step * 1e3:.2f}", spread]
    failed_here = [v for v in VARIANTS + tuple("without-" + t for t in terms) if not os.path.exists(f"{out}/{i}.{v}.json")]
    if failed_here:
        why = open(f"{out}/{i}.{failed_here[0]}.err").read().strip().splitlines()
        failures.append(f"{set_} {name} batch {batch} world {world}: {', '.join(failed_here)}: {why[0] if why else 'no message'}")
        rows.append(cells + ["failed"] * (2 * len(VARIANTS) + 2))
        continue
    for v in VARIANTS + tuple("without-" + t for t in terms):
        p = json.load(open(f"{out}/{i}.{v}.json"))["predictions"][0]
        if p.get("mesh"):
            # A device mesh: its step (the busiest stage's compute, the bubble, the exposed collectives), not the
            # one-rank step of its micro-batch.
            p = dict(p, step_time_s=p["mesh"]["step_time_s"], interval=p["mesh"].get("interval"))
        e = (p["step_time_s"] - cpu_step) / cpu_step
        errs[(set_, v)].append(abs(e))
        if v in VARIANTS:
            cells += [f"{p['step_time_s'] * 1e3:.2f}", f"{100 * e:+.0f}%"]
        if v == "full":
            interval = p.get("interval")
            if interval:
                held = interval["low_s"] <= cpu_step <= interval["high_s"]
                inside[set_].append(held)
                model_error = p.get("model_error") or 0.0
                inside_steady[set_].append(held_without(p["step_time_s"], interval, drift, cpu_step))
                inside_unmodelled[set_].append(held_without(p["step_time_s"], interval, model_error, cpu_step))
                cells += [f"{interval['low_s'] * 1e3:.2f}-{interval['high_s'] * 1e3:.2f}", "yes" if held else "NO"]
            else:
                cells += ["-", "-"]
            for r, (ref, _, _) in enumerate(measured):
                round_errs[(set_, r)].append(abs((p["step_time_s"] - ref) / ref))
            ph = m["phases"]
            pr = p["phases"]
            phase_rows.append([set_, name, batch, world] + [
                f"{ph[k]['mean_s'] * (busy if world == '1' else 1.0) * 1e3:.2f} / {pr[k + '_s'] * 1e3:.2f}" for k in ("forward", "backward", "optimizer", "comm")
            ])
    rows.append(cells)
if failures:
    print("Predictions that failed (each row counts in no figure below; a held-out row here is a failure of the model):")
    for f in failures:
        print(f"- {f}")
    print()
open(out + "/measured.txt", "w").write("# i set spec batch world reference_s per-round references (s)\n" + "\n".join(measured_lines) + "\n")


def summary(e):
    return f"median |error| {100 * statistics.median(e):.1f}%, worst {100 * max(e):.1f}% over {len(e)}" if e else "no configurations"


try:
    import tomllib
    load = (tomllib.load(open(profile, "rb")).get("calibration") or {}).get("load") or {}
except (OSError, ValueError):
    load = {}
if load.get("loaded"):
    print("WARNING: the profile was calibrated on a loaded machine (" + "; ".join(load.get("exceeded", [])) + "), kept")
    print("with --allow-loaded: these are not a quiet machine's figures.")
    print()
print(f"Profile: {profile}; intra-op threads: {threads}. Measured: `trainbench run` (tch, CPU, fp32); wall = median")
print("step; busy = process CPU time / wall time over the run; reference = the smaller of mean step x busy and the")
print("median step, the step's cost with a core to itself, which the errors are taken against (world > 1: the median")
print(f"wall step, the exchange being waiting, not CPU time); the median over {rounds} rounds over the whole list, with the")
print("range of the rounds' references; wall and busy are those of the median round. Predicted: `trainbench predict` on the profile")
print("(roofline: calibrated peak and bandwidth only; + curves: per-size GEMM/conv rates, the convolution grid and")
print("per-op overhead, one bandwidth for every size; model 3: + bandwidth by working set and element-wise operations'")
print("cost; + steps: the training step's per-node, layer and optimizer costs; full: + unequal products on the grid).")
print()
print("| set | spec | batch | world | wall (ms) | busy | reference (ms) | rounds (ms) | roofline (ms) | error | + curves (ms) | error | model 3 (ms) | error | + steps (ms) | error | full model (ms) | error | 80% interval (ms) | inside |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for c in rows:
    print("| " + " | ".join(str(x) for x in c) + " |")
print()
try:
    print("Sets: " + open(out + "/declared.txt").read().strip())
except OSError:
    print("Sets: no record of the list's declaration (measured before the script checked it)")
print()
for s in SETS:
    if not errs[(s, "full")]:
        continue
    print(f"{s} set:")
    k = inside[s]
    if k:
        share = sum(k) / len(k)
        verdict = "" if share >= 0.8 else " -- BELOW 80%: the intervals are too narrow, a failure of the model"
        print(f"- 80%-interval coverage (full model): {sum(k)} of {len(k)} inside, {100 * share:.0f}%{verdict}")
        k0 = inside_steady[s]
        print(f"- the same without the machine's drift ({drift:.3f}): {sum(k0)} of {len(k0)} inside, {100 * sum(k0) / len(k0):.0f}%")
        k1 = inside_unmodelled[s]
        print(f"- the same without the model's own error ({model_error:.3f}): {sum(k1)} of {len(k1)} inside, {100 * sum(k1) / len(k1):.0f}%")
    for v, name in (("roofline", "roofline at calibrated peaks"), ("overhead", "+ efficiency curves and per-op overhead"), ("model3", "+ bandwidth by working set and element-wise cost (model 3)"), ("steps", "+ per-node and optimizer costs of the training step"), ("full", "+ unequal products on the grid (full model)")):
        print(f"- {name}: {summary(errs[(s, v)])}")
    for r in range(rounds):
        print(f"- full model against round {r + 1} alone: {summary(round_errs[(s, r)])}")
    print()
try:
    loads = [line.split() for line in open(out + "/load.txt")]
    print("Load average (1 minute) as each round started: " + ", ".join(f"round {r}: {l}" for r, l in loads))
    print()
except OSError:
    pass
print("Term ablations (`predict --without-term TERM` on the same profile, against the same references): median / worst")
print("|error| per set; a term helps where switching it off makes the held-out error worse.")
print()
print("| without | held-out median | held-out worst | tuning median | tuning worst |")
print("|---|---:|---:|---:|---:|")
for v in ("full",) + tuple("without-" + t for t in terms):
    cells = [v if v != "full" else "(nothing: full model)"]
    for s in ("held-out", "tuning"):
        e = errs[(s, v)] or errs[("undeclared", v)]
        cells += [f"{100 * statistics.median(e):.1f}%", f"{100 * max(e):.1f}%"] if e else ["-", "-"]
    print("| " + " | ".join(cells) + " |")
print()
print("Phases, measured CPU time (world > 1: wall time) / full model (ms):")
print()
print("| set | spec | batch | world | forward | backward | optimizer | comm |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for c in phase_rows:
    print("| " + " | ".join(str(x) for x in c) + " |")
PY
