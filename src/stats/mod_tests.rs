//! Unit tests of `stats` (descriptive statistics, MSER-5, bootstrap, rank test) with hand-computed expected
//! values.
#![allow(clippy::unwrap_used)]

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-300)
}

#[test]
fn quantiles_interpolate_linearly_type7() {
    let xs = [4.0, 1.0, 3.0, 2.0];
    // h = (n - 1) q: q = 0.25 -> h = 0.75 -> 1 + 0.75 (2 - 1)
    assert_eq!(quantile(&xs, 0.25), Some(1.75));
    assert_eq!(median(&xs), Some(2.5));
    // q = 0.95 -> h = 2.85 -> 3 + 0.85
    assert!(close(quantile(&xs, 0.95).unwrap(), 3.85, 1e-12));
    assert_eq!(quantile(&xs, 0.0), Some(1.0));
    assert_eq!(quantile(&xs, 1.0), Some(4.0));
    assert_eq!(median(&[7.0]), Some(7.0));
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[1.0, 2.0, 10.0]), Some(2.0));
}

#[test]
fn mean_stdev_cv() {
    let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
    assert_eq!(mean(&xs), Some(5.0));
    // sum of squares 32, sample variance 32 / 7
    assert!(close(stdev(&xs).unwrap(), (32.0f64 / 7.0).sqrt(), 1e-12));
    assert!(close(cv(&xs).unwrap(), (32.0f64 / 7.0).sqrt() / 5.0, 1e-12));
    assert_eq!(stdev(&[3.0]), Some(0.0));
    assert_eq!(stdev(&[]), None);
    assert_eq!(cv(&[0.0, 0.0]), None);
}

#[test]
fn tukey_fences_count_outliers() {
    // Q1 = 2, Q3 = 4, IQR = 2, fences [-1, 7]: only 100 is outside.
    assert_eq!(tukey_outliers(&[1.0, 2.0, 3.0, 4.0, 100.0]), 1);
    assert_eq!(tukey_outliers(&[1.0, 2.0, 3.0, 4.0, 5.0]), 0);
    // Both sides: Q1 = 10, Q3 = 10 -> IQR 0 -> any other value is out.
    assert_eq!(tukey_outliers(&[0.0, 10.0, 10.0, 10.0, 10.0, 10.0, 20.0]), 2);
    assert_eq!(tukey_outliers(&[]), 0);
}

#[test]
fn summary_collects_everything() {
    let xs: Vec<f64> = (1..=100).map(f64::from).collect();
    let s = summarize(&xs).unwrap();
    assert_eq!(s.n, 100);
    assert_eq!(s.mean, 50.5);
    assert_eq!(s.median, 50.5);
    // h = 99 * 0.05 = 4.95 -> 5 + 0.95
    assert!(close(s.p5, 5.95, 1e-12));
    assert!(close(s.p95, 95.05, 1e-12));
    assert!(close(s.p99, 99.01, 1e-12));
    assert_eq!((s.min, s.max, s.outliers), (1.0, 100.0, 0));
    assert!(summarize(&[]).is_none());
}

#[test]
fn erfc_matches_reference_values() {
    // Reference values from the C library's erfc.
    for (x, want) in [
        (0.0, 1.0),
        (0.5, 0.4795001221869535),
        (1.0, 0.15729920705028513),
        (2.9, 4.109787809945886e-05),
        (3.5, 7.430983723414128e-07),
        (5.0, 1.5374597944280351e-12),
        (-1.0, 1.8427007929497148),
    ] {
        assert!(close(erfc(x), want, 1e-10), "erfc({x}) = {} want {want}", erfc(x));
    }
}

#[test]
fn mann_whitney_without_ties() {
    // a entirely below b: U = 0, mean 4.5, variance 3*3/12*7 = 5.25, z = -(4.5 - 0.5)/sqrt(5.25).
    let r = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
    assert_eq!(r.u, 0.0);
    assert!(close(r.z, -4.0 / 5.25f64.sqrt(), 1e-12));
    assert!(close(r.p_value, 0.0808555983700523, 1e-9));
    assert_eq!(r.prob_a_greater, 0.0);
    // Symmetric.
    let s = mann_whitney(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0]).unwrap();
    assert_eq!(s.u, 9.0);
    assert!(close(s.p_value, r.p_value, 1e-12));
}

