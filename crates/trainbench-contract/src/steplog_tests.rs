//! Tests of the bounded step log: exact below the cap, bounded and uniform above it, exact moments and sketch
//! quantiles within their stated error.

use super::*;

fn step(t: f64) -> PhaseTimes {
    PhaseTimes { forward_s: t / 2.0, backward_s: t / 2.0, total_s: t, ..PhaseTimes::default() }
}

/// A deterministic, skewed series of step times (a lognormal-like spread around 10 ms).
fn times(n: u64) -> impl Iterator<Item = f64> {
    let mut rng = SplitMix64::new(42);
    (0..n).map(move |_| {
        let u: f64 = (0..4).map(|_| rng.next_f64()).sum::<f64>() - 2.0;
        0.01 * (0.4 * u).exp()
    })
}

#[test]
fn below_the_cap_every_step_is_kept_in_order() {
    let mut log = StepLog::new();
    for (i, t) in times(500).enumerate() {
        log.record(step(t), Some(i as f64));
    }
    let kept = log.kept();
    assert!(!log.is_sampled());
    assert_eq!(kept.len(), 500);
    assert!(kept.iter().enumerate().all(|(i, k)| k.index == i as u64 && k.loss == Some(i as f64)));
    assert_eq!(log.losses(), LossTrack { first: Some(0.0), last: Some(499.0), all_finite: true, count: 500 });
}

#[test]
fn past_the_cap_memory_stays_bounded_and_the_reservoir_is_uniform() {
    let n = 20 * KEPT_STEPS as u64;
    let mut log = StepLog::new();
    for t in times(n) {
        log.record(step(t), None);
    }
    assert!(log.is_sampled());
    assert_eq!(log.seen(), n);
    let kept = log.kept();
    assert_eq!(kept.len(), KEPT_STEPS);
    assert!(kept.windows(2).all(|w| w[0].index < w[1].index), "sorted and distinct");
    assert!(log.blocks.closed.len() < BLOCKS && log.segments.closed.len() < SEGMENTS);
    // Uniform over the run: each tenth of the run holds about a tenth of the kept steps (binomial sd ~ 30).
    for decile in 0..10 {
        let (lo, hi) = (decile * n / 10, (decile + 1) * n / 10);
        let count = kept.iter().filter(|k| (lo..hi).contains(&k.index)).count();
        assert!((850..1150).contains(&count), "decile {decile}: {count} kept");
    }
}

#[test]
fn blocks_give_exact_moments_from_any_block_on() {
    let n = 3 * BLOCKS as u64 + 17;
    let all: Vec<f64> = times(n).collect();
    let mut log = StepLog::new();
    for &t in &all {
        log.record(step(t), None);
    }
    let (means, width) = log.block_means();
    assert_eq!(width, 4, "compacted twice");
    assert_eq!(means.len() as u64, n / width);
    for start in [0, 4, 1000, 6000] {
        let tail = &all[start as usize..];
        let b = log.steady_from(start).block;
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        let var = tail.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (tail.len() - 1) as f64;
        assert_eq!(b.n, tail.len() as u64);
        assert!((b.mean - mean).abs() < 1e-12 * mean, "start {start}");
        assert!((b.stdev() - var.sqrt()).abs() < 1e-9 * var.sqrt(), "start {start}");
        assert_eq!(b.min, tail.iter().copied().fold(f64::INFINITY, f64::min));
        assert_eq!(b.max, tail.iter().copied().fold(0.0, f64::max));
        assert!((b.sum.forward_s - tail.iter().sum::<f64>() / 2.0).abs() < 1e-9);
    }
}

#[test]
fn sketch_percentiles_agree_with_exact_ones_within_the_stated_error_on_a_million_samples() {
    let all: Vec<f64> = times(1_000_000).collect();
    let mut log = StepLog::new();
    for &t in &all {
        log.record(step(t), None);
    }
    let steady = log.steady_from(0);
    assert_eq!(steady.sketch.len(), 1_000_000);
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    for q in [0.05, 0.25, 0.5, 0.95, 0.99] {
        // The sketch reports a value whose rank is the quantile's: compare with the order statistics around it.
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        let exact = sorted[rank];
        let got = steady.sketch.quantile(q).unwrap();
        assert!((got - exact).abs() <= SKETCH_RELATIVE_ERROR * exact, "q {q}: sketch {got}, exact {exact}");
    }
}

#[test]
fn a_sketch_survives_its_wire_form() {
    let mut s = Sketch::default();
    for t in times(1000) {
        s.record(t);
    }
    let back: Sketch = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
    assert_eq!(back.quantile(0.5), s.quantile(0.5));
}

#[test]
fn the_slowest_worker_sets_each_kept_step_and_the_losses_are_means() {
    let (mut a, mut b) = (StepLog::new(), StepLog::new());
    for i in 0..10 {
        a.record(step(if i % 2 == 0 { 2.0 } else { 1.0 }), Some(1.0));
        b.record(step(if i % 2 == 0 { 1.0 } else { 3.0 }), Some(3.0));
    }
    let merged = StepLog::slowest_of(&[&a, &b]).unwrap();
    let totals: Vec<f64> = merged.kept().iter().map(|k| k.phases.total_s).collect();
    assert_eq!(totals, [2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0]);
    assert!(merged.kept().iter().all(|k| k.loss == Some(2.0)));
    assert_eq!((merged.losses().first, merged.losses().last), (Some(2.0), Some(2.0)));
}
