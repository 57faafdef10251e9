"""The figures of scripts/gpu_check.sh, one line per run, from the result JSONs under OUT/runs: throughput per
step and free-running, device-time phases, the TF32 switches and the peak FLOP utilisation is measured against,
the memory breakdown against the allocator peak and the analysis's estimate, the NVML figures and which GPU they
were sampled on, and the outcome. Every result is also appended to OUT/results.jsonl; PyTorch eager's lines in
OUT/parity.txt are set against trainbench's run of the same batch and precision.

Predicted against measured: each result's own prediction (the runs are started with `--hardware` on the
check's fresh calibration, OUT/calibrated.toml) beside its measured median step, and, with TRAINBENCH_BIN set,
`trainbench predict` of the same configuration on the published profile of the same GPU
(validation/profiles/<gpu>-published.toml, found by the device's name); then each profile's median |error| and
80%-interval coverage over the runs. Error = predicted / measured - 1.

Usage: [TRAINBENCH_BIN=path] gpu_check_summary.py OUT

The runs a check brought back stay a held-out set after the GPU machine is gone: with --judge, each result of a
stored results.jsonl (docs/gpu-runs/) is predicted again on each given profile (any profile: a published one, a
calibrated one kept beside the runs, one changed since) and set against its measured median step, with the
median |error|, the worst and the 80%-interval coverage per profile. Nothing is fitted to them.

       TRAINBENCH_BIN=path gpu_check_summary.py --judge RESULTS.jsonl --hardware PROFILE [--hardware PROFILE ...]
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mib(b):
    return "-" if b is None else f"{b / 2**20:.0f} MiB"


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def run_line(step, r):
    plan, m = r["plan"], r.get("metrics") or {}
    outcome = r.get("outcome")
    outcome = outcome if isinstance(outcome, str) else json.dumps(outcome)[:300]
    line = f"[{step}] {plan['id']} on {plan.get('device')}: {outcome}"
    if not m:
        return line
    tp, st, ph, fl = m.get("throughput", {}), m.get("step_time", {}), m.get("phases", {}), m.get("flops", {})
    line += (f"\n    per step {tp.get('samples_per_s', 0):.1f} samples/s, median {1e3 * st.get('median_s', 0):.2f} ms"
             f" (p95 {1e3 * st.get('p95_s', 0):.2f})")
    fr = tp.get("free_running")
    if fr:
        line += f"; free-running {fr['samples_per_s']:.1f} samples/s over {fr['steps']} steps (x{fr['ratio_to_per_step']:.3f})"
    shares = " ".join(f"{k} {1e3 * (ph.get(k) or {}).get('mean_s', 0):.2f}" for k in
                      ("data_copy", "forward", "backward", "comm", "optimizer", "other"))
    line += f"\n    phases (ms, synchronised={ph.get('synchronised')}): {shares}"
    line += (f"\n    FLOP utilisation {pct(fl.get('fraction'))} of {fl.get('peak_flop_per_s')} ({fl.get('peak_source')}); "
             f"tf32 {fl.get('tf32')}")
    mem = m.get("memory", {})
    me, est = mem.get("measured", {}), mem.get("estimate") or {}
    line += (f"\n    memory: weights {mib(me.get('weights_bytes'))}, gradients {mib(me.get('gradients_bytes'))}, "
             f"state {mib(me.get('optimizer_state_bytes'))}, activations {mib(me.get('activations_bytes'))}, "
             f"workspace {mib(me.get('workspace_bytes'))}; peak {mib(me.get('peak_allocated_bytes'))} "
             f"(parts/peak {me.get('breakdown_to_peak')}), reserved {mib(me.get('reserved_bytes'))}; "
             f"estimate {mib(est.get('total_bytes'))} (activations {mib(est.get('activations_bytes'))}), "
             f"error {pct(mem.get('estimate_error'))}")
    gpu, power = m.get("gpu", {}), m.get("power", {})
    details = ((r.get("environment") or {}).get("device") or {}).get("details", {})
    if "utilization_mean_percent" in gpu:
        line += (f"\n    NVML device {gpu.get('device_index')} (CUDA pci {details.get('pci_bus_id')}): "
                 f"util {gpu['utilization_mean_percent']:.0f}%, memory used max {mib(gpu.get('memory_used_max_bytes'))}, "
                 f"process {mib(gpu.get('process_memory_max_bytes'))}, SM {gpu.get('sm_clock_mean_mhz', 0):.0f} MHz")
        if gpu.get("scope"):
            line += f" [{gpu['scope']}]"
    else:
        line += f"\n    NVML: {json.dumps(gpu)[:200]}"
    if "mean_power_w" in power:
        line += (f"; power {power['mean_power_w']:.0f} W ({power['method']}), "
                 f"{power['energy_per_sample_j']:.3f} J/sample")
    inv = (r.get("environment") or {}).get("gpus", {})
    if isinstance(inv, dict) and inv.get("devices"):
        line += "\n    NVML inventory: " + ", ".join(
            f"{d['index']}={d.get('pci_bus_id')} {d['name']}" for d in inv["devices"])
        line += f"; driver {inv.get('driver_version')} (CUDA {inv.get('cuda_driver_version')})"
    return line


def published_profile(r):
    """The published profile of the run's GPU (validation/profiles/<gpu>-published.toml), or None."""
    name = (((r.get("environment") or {}).get("device") or {}).get("name") or "").lower()
    for path in sorted(glob.glob(os.path.join(ROOT, "validation", "profiles", "*-published.toml"))):
        gpu = os.path.basename(path)[: -len("-published.toml")]
        if gpu and gpu in name:
            return path
    return None