#[test]
fn mann_whitney_with_ties() {
    // Mid-ranks: 1 -> 1; 2,2,2 -> 3; 3,3 -> 5.5; 4,4 -> 7.5. R_a = 1 + 3 + 3 + 5.5 = 12.5, U = 12.5 - 10 = 2.5.
    // Tie term 24 + 6 + 6 = 36; variance 16/12 * (9 - 36/56) = 11.142857...; z = (5.5 - 0.5)/sqrt(var).
    let r = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 4.0]).unwrap();
    assert_eq!(r.u, 2.5);
    assert!(close(r.z, -5.0 / (16.0f64 / 12.0 * (9.0 - 36.0 / 56.0)).sqrt(), 1e-12));
    assert!(close(r.p_value, 0.13416918012812581, 1e-9));
    // Identical samples: no evidence of a difference.
    let same = mann_whitney(&[1.0, 1.0, 1.0], &[1.0, 1.0]).unwrap();
    assert_eq!(same.p_value, 1.0);
    assert!(mann_whitney(&[], &[1.0]).is_none());
}

#[test]
fn bootstrap_is_deterministic_and_brackets_the_median() {
    let mut rng = SplitMix64::new(7);
    let xs: Vec<f64> = (0..200).map(|_| 10.0 + rng.next_f64()).collect();
    let a = bootstrap_median_ci(&xs, 0.95, 1000, 1).unwrap();
    let b = bootstrap_median_ci(&xs, 0.95, 1000, 1).unwrap();
    assert_eq!(a, b);
    let m = median(&xs).unwrap();
    assert!(a.0 < m && m < a.1, "{a:?} vs {m}");
    assert!(a.1 - a.0 < 0.3, "interval of a 200-sample median of U(10, 11) is narrow: {a:?}");
    let c = bootstrap_median_ci(&xs, 0.95, 1000, 2).unwrap();
    assert_ne!(a, c, "another seed resamples differently");
    assert_eq!(bootstrap_median_ci(&[3.0; 10], 0.95, 100, 0), Some((3.0, 3.0)));
    assert!(bootstrap_median_ci(&[], 0.95, 100, 0).is_none());
}

#[test]
fn bootstrap_ratio_detects_a_slowdown() {
    let mut rng = SplitMix64::new(3);
    let a: Vec<f64> = (0..100).map(|_| 1.0 + 0.05 * rng.next_f64()).collect();
    let b: Vec<f64> = a.iter().map(|x| x * 1.2).collect();
    let (lo, hi) = bootstrap_ratio_ci(&a, &b, 0.95, 1000, 9).unwrap();
    assert!(lo > 1.1 && hi < 1.3 && lo < 1.2 && 1.2 < hi, "({lo}, {hi})");
    let (lo, hi) = bootstrap_ratio_ci(&a, &a, 0.95, 1000, 9).unwrap();
    assert!(lo < 1.0 && hi > 1.0, "no difference: ({lo}, {hi})");
}

#[test]
fn splitmix_below_stays_in_range_and_covers_it() {
    let mut rng = SplitMix64::new(0);
    let mut seen = [0usize; 7];
    for _ in 0..7000 {
        seen[rng.below(7)] += 1;
    }
    assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
}

#[test]
fn mser5_cuts_a_warmup_transient() {
    // 10 slow iterations (a decaying transient), then 40 steady ones with small alternating noise.
    let mut xs: Vec<f64> = (0..10).map(|i| 3.0 - 0.2 * i as f64).collect();
    xs.extend((0..40).map(|i| 1.0 + if i % 2 == 0 { 0.01 } else { -0.01 }));
    assert_eq!(mser5_start(&xs), 10);
}

#[test]
fn mser5_keeps_a_stationary_series_whole() {
    let xs: Vec<f64> = (0..50).map(|i| 1.0 + if i % 2 == 0 { 0.01 } else { -0.01 }).collect();
    assert_eq!(mser5_start(&xs), 0);
    assert_eq!(mser5_start(&[1.0; 30]), 0);
}

