//! Prints how often the history statistics cry wolf and how well they find a real change, on seeded synthetic
//! series (run by `scripts/history_false_alarms.sh`): `detect` over stationary series (false alarms), over a 3%
//! step in 2% noise (detection rate and index error), and the gate over A/A pairs and real slowdowns, including
//! A/A gates whose runs share a session effect (one invocation's machine state), judged with and without the
//! series' point-to-point noise.
//!
//! Usage: `cargo run --release --example history_false_alarms -- [TRIALS] [SEED]` (defaults 1000 and 1).

use trainbench::stats::SplitMix64;
use trainbench::stats::changepoint::{DetectOptions, detect};
use trainbench::stats::gate::{GateOptions, GateOutcome, SessionNoise, judge};

/// One standard normal draw by Box-Muller.
fn normal(rng: &mut SplitMix64) -> f64 {
    let u = 1.0 - rng.next_f64();
    let v = rng.next_f64();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `n` points around 100 with relative noise `noise`, multiplied by `1 + step` from index `at` on.
fn series(rng: &mut SplitMix64, n: usize, noise: f64, at: usize, step: f64) -> Vec<f64> {
    (0..n).map(|i| 100.0 * if i >= at { 1.0 + step } else { 1.0 } * (1.0 + noise * normal(rng))).collect()
}

/// `count` runs of `steps` values around `level`: each run's level drawn with relative spread `run_noise`, each
/// step around it with 2% spread.
fn runs(rng: &mut SplitMix64, count: usize, steps: usize, level: f64, run_noise: f64) -> Vec<Vec<f64>> {
    (0..count)
        .map(|_| {
            let run_level = level * (1.0 + run_noise * normal(rng));
            (0..steps).map(|_| run_level * (1.0 + 0.02 * normal(rng))).collect()
        })
        .collect()
}

fn percent(count: usize, of: usize) -> String {
    format!("{:.1}% ({count}/{of})", 100.0 * count as f64 / of.max(1) as f64)
}

fn stationary(trials: usize, seed: u64, points: usize, noise: f64) {
    let opts = DetectOptions::default();
    let mut rng = SplitMix64::new(seed);
    let (mut alarmed, mut total) = (0, 0);
    for _ in 0..trials {
        let found = detect(&series(&mut rng, points, noise, points, 0.0), &opts).unwrap_or_default();
        alarmed += usize::from(!found.is_empty());
        total += found.len();
    }
    println!(
        "detect, stationary, {points} points, {:.0}% noise: series with a change point {}, change points per series {:.4}",
        noise * 100.0,
        percent(alarmed, trials),
        total as f64 / trials as f64
    );
}

fn step(trials: usize, seed: u64, points: usize) {
    let opts = DetectOptions::default();
    let mut rng = SplitMix64::new(seed);
    let at = points / 2;
    let (mut found_any, mut within_one, mut exactly_one, mut error_sum) = (0, 0, 0, 0);
    for _ in 0..trials {
        let found = detect(&series(&mut rng, points, 0.02, at, 0.03), &opts).unwrap_or_default();
        exactly_one += usize::from(found.len() == 1);
        if let Some(error) = found.iter().map(|c| c.index.abs_diff(at)).min() {
            found_any += 1;
            error_sum += error;
            within_one += usize::from(error <= 1);
        }
    }
    println!(
        "detect, 3% step in 2% noise, {points} points, step at {at}: detected {}, within one point {}, exactly one change point {}, mean index error {:.2}",
        percent(found_any, trials),
        percent(within_one, trials),
        percent(exactly_one, trials),
        error_sum as f64 / found_any.max(1) as f64
    );
}

fn gates(trials: usize, seed: u64, baseline_runs: usize, candidate_runs: usize, run_noise: f64, slowdown: f64) {
    let opts = GateOptions::default();
    let mut rng = SplitMix64::new(seed);
    let mut counts = [0usize; 4];
    let mut repeats = Vec::new();
    for _ in 0..trials {
        let base = runs(&mut rng, baseline_runs, 40, 0.1, run_noise);
        let cand = runs(&mut rng, candidate_runs, 40, 0.1 * (1.0 + slowdown), run_noise);
        let verdict = judge(&base, &cand, true, &opts, None);
        let slot = match verdict.outcome {
            GateOutcome::Pass => 0,
            GateOutcome::Regression => 1,
            GateOutcome::Improvement => 2,
            GateOutcome::Inconclusive { more_repeats_needed } => {
                repeats.extend(more_repeats_needed);
                3
            }
        };
        counts[slot] += 1;
    }
    repeats.sort_unstable();
    let median_repeats = repeats.get(repeats.len() / 2).map_or("-".to_string(), |n| n.to_string());
    let kind = if slowdown == 0.0 { "A/A".to_string() } else { format!("{:.0}% slower", slowdown * 100.0) };
    println!(
        "gate, {kind}, {baseline_runs} baseline runs vs {candidate_runs}, {:.0}% run-to-run noise: pass {}, regression {}, improvement {}, inconclusive {} (median more repeats {median_repeats})",
        run_noise * 100.0,
        percent(counts[0], trials),
        percent(counts[1], trials),
        percent(counts[2], trials),
        percent(counts[3], trials),
    );
}

/// A/A gates where each invocation (session) moves all its runs by a common `session_noise` (the machine's state
/// of the moment): a baseline of 10 sessions of one run against one candidate session of 3 runs, with 1% noise
/// between runs of a session. Judged by the runs alone, three runs of one session look surer than they are;
/// with the series' point-to-point noise (here known) the gate stays honest.
fn session_gates(trials: usize, seed: u64, session_noise: f64) {
    let opts = GateOptions::default();
    let mut rng = SplitMix64::new(seed);
    let (mut alone, mut with_series) = ([0usize; 4], [0usize; 4]);
    let slot = |o: GateOutcome| match o {
        GateOutcome::Pass => 0,
        GateOutcome::Regression => 1,
        GateOutcome::Improvement => 2,
        GateOutcome::Inconclusive { .. } => 3,
    };
    for _ in 0..trials {
        let base: Vec<Vec<f64>> = (0..10)
            .flat_map(|_| {
                let level = 0.1 * (1.0 + session_noise * normal(&mut rng));
                runs(&mut rng, 1, 40, level, 0.01)
            })
            .collect();
        let level = 0.1 * (1.0 + session_noise * normal(&mut rng));
        let cand = runs(&mut rng, 3, 40, level, 0.01);
        let noise = SessionNoise { relative_sd: session_noise, baseline_points: 10, candidate_points: 1 };
        alone[slot(judge(&base, &cand, true, &opts, None).outcome)] += 1;
        with_series[slot(judge(&base, &cand, true, &opts, Some(&noise)).outcome)] += 1;
    }
    for (how, counts) in [("runs alone", alone), ("with the series' noise", with_series)] {
        println!(
            "gate, A/A, 10 one-run sessions vs one 3-run session, {:.0}% session noise, {how}: pass {}, regression {}, improvement {}, inconclusive {}",
            session_noise * 100.0,
            percent(counts[0], trials),
            percent(counts[1], trials),
            percent(counts[2], trials),
            percent(counts[3], trials),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trials = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seed = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    for points in [30, 100] {
        stationary(trials, seed, points, 0.02);
    }
    for points in [30, 40, 60] {
        step(trials, seed, points);
    }
    for noise in [0.01, 0.03, 0.10] {
        gates(trials, seed, 10, 3, noise, 0.0);
    }
    gates(trials, seed, 10, 3, 0.01, 0.20);
    gates(trials, seed, 10, 5, 0.03, 0.10);
    gates(trials, seed, 6, 3, 0.01, 0.30);
    for noise in [0.03, 0.10] {
        session_gates(trials, seed, noise);
    }
}