def predict_on(bin_path, profile, r):
    """`trainbench predict` of result r's configuration on `profile`: (step_s, low_s, high_s), or a reason."""
    plan = r["plan"]
    spec = (r.get("environment") or {}).get("spec_canonical")
    if not spec:
        return "the result keeps no canonical spec"
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(spec)
        path = f.name
    try:
        p = subprocess.run(
            [bin_path, "predict", path, "--hardware", profile, "--format", "json",
             "--set", f"sweep.batch_sizes=[{plan['batch_size']}]", "--set", f"sweep.precisions=[\"{plan['precision']}\"]"],
            capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            return (p.stderr.strip().splitlines() or ["no message"])[0][:200]
        pred = json.loads(p.stdout)["predictions"][0]
        iv = pred.get("interval") or {}
        return pred["step_time_s"], iv.get("low_s"), iv.get("high_s")
    except (OSError, ValueError, KeyError, IndexError, subprocess.TimeoutExpired) as e:
        return f"predict failed: {e}"
    finally:
        os.unlink(path)


def judged(label, measured_s, predicted):
    """One prediction against the measured step: the text, and (|error|, inside) for the totals."""
    if isinstance(predicted, str):
        return f"{label}: not predicted ({predicted})", None
    step, low, high = predicted
    err = step / measured_s - 1
    inside = low is not None and high is not None and low <= measured_s <= high
    iv = f"80% {1e3 * low:.2f}-{1e3 * high:.2f}, {'inside' if inside else 'OUTSIDE'}" if low is not None else "no interval"
    return f"{label}: {1e3 * step:.2f} ms ({iv}), error {100 * err:+.1f}%", (abs(err), inside)


def predictions(r, bin_path, totals):
    """The lines setting r's measured median step against its predictions; adds to `totals` by profile."""
    m = r.get("metrics") or {}
    measured = (m.get("step_time") or {}).get("median_s")
    if not measured:
        return ""
    lines = []
    rec = r.get("prediction") or {}
    if rec.get("status") == "predicted":
        iv = rec.get("interval") or {}
        text, figure = judged(f"calibrated ({(rec.get('profile') or {}).get('name')})", measured,
                              (rec["step_time_s"], iv.get("low_s"), iv.get("high_s")))
    else:
        text, figure = f"calibrated: not predicted ({rec.get('reason', 'no prediction section')})", None
    lines.append(text)
    if figure:
        totals.setdefault("calibrated (this check's calibrate step)", []).append(figure)
    published = published_profile(r)
    if bin_path and published:
        text, figure = judged(f"published ({os.path.basename(published)})", measured, predict_on(bin_path, published, r))
        lines.append(text)
        if figure:
            totals.setdefault(f"published ({os.path.basename(published)})", []).append(figure)
    return f"\n    predicted against measured {1e3 * measured:.2f} ms: " + "; ".join(lines)


def print_totals(totals):
    """Per profile: the median and worst |error| over its runs, and how many runs its 80% interval held."""
    for profile, figures in totals.items():
        errors = [e for e, _ in figures]
        held = sum(1 for _, inside in figures if inside)
        print(f"predicted on {profile}: median |error| {100 * statistics.median(errors):.1f}%, worst "
              f"{100 * max(errors):.1f}% over {len(errors)} runs; 80% interval holding {held} of {len(figures)}")


def judge_stored(results, profiles, bin_path):
    """Every stored result of `results` (a results.jsonl) predicted again on each of `profiles`: a line per run
    and the totals per profile."""
    totals = {}
    for line in open(results):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        measured = ((r.get("metrics") or {}).get("step_time") or {}).get("median_s")
        if not isinstance(r, dict) or "plan" not in r or not measured:
            continue
        texts = []
        for profile in profiles:
            text, figure = judged(os.path.basename(profile), measured, predict_on(bin_path, profile, r))
            texts.append(text)
            if figure:
                totals.setdefault(profile, []).append(figure)
        print(f"{r['plan']['id']}: measured {1e3 * measured:.2f} ms; " + "; ".join(texts))
    print_totals(totals)


def main():
    if sys.argv[1:2] == ["--judge"]:
        args = sys.argv[2:]
        bin_path = os.environ.get("TRAINBENCH_BIN")
        profiles = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--hardware"]
        if not args or not profiles or not bin_path:
            sys.exit("usage: TRAINBENCH_BIN=path gpu_check_summary.py --judge RESULTS.jsonl --hardware PROFILE ...")
        judge_stored(args[0], profiles, bin_path)
        return
    out = sys.argv[1]
    bin_path = os.environ.get("TRAINBENCH_BIN")
    totals = {}
    ours = {}
    with open(os.path.join(out, "results.jsonl"), "a") as jl:
        for path in sorted(glob.glob(os.path.join(out, "runs", "*", "*", "*.json"))):
            try:
                r = json.load(open(path))
            except (OSError, ValueError):
                continue
            if not isinstance(r, dict) or "plan" not in r:
                continue
            step = os.path.basename(os.path.dirname(os.path.dirname(path)))
            jl.write(json.dumps(r) + "\n")
            print(run_line(step, r) + predictions(r, bin_path, totals))
            if step == "resnet" and r.get("metrics"):
                ours[(r["plan"]["batch_size"], r["plan"]["precision"])] = r["metrics"]
    print_totals(totals)
    parity = os.path.join(out, "parity.txt")
    if not os.path.exists(parity):
        return
    for line in open(parity):
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        key = (int(f["batch"]), f["precision"])
        m = ours.get(key)
        if m is None:
            print(f"parity {key}: no trainbench result of the resnet step to set against PyTorch's")
            continue
        tb_med, py_med = m["step_time"]["median_s"], float(f["median_s"])
        fr = m["throughput"].get("free_running") or {}
        tb_free, py_free = fr.get("samples_per_s"), float(f["free_samples_per_s"])
        peak = m["memory"]["measured"].get("peak_allocated_bytes")
        py_peak = int(f["max_memory_allocated"])
        # A figure one side could not measure is "n/a" and has no ratio, never a zero.
        if tb_free and py_free > 0:
            free = f"free-running {tb_free:.1f} vs {py_free:.1f} samples/s (ratio {tb_free / py_free:.3f})"
        else:
            free = f"free-running {'n/a' if not tb_free else f'{tb_free:.1f}'} vs {py_free:.1f} samples/s (no ratio)"
        torch_peak = mib(py_peak) if py_peak > 0 else "n/a (no CUDA allocator)"
        print(f"parity ResNet-50 b{key[0]} {key[1]} on {f['device']} (torch {f['torch']}): per-step median "
              f"trainbench {1e3 * tb_med:.2f} ms vs PyTorch {1e3 * py_med:.2f} ms (throughput ratio "
              f"{py_med / tb_med:.3f}); {free}; allocator peak {mib(peak)} vs PyTorch {torch_peak}")


if __name__ == "__main__":
    main()
