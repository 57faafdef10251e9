//! Generates the results `scripts/history_scale.sh` records into the history store: from a few real result
//! files (mock-backend runs), `CONFIGS` configurations x `POINTS` points, each a complete, consistent result that
//! passes audit's integrity check exactly as a real one does.
//!
//! How a result is derived from a real one (its template, taken round-robin):
//! - **Configuration**: the spec is renamed `<template spec>-s<NNNN>` in its embedded canonical text, whose hash,
//!   the spec name, the run id and the configuration id follow; so every configuration is a series of its own.
//! - **Point**: every step time of the template is multiplied by one factor: the configuration's level (0.8 to
//!   1.2, drawn once), run-to-run noise (1% normal), and for every tenth configuration a 10% slowdown from 60%
//!   of the points on (a regression `history detect` should find). Every figure that follows from the step
//!   times (the step-time statistics, throughput, FLOP rates and utilisation, phase means, the free-running
//!   window) is recomputed from the new steps with the formulas a run uses.
//! - **Time**: point `p` of configuration `c` started `p` days and `c` seconds after 2026-01-01.
//!
//! Files go to `OUT/p<point>/<spec>/<run id>.json`, as `trainbench run` writes them (pretty JSON). Each is
//! checked by `trainbench::audit::integrity::verify` before it is written; a template it cannot derive from (one
//! that failed, kept only a sample of its steps, or does not pass the check itself) is refused.
//!
//! Usage: `cargo run --release --example history_scale -- FROM OUT CONFIGS POINTS [SEED]`.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use trainbench::audit::integrity;
use trainbench::digest::sha256_hex;
use trainbench::manifest::rfc3339;
use trainbench::result::load;
use trainbench::result::{RunOutcome, RunResult, Sampled};
use trainbench::stats::{SplitMix64, summarize};

type Failure = Box<dyn Error + Send + Sync>;

/// Every tenth configuration carries a step.
const STEP_EVERY: usize = 10;
/// The step: a 10% slowdown.
const STEP_SIZE: f64 = 0.10;
/// Run-to-run noise, relative.
const RUN_NOISE: f64 = 0.01;
/// 2026-01-01T00:00:00Z, seconds since the epoch.
const BASE_TIME_S: u64 = 1_767_225_600;

/// Where the step of a configuration with one starts: 60% of the points in.
fn step_at(points: usize) -> usize {
    points * 3 / 5
}

