//! Unit tests of `stats::changepoint` on seeded synthetic series: a 3% step in 2% noise, a stationary series,
//! two steps, an outlier at the edge, a constant step, too few points.
#![allow(clippy::unwrap_used)]

use super::bootstrap::SplitMix64;
use super::changepoint::*;

/// Standard normal draws by Box-Muller from the project's seeded generator.
fn normals(rng: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u = 1.0 - rng.next_f64(); // (0, 1]
            let v = rng.next_f64();
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        })
        .collect()
}

/// `n` points around 100 with relative noise `noise`, the level multiplied by `1 + step` from each `(at, step)`.
fn series(seed: u64, n: usize, noise: f64, steps: &[(usize, f64)]) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    normals(&mut rng, n)
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let level: f64 = steps.iter().filter(|(at, _)| i >= *at).map(|(_, s)| 1.0 + s).product();
            100.0 * level * (1.0 + noise * z)
        })
        .collect()
}

#[test]
fn a_three_percent_step_in_two_percent_noise_is_found_within_one_point() {
    // 40 points, the step at 20 (1.5 standard deviations of one point).
    let xs = series(1, 40, 0.02, &[(20, 0.03)]);
    let found = detect(&xs, &DetectOptions::default()).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let cp = found[0];
    assert!(cp.index.abs_diff(20) <= 1, "at {}", cp.index);
    assert!(cp.relative_change > 0.015 && cp.relative_change < 0.045, "{cp:?}");
    assert!(cp.p_value < 0.001 && cp.mean_after > cp.mean_before);
    assert!(cp.noise > 0.01 && cp.noise < 0.03, "noise {}", cp.noise);
    // Not one lucky draw: over 20 seeds (the script measures 1,000: about 87% found, 61% within one point),
    // never a spurious second change, most found within one point.
    let (mut within_one, mut missed) = (0, 0);
    for seed in 1..=20 {
        let found = detect(&series(seed, 40, 0.02, &[(20, 0.03)]), &DetectOptions::default()).unwrap();
        assert!(found.len() <= 1, "seed {seed}: {found:?}");
        missed += usize::from(found.is_empty());
        within_one += found.iter().filter(|c| c.index.abs_diff(20) <= 1).count();
    }
    assert!(within_one >= 12 && missed <= 4, "within one {within_one}, missed {missed}");
}

#[test]
fn a_stationary_series_of_thirty_points_has_no_change_point() {
    assert_eq!(detect(&series(2, 30, 0.02, &[]), &DetectOptions::default()).unwrap(), vec![]);
    // The false-alarm rate is about 1.4% a series (measured by the script over 1,000): few of 100 seeds.
    let alarms = (1..=100)
        .filter(|&seed| !detect(&series(seed, 30, 0.02, &[]), &DetectOptions::default()).unwrap().is_empty())
        .count();
    assert!(alarms <= 4, "{alarms} of 100 stationary series had a change point");
}

#[test]
fn two_steps_are_both_found() {
    // Up 10% at 20, down 6% at 45, in 2% noise: the first shift must not hide the second.
    let mut exactly_two = 0;
    for seed in 1..=10 {
        let xs = series(seed, 70, 0.02, &[(20, 0.10), (45, -0.06)]);
        let found = detect(&xs, &DetectOptions::default()).unwrap();
        let up = found.iter().find(|c| c.index.abs_diff(20) <= 1);
        let down = found.iter().find(|c| c.index.abs_diff(45) <= 1);
        assert!(up.is_some_and(|c| c.relative_change > 0.07), "seed {seed}: {found:?}");
        assert!(down.is_some_and(|c| c.relative_change < -0.04), "seed {seed}: {found:?}");
        exactly_two += usize::from(found.len() == 2);
    }
    assert!(exactly_two >= 9, "{exactly_two} of 10 with exactly two change points");
}

#[test]
fn an_outlier_at_either_edge_is_not_a_change() {
    for seed in 1..=10 {
        let mut xs = series(seed, 30, 0.02, &[]);
        *xs.last_mut().unwrap() = 160.0;
        assert_eq!(detect(&xs, &DetectOptions::default()).unwrap(), vec![], "seed {seed}, last");
        let mut xs = series(seed, 30, 0.02, &[]);
        xs[0] = 40.0;
        assert_eq!(detect(&xs, &DetectOptions::default()).unwrap(), vec![], "seed {seed}, first");
    }
}

