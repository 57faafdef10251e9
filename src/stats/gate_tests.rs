//! Unit tests of `stats::gate` on seeded synthetic runs: A/A passes, a 20% slowdown is a regression (and a
//! speed-up an improvement, either way round), three runs against six can call a large regression, high noise
//! (of the runs or of the series' sessions) is inconclusive, too few runs and bad input are inconclusive.
#![allow(clippy::unwrap_used)]

use super::bootstrap::SplitMix64;
use super::gate::*;

fn normal(rng: &mut SplitMix64) -> f64 {
    let u = 1.0 - rng.next_f64();
    let v = rng.next_f64();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `runs` runs of `steps` step times around `level`: each run's own level drawn with relative spread
/// `run_noise`, each step around it with relative spread `step_noise`.
fn runs(rng: &mut SplitMix64, runs: usize, steps: usize, level: f64, run_noise: f64, step_noise: f64) -> Vec<Vec<f64>> {
    (0..runs)
        .map(|_| {
            let run_level = level * (1.0 + run_noise * normal(rng));
            (0..steps).map(|_| run_level * (1.0 + step_noise * normal(rng))).collect()
        })
        .collect()
}

#[test]
fn identical_distributions_pass() {
    for seed in 1..=10 {
        let mut rng = SplitMix64::new(seed);
        let base = runs(&mut rng, 10, 40, 0.1, 0.01, 0.02);
        let cand = runs(&mut rng, 3, 40, 0.1, 0.01, 0.02);
        let v = judge(&base, &cand, true, &GateOptions::default(), None);
        assert_eq!(v.outcome, GateOutcome::Pass, "seed {seed}: {v:?}");
        assert!(v.interval.0 < v.relative_change && v.relative_change < v.interval.1);
        assert!(v.noise > 0.003 && v.noise < 0.03, "seed {seed}: noise {}", v.noise);
        assert_eq!(v.runs, (10, 3));
    }
}

#[test]
fn a_twenty_percent_slower_candidate_is_a_regression() {
    for seed in 1..=10 {
        let mut rng = SplitMix64::new(seed);
        let base = runs(&mut rng, 10, 40, 0.1, 0.01, 0.02);
        let cand = runs(&mut rng, 3, 40, 0.12, 0.01, 0.02);
        let v = judge(&base, &cand, true, &GateOptions::default(), None);
        assert_eq!(v.outcome, GateOutcome::Regression, "seed {seed}: {v:?}");
        assert!((v.relative_change - 0.2).abs() < 0.03 && v.interval.0 > 0.1, "seed {seed}: {v:?}");
        assert!(v.p_value < 0.01);
        // The same numbers as throughput (higher is better): lower values are the regression.
        let v = judge(&cand, &base, false, &GateOptions::default(), None);
        assert_eq!(v.outcome, GateOutcome::Regression, "seed {seed}: {v:?}");
        // And a faster candidate of step times is an improvement.
        let v = judge(&cand, &base, true, &GateOptions::default(), None);
        assert_eq!(v.outcome, GateOutcome::Improvement, "seed {seed}: {v:?}");
    }
}

#[test]
fn three_runs_against_six_can_call_a_large_regression() {
    for seed in 1..=10 {
        let mut rng = SplitMix64::new(seed);
        let base = runs(&mut rng, 6, 40, 0.1, 0.01, 0.02);
        let cand = runs(&mut rng, 3, 40, 0.13, 0.01, 0.02);
        let v = judge(&base, &cand, true, &GateOptions::default(), None);
        assert_eq!(v.outcome, GateOutcome::Regression, "seed {seed}: {v:?}");
        assert!(v.p_value < 0.01 && v.interval.0 > 0.2, "seed {seed}: {v:?}");
    }
}

#[test]
fn the_series_session_noise_keeps_one_noisy_session_from_being_a_regression() {
    // Ten runs and three, each side one tight session, 8% apart: by the runs alone a regression; but the series
    // has shown its sessions to move by 10% from one to the next, so it is inconclusive, and no number of
    // repeats of this one invocation would decide it.
    let mut rng = SplitMix64::new(3);
    let base = runs(&mut rng, 10, 40, 0.1, 0.005, 0.02);
    let cand = runs(&mut rng, 3, 40, 0.108, 0.005, 0.02);
    let opts = GateOptions::default();
    assert_eq!(judge(&base, &cand, true, &opts, None).outcome, GateOutcome::Regression);
    let sessions = SessionNoise { relative_sd: 0.10, baseline_points: 1, candidate_points: 1 };
    let v = judge(&base, &cand, true, &opts, Some(&sessions));
    assert_eq!(v.outcome, GateOutcome::Inconclusive { more_repeats_needed: None }, "{v:?}");
    assert!((v.noise - 0.10).abs() < 1e-12 && v.interval.0 < 0.0, "{v:?}");
    // A quiet series changes nothing: the runs' own spread is the larger.
    let quiet = SessionNoise { relative_sd: 0.001, ..sessions };
    assert_eq!(judge(&base, &cand, true, &opts, Some(&quiet)).outcome, GateOutcome::Regression);
}

#[test]
fn high_noise_is_inconclusive_with_a_repeat_estimate_a_regression_only_at_the_tests_level() {
    let (mut estimated, mut false_alarms) = (0, 0);
    for seed in 1..=10 {
        let mut rng = SplitMix64::new(seed);
        // 8% run-to-run noise: 3 candidate runs cannot tell a 5% change from none, even against 40 baseline runs.
        let base = runs(&mut rng, 40, 40, 0.1, 0.08, 0.02);
        // No change, and a 2% slowdown (below the 5% minimum effect): a regression would be a false alarm.
        for level in [0.1, 0.102] {
            let cand = runs(&mut rng, 3, 40, level, 0.08, 0.02);
            let v = judge(&base, &cand, true, &GateOptions { resamples: 500, ..GateOptions::default() }, None);
            match v.outcome {
                GateOutcome::Inconclusive { more_repeats_needed: Some(n) } => {
                    assert!(n >= 1, "seed {seed}");
                    estimated += 1;
                }
                // Three lucky fast runs may rule out a slowdown (seed 1 draws three 3-sigma fast runs, an
                // improvement); nothing may claim a slowdown.
                GateOutcome::Pass | GateOutcome::Improvement => {}
                // A change close to the minimum effect: the baseline's own uncertainty is the limit.
                GateOutcome::Inconclusive { more_repeats_needed: None } => {}
                // p < 0.01 two-sided: a false slowdown is a 0.5% event per gate. Seed 9 draws three candidate
                // runs 2.7 standard errors slow (+15% for a 2% change): the one in these 20.
                GateOutcome::Regression => false_alarms += 1,
            }
            assert!(v.noise > 0.04, "seed {seed}: noise {}", v.noise);
        }
    }
    assert!(estimated >= 10, "{estimated} of 20 inconclusive with an estimate");
    assert!(false_alarms <= 1, "{false_alarms} false regressions in 20 A/A-like gates");
    // A baseline of four runs 20% apart: candidate repeats alone cannot narrow the interval enough, no estimate.
    let of = |medians: &[f64]| medians.iter().map(|&m| vec![m; 10]).collect::<Vec<_>>();
    let base = of(&[0.08, 0.12, 0.09, 0.11]);
    let cand = of(&[0.1, 0.1, 0.105, 0.095]);
    let v = judge(&base, &cand, true, &GateOptions::default(), None);
    assert_eq!(v.outcome, GateOutcome::Inconclusive { more_repeats_needed: None }, "{v:?}");
}

#[test]
fn too_few_runs_are_inconclusive() {
    let mut rng = SplitMix64::new(5);
    let base = runs(&mut rng, 10, 40, 0.1, 0.01, 0.02);
    let cand = runs(&mut rng, 1, 40, 0.2, 0.01, 0.02);
    let v = judge(&base, &cand, true, &GateOptions::default(), None);
    assert_eq!(v.outcome, GateOutcome::Inconclusive { more_repeats_needed: Some(2) }, "{v:?}");
    assert!(v.relative_change > 0.9);
    // A baseline of two runs: candidate repeats cannot fix it.
    let v = judge(&base[..2], &runs(&mut rng, 5, 40, 0.1, 0.01, 0.02), true, &GateOptions::default(), None);
    assert_eq!(v.outcome, GateOutcome::Inconclusive { more_repeats_needed: None }, "{v:?}");
}

#[test]
fn bad_input_is_inconclusive_not_a_panic() {
    let opts = GateOptions::default();
    let none = GateOutcome::Inconclusive { more_repeats_needed: None };
    assert_eq!(judge(&[], &[], true, &opts, None).outcome, none);
    assert_eq!(judge(&[vec![]], &[vec![1.0]], true, &opts, None).outcome, none);
    let nan = vec![vec![f64::NAN; 5]; 4];
    assert_eq!(judge(&nan, &nan, true, &opts, None).outcome, none);
    let zeros = vec![vec![0.0; 5]; 4];
    assert_eq!(judge(&zeros, &zeros, true, &opts, None).outcome, none);
    // Constant runs: no spread at all, and no change: pass.
    let same = vec![vec![1.0; 5]; 4];
    assert_eq!(judge(&same, &same, true, &opts, None).outcome, GateOutcome::Pass);
}

#[test]
fn the_same_runs_and_seed_give_the_same_verdict() {
    let mut rng = SplitMix64::new(11);
    let base = runs(&mut rng, 6, 30, 0.1, 0.03, 0.02);
    let cand = runs(&mut rng, 4, 30, 0.104, 0.03, 0.02);
    let opts = GateOptions::default();
    assert_eq!(judge(&base, &cand, true, &opts, None), judge(&base, &cand, true, &opts, None));
}

#[test]
fn the_rank_test_is_exact_for_few_runs() {
    // Completely separated: 2 of C(6, 3) = 20 orderings are as extreme (either way round).
    assert!((rank_test_p_value(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) - 0.1).abs() < 1e-12);
    let ten: Vec<f64> = (0..10).map(f64::from).collect();
    assert!((rank_test_p_value(&ten, &[20.0, 21.0, 22.0]) - 2.0 / 286.0).abs() < 1e-12);
    // U = 1 of 2 x 2 (distribution 1, 1, 2, 1, 1 over U = 0..4): 2 min(2, 5) / 6.
    assert!((rank_test_p_value(&[1.0, 3.0], &[2.0, 4.0]) - 2.0 / 3.0).abs() < 1e-12);
    // Ties fall back to the normal approximation; empty is 1.
    assert!(rank_test_p_value(&[1.0, 2.0, 2.0], &[2.0, 5.0, 6.0]) > 0.05);
    assert_eq!(rank_test_p_value(&[], &[1.0]), 1.0);
}