/// One standard normal draw by Box-Muller.
fn normal(rng: &mut SplitMix64) -> f64 {
    let u = 1.0 - rng.next_f64();
    let v = rng.next_f64();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// A template must be a completed run that kept every step and passes the integrity check.
fn check_template(path: &Path, r: &RunResult) -> Result<(), Failure> {
    let Some(m) = &r.metrics else { return Err(format!("{}: no metrics", path.display()).into()) };
    if !matches!(r.outcome, RunOutcome::Completed) || m.step_indices.is_some() || r.plan.repeat != 0 {
        return Err(format!("{}: not a completed first repeat that kept every step", path.display()).into());
    }
    if let Some(issue) = integrity::verify(r).into_iter().next() {
        return Err(format!("{}: {}: {}", path.display(), issue.field, issue.message).into());
    }
    Ok(())
}

/// Rename the spec of `r` to `name`: the canonical text's `name` line, its hash, the run and configuration ids.
fn rename(r: &mut RunResult, name: &str) -> Result<(), Failure> {
    let old = r.spec_name.clone();
    let line = format!("name = \"{old}\"\n");
    if !r.environment.spec_canonical.contains(&line) {
        return Err(format!("the canonical spec of {} has no line `{}`", r.run_id, line.trim()).into());
    }
    let prefix = |id: &str| -> Result<String, Failure> {
        id.strip_prefix(&old)
            .map(|rest| format!("{name}{rest}"))
            .ok_or_else(|| format!("`{id}` is not of {old}").into())
    };
    r.environment.spec_canonical = r.environment.spec_canonical.replacen(&line, &format!("name = \"{name}\"\n"), 1);
    r.environment.spec_sha256 = sha256_hex(&r.environment.spec_canonical);
    r.spec_name = name.to_string();
    r.run_id = prefix(&r.run_id)?;
    r.plan.id = prefix(&r.plan.id)?;
    r.plan.config = prefix(&r.plan.config)?;
    Ok(())
}

/// Multiply every step time by `factor` and recompute every figure that follows from them.
fn rescale(r: &mut RunResult, factor: f64) -> Result<(), Failure> {
    let batch = r.plan.samples_per_step() as f64;
    let devices = r.plan.topology.world_size().max(1) as f64;
    let m = r.metrics.as_mut().ok_or("no metrics")?;
    m.step_times_s.iter_mut().for_each(|t| *t *= factor);
    let steady = m.step_times_s.get(m.steady_state.start_index..).ok_or("steady state past the steps")?;
    let s = summarize(steady).ok_or("no steady-state steps")?;
    let total: f64 = steady.iter().sum();
    let st = &mut m.step_time;
    (st.n, st.mean_s, st.median_s, st.p5_s, st.p95_s, st.p99_s) = (s.n, s.mean, s.median, s.p5, s.p95, s.p99);
    (st.stdev_s, st.cv, st.min_s, st.max_s, st.outliers) = (s.stdev, s.cv, s.min, s.max, s.outliers);
    st.median_ci95_s = st.median_ci95_s.map(|x| x * factor);

    let samples_per_s = batch * s.n as f64 / total;
    let tp = &mut m.throughput;
    tp.samples_per_s = samples_per_s;
    tp.items_per_s = samples_per_s * tp.items_per_sample as f64;
    if tp.items_per_s_per_device.is_some() {
        tp.items_per_s_per_device = Some(tp.items_per_s / devices);
    }
    if let Some(fr) = &mut tp.free_running {
        fr.seconds *= factor;
        fr.samples_per_s = batch * fr.steps as f64 / fr.seconds;
        fr.ratio_to_per_step = fr.samples_per_s / samples_per_s;
    }

    let p = &mut m.phases;
    for phase in [
        &mut p.data,
        &mut p.data_stall,
        &mut p.data_copy,
        &mut p.forward,
        &mut p.backward,
        &mut p.comm,
        &mut p.optimizer,
        &mut p.other,
    ] {
        phase.mean_s *= factor;
    }

    let fl = &mut m.flops;
    if let Some(per_sample) = fl.flops_per_sample {
        let achieved = per_sample as f64 * samples_per_s;
        fl.achieved_flop_per_s = Some(achieved);
        if let Some(peak) = fl.peak_flop_per_s {
            fl.fraction = Some(achieved / peak);
        }
    }
    if let Some(Sampled::Available(mfu)) = &mut fl.mfu {
        mfu.achieved_flop_per_s = mfu.model_flops_per_sample as f64 * samples_per_s;
        mfu.mfu = mfu.achieved_flop_per_s / mfu.peak.flop_per_s;
        if let Some(hfu) = &mut mfu.hfu {
            hfu.achieved_flop_per_s = hfu.hardware_flops_per_sample as f64 * samples_per_s;
            hfu.hfu = hfu.achieved_flop_per_s / mfu.peak.flop_per_s;
        }
    }
    if let Sampled::Available(power) = &mut m.power {
        power.energy_j *= factor;
        power.energy_per_sample_j = power.mean_power_w / samples_per_s;
    }
    Ok(())
}

/// Set when the run started (point `p` of configuration `c`) and finished (its measured steps later).
fn place_in_time(r: &mut RunResult, point: usize, config: usize) {
    let start = Duration::from_secs(BASE_TIME_S + point as u64 * 86_400 + config as u64);
    let measured: f64 = r.metrics.as_ref().map_or(0.0, |m| m.step_times_s.iter().sum());
    let finish = start + Duration::from_secs_f64(measured.max(0.0).ceil());
    r.environment.started_at = rfc3339(UNIX_EPOCH + start);
    r.environment.finished_at = rfc3339(UNIX_EPOCH + finish);
}

/// Every point of configuration `config`, written under `out`.
fn write_configuration(
    template: &RunResult,
    config: usize,
    points: usize,
    seed: u64,
    out: &Path,
) -> Result<usize, Failure> {
    let mut rng = SplitMix64::new(seed ^ (config as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let level = 0.8 + 0.4 * rng.next_f64();
    let stepped = config % STEP_EVERY == 0;
    let name = format!("{}-s{config:04}", template.spec_name);
    let mut renamed = template.clone();
    rename(&mut renamed, &name)?;
    for point in 0..points {
        let step = if stepped && point >= step_at(points) { 1.0 + STEP_SIZE } else { 1.0 };
        let factor = level * step * (1.0 + RUN_NOISE * normal(&mut rng)).max(0.5);
        let mut r = renamed.clone();
        rescale(&mut r, factor)?;
        place_in_time(&mut r, point, config);
        if let Some(issue) = integrity::verify(&r).into_iter().next() {
            return Err(format!("generated {} point {point}: {}: {}", r.run_id, issue.field, issue.message).into());
        }
        let dir = out.join(format!("p{point:03}")).join(&r.spec_name);
        std::fs::create_dir_all(&dir)?;
        let mut text = serde_json::to_string_pretty(&r)?;
        text.push('\n');
        std::fs::write(dir.join(format!("{}.json", r.run_id)), text)?;
    }
    Ok(usize::from(stepped))
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, Failure> {
    args.get(i).and_then(|a| a.parse().ok()).ok_or_else(|| format!("argument {i}: expected {what}").into())
}

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let from: PathBuf = arg(&args, 1, "FROM (a folder of real results)")?;
    let out: PathBuf = arg(&args, 2, "OUT (a folder)")?;
    let configs: usize = arg(&args, 3, "CONFIGS")?;
    let points: usize = arg(&args, 4, "POINTS")?;
    let seed: u64 = if args.len() > 5 { arg(&args, 5, "SEED")? } else { 1 };
    if configs == 0 || points == 0 || configs > 9_999 {
        return Err("CONFIGS must be 1 to 9999 and POINTS at least 1".into());
    }
    let mut templates = Vec::new();
    for loaded in load::load_all(&[&from])? {
        check_template(&loaded.path, &loaded.result)?;
        templates.push(loaded.result);
    }
    if templates.is_empty() {
        return Err(format!("{}: no results", from.display()).into());
    }
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(configs);
    let stepped: Vec<Result<usize, Failure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (templates, out) = (&templates, &out);
                scope.spawn(move || -> Result<usize, Failure> {
                    let mut stepped = 0;
                    for config in (t..configs).step_by(threads) {
                        let template = &templates[config % templates.len()];
                        stepped += write_configuration(template, config, points, seed, out)?;
                    }
                    Ok(stepped)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a generator thread panicked".into()))).collect()
    });
    let mut with_step = 0;
    for s in stepped {
        with_step += s?;
    }
    println!(
        "generated {} results: {configs} configurations x {points} points from {} real result(s); {with_step} \
         configurations carry a {:.0}% step at point {}",
        configs * points,
        templates.len(),
        STEP_SIZE * 100.0,
        step_at(points)
    );
    Ok(())
}