#[test]
fn a_noiseless_step_is_exact_and_a_tiny_one_is_below_the_minimum_effect() {
    let mut xs = vec![10.0; 12];
    xs.extend([11.0; 9]);
    let found = detect(&xs, &DetectOptions::default()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].index, found[0].p_value), (12, 0.0));
    assert!((found[0].relative_change - 0.1).abs() < 1e-12);
    // 1% is below the default 2% minimum effect, however certain.
    let mut xs = vec![10.0; 12];
    xs.extend([10.1; 9]);
    assert_eq!(detect(&xs, &DetectOptions::default()).unwrap(), vec![]);
    // A constant series.
    assert_eq!(detect(&[5.0; 20], &DetectOptions::default()).unwrap(), vec![]);
}

#[test]
fn noise_raises_the_effect_needed() {
    // A 4% step in 5% noise over 200 points is statistically clear, but smaller than the noise of one point.
    let xs = series(7, 200, 0.05, &[(100, 0.04)]);
    assert!(detect(&xs, &DetectOptions::default()).unwrap().is_empty());
    let lenient = DetectOptions { noise_multiple: 0.0, ..DetectOptions::default() };
    let found = detect(&xs, &lenient).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].effect_threshold == 0.02);
    let noise = relative_noise(&xs);
    assert!(noise > 0.04 && noise < 0.06, "noise {noise}");
}

#[test]
fn too_few_points_says_how_many() {
    let err = detect(&[1.0; 9], &DetectOptions::default()).unwrap_err();
    assert_eq!(err, TooFewPoints { points: 9, needed: 10 });
    assert_eq!(err.to_string(), "9 finite points, but change-point detection needs at least 10");
    // Non-finite values do not count, and indices still refer to the input.
    let mut xs = vec![f64::NAN; 3];
    xs.extend([10.0; 6]);
    xs.extend([20.0; 6]);
    assert_eq!(detect(&xs[..12], &DetectOptions::default()).unwrap_err().points, 9);
    let found = detect(&xs, &DetectOptions::default()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].index, 9);
    assert!(detect(&[], &DetectOptions { min_points_per_segment: 0, ..DetectOptions::default() }).is_err());
}

#[test]
fn relative_change_never_divides_by_zero() {
    assert_eq!(relative_change(0.0, 0.0), 0.0);
    assert_eq!(relative_change(0.0, 3.0), 1.0);
    assert_eq!(relative_change(0.0, -3.0), -1.0);
    assert!((relative_change(-2.0, -1.0) - 0.5).abs() < 1e-12);
}

#[test]
fn best_split_finds_the_step_of_a_clean_series() {
    let xs = [1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0];
    assert_eq!(best_split(&xs, 2).unwrap().0, 4);
    assert!(best_split(&xs[..3], 2).is_none());
}

/// The history test's shape (`tests/it/history_real.rs`): unloaded runs, then loaded runs about 2.2x slower of
/// which the last came out unslowed. With six a side the outlier keeps Welch's test above p = 0.001; with eight
/// a side the step is found where it is.
#[test]
fn a_step_whose_last_point_fell_back_is_found_with_eight_points_a_side_not_six() {
    let shaped = |each: usize| -> Vec<f64> {
        let noise = series(7, 2 * each, 0.01, &[]);
        (0..2 * each).map(|i| if i < each || i + 1 == 2 * each { noise[i] } else { 2.2 * noise[i] }).collect()
    };
    let six = detect(&shaped(6), &DetectOptions::default()).unwrap();
    assert!(six.is_empty(), "six a side: {six:?}");
    let eight = detect(&shaped(8), &DetectOptions::default()).unwrap();
    assert_eq!(eight.len(), 1, "{eight:?}");
    assert!(eight[0].index.abs_diff(8) <= 1 && eight[0].relative_change > 0.3, "{eight:?}");
}