#[test]
fn mser5_truncates_at_most_half_and_skips_short_series() {
    // A transient over the first half: the best truncation is the cap (25 of 50), which is flagged.
    let mut xs: Vec<f64> = (0..25).map(|i| 5.0 - 0.15 * i as f64).collect();
    xs.extend((0..25).map(|i| 1.0 + if i % 2 == 0 { 0.01 } else { -0.01 }));
    assert_eq!(mser5(&xs), Mser { start: 25, capped: true });
    // A slow plateau over 60% of the series is not cut at all (MSER's known blind spot; flagged by CV instead).
    let mut plateau = vec![10.0; 30];
    plateau.extend([1.0; 20]);
    assert_eq!(mser5(&plateau).start, 0);
    assert!(!mser5(&[1.0; 30]).capped);
    assert_eq!(mser5_start(&[5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), 0);
    assert_eq!(mser5_start(&[f64::NAN; 20]), 0);
}

/// MSER-5 by its definition: every truncation point's tail mean and squared deviations computed afresh.
fn mser5_by_definition(xs: &[f64]) -> usize {
    let batches: Vec<f64> = xs.chunks_exact(MSER_BATCH).map(|c| c.iter().sum::<f64>() / MSER_BATCH as f64).collect();
    let k = batches.len();
    let mut best = (f64::INFINITY, 0);
    for d in 0..=k / 2 {
        let tail = &batches[d..];
        let m = tail.iter().sum::<f64>() / tail.len() as f64;
        let ss: f64 = tail.iter().map(|y| (y - m) * (y - m)).sum();
        let v = ss / (tail.len() * tail.len()) as f64;
        if v < best.0 {
            best = (v, d);
        }
    }
    best.1 * MSER_BATCH
}

#[test]
fn mser5_in_one_pass_agrees_with_its_definition() {
    let mut rng = SplitMix64::new(11);
    for case in 0..40 {
        let n = 20 + case * 13;
        let transient = case % 7;
        let xs: Vec<f64> = (0..n)
            .map(|i| {
                let decay = if i < transient * 5 { 2.0 * (transient * 5 - i) as f64 / 10.0 } else { 0.0 };
                1.0 + decay + 0.05 * (rng.next_f64() - 0.5)
            })
            .collect();
        assert_eq!(mser5_start(&xs), mser5_by_definition(&xs), "case {case}");
    }
    // A series of a million steps is truncated in one pass (the definition would take minutes).
    let long: Vec<f64> = (0..1_000_000).map(|i| if i < 500 { 3.0 } else { 1.0 + 1e-3 * (i % 3) as f64 }).collect();
    assert_eq!(mser5_start(&long), 500);
}

// Two-level bootstrap (several repeats per side).

fn repeat(center: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| center * (1.0 + 0.02 * (rng.next_f64() - 0.5))).collect()
}

#[test]
fn hierarchical_ci_carries_the_run_to_run_spread() {
    // Three repeats per side whose centres differ by a few percent (run-to-run noise), no true change.
    let a = vec![repeat(1.00, 50, 1), repeat(1.04, 50, 2), repeat(0.97, 50, 3)];
    let b = vec![repeat(1.02, 50, 4), repeat(0.98, 50, 5), repeat(1.03, 50, 6)];
    let (lo, hi) = hierarchical_ratio_ci(&a, &b, 0.95, 2000, 7).unwrap();
    assert!(lo < 1.0 && hi > 1.0, "[{lo}, {hi}] should contain 1");
    // Pooled single-level bootstrap of the same data is much narrower.
    let pa: Vec<f64> = a.concat();
    let pb: Vec<f64> = b.concat();
    let (plo, phi) = bootstrap_ratio_ci(&pa, &pb, 0.95, 2000, 7).unwrap();
    assert!(phi - plo < (hi - lo) / 2.0, "pooled [{plo}, {phi}] vs hierarchical [{lo}, {hi}]");
}

#[test]
fn hierarchical_ci_excludes_a_clear_slowdown() {
    let a = vec![repeat(1.0, 40, 1), repeat(1.01, 40, 2)];
    let b = vec![repeat(1.2, 40, 3), repeat(1.21, 40, 4)];
    let (lo, hi) = hierarchical_ratio_ci(&a, &b, 0.95, 1000, 9).unwrap();
    assert!(lo > 1.1 && hi < 1.3, "[{lo}, {hi}]");
}

#[test]
fn hierarchical_ci_of_an_empty_side_is_none() {
    assert!(hierarchical_ratio_ci(&[], &[vec![1.0]], 0.95, 10, 1).is_none());
    assert!(hierarchical_ratio_ci(&[vec![]], &[vec![1.0]], 0.95, 10, 1).is_none());
}
