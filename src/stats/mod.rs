//! Pure statistics over step-time samples, no I/O and no global state: quantiles, mean/stdev/CV, Tukey
//! outliers and summaries, and MSER-5 steady-state detection here; seeded bootstrap confidence intervals (one-
//! and two-level) in [`bootstrap`], the Mann-Whitney U test in [`rank`]. Every item is re-exported at this level.
//!
//! Definitions used throughout:
//! - Quantiles: Hyndman & Fan type 7 (linear interpolation between order statistics at `h = (n - 1) q`), the
//!   default of NumPy, R and Excel's `PERCENTILE.INC`.
//! - Standard deviation: the sample form with `n - 1` in the denominator.
//! - Bootstrap: percentile intervals from resampling with replacement, driven by a seeded SplitMix64
//!   generator, so the same samples and seed always give the same interval.

pub mod bootstrap;
pub mod changepoint;
pub mod gate;
pub mod rank;

pub use bootstrap::{BOOTSTRAP_RESAMPLES, SplitMix64, bootstrap_median_ci, bootstrap_ratio_ci, hierarchical_ratio_ci};
pub use rank::{MannWhitney, erfc, mann_whitney, normal_sf};
// The order statistics are defined once in the contract crate, so that its calibration and the backends use the
// same median.
pub use trainbench_contract::stats::{median, quantile, quantile_sorted, sorted};

/// Arithmetic mean; `None` for no samples.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (`n - 1` denominator); 0 for one sample, `None` for none.
pub fn stdev(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if xs.len() < 2 {
        return Some(0.0);
    }
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// Coefficient of variation, stdev / mean; `None` for no samples or a zero mean.
pub fn cv(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if m == 0.0 {
        return None;
    }
    Some(stdev(xs)? / m)
}

/// Number of samples outside Tukey's fences `[Q1 - 1.5 IQR, Q3 + 1.5 IQR]` (quartiles by type 7).
pub fn tukey_outliers(xs: &[f64]) -> usize {
    let s = sorted(xs);
    let (Some(q1), Some(q3)) = (quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75)) else {
        return 0;
    };
    let iqr = q3 - q1;
    let (lo, hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
    s.iter().filter(|&&x| x < lo || x > hi).count()
}

/// Summary statistics of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Sample standard deviation.
    pub stdev: f64,
    /// stdev / mean (0 when the mean is 0).
    pub cv: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Samples outside Tukey's fences.
    pub outliers: usize,
}

/// Summarise a sample; `None` if it is empty.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let s = sorted(xs);
    let q = |p| quantile_sorted(&s, p);
    Some(Summary {
        n: s.len(),
        mean: mean(&s)?,
        median: q(0.5)?,
        p5: q(0.05)?,
        p95: q(0.95)?,
        p99: q(0.99)?,
        stdev: stdev(&s)?,
        cv: cv(&s).unwrap_or(0.0),
        min: *s.first()?,
        max: *s.last()?,
        outliers: tukey_outliers(&s),
    })
}

/// Batch size of MSER-5.
pub const MSER_BATCH: usize = 5;

/// Steady-state start by MSER-5 (White 1997; White, Cobb & Spratt 2000; Franklin & White 2008).
///
/// The series is cut into non-overlapping batches of 5 whose means form `Y_1..Y_k` (a trailing partial batch
/// is ignored). For each candidate truncation `d` in `0..=k/2` the marginal standard error
/// `MSER(d) = sum_{i>d} (Y_i - mean(Y_{d+1..k}))^2 / (k - d)^2` is computed, and the `d` that minimises it wins;
/// the returned start index is `5 d`. Why this method: it needs no tolerance or window parameter, it trades
/// bias (keeping transient iterations) against variance (dropping data) explicitly, it is among the
/// best-performing truncation rules in published comparisons, and restricting `d` to the first half keeps it
/// from discarding most of a run whose tail happens to be quiet. Series shorter than two batches, or with
/// non-finite values, are not truncated (0 is returned).
pub fn mser5_start(xs: &[f64]) -> usize {
    mser5(xs).start
}

/// Outcome of MSER-5 truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mser {
    /// First index of the steady state.
    pub start: usize,
    /// True when the minimum fell on the largest truncation allowed (half the batches): the series may not
    /// have reached steady state, and a longer measurement would tell.
    pub capped: bool,
}

/// MSER-5 truncation (see [`mser5_start`]), also telling whether the truncation hit its cap.
pub fn mser5(xs: &[f64]) -> Mser {
    let k = xs.len() / MSER_BATCH;
    if k < 2 || xs.iter().any(|x| !x.is_finite()) {
        return Mser { start: 0, capped: false };
    }
    let batches: Vec<f64> = xs.chunks_exact(MSER_BATCH).map(|c| c.iter().sum::<f64>() / MSER_BATCH as f64).collect();
    // The sum of squared deviations of every tail `batches[d..]`, accumulated from the end in one pass
    // (Welford's update: stable, and exactly 0 for a constant tail), so a run of millions of steps costs O(n).
    let mut tail_ss = vec![0.0; k];
    let (mut mean, mut ss) = (0.0, 0.0);
    for (i, &y) in batches.iter().enumerate().rev() {
        let n = (k - i) as f64;
        let delta = y - mean;
        mean += delta / n;
        ss += delta * (y - mean);
        tail_ss[i] = ss;
    }
    let mut best = (f64::INFINITY, 0);
    for (d, &ss) in tail_ss.iter().enumerate().take(k / 2 + 1) {
        let len = (k - d) as f64;
        let mser = ss.max(0.0) / (len * len);
        // Strictly smaller: among equal values the earliest (least truncation) wins.
        if mser < best.0 {
            best = (mser, d);
        }
    }
    Mser { start: best.1 * MSER_BATCH, capped: best.1 > 0 && best.1 == k / 2 }
}

#[cfg(test)]
mod tests;
