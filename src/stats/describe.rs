//! Descriptive statistics over samples: mean, sample standard deviation, coefficient of variation, Tukey
//! outliers and the [`Summary`] of a sample.

use trainbench_contract::stats::{quantile_sorted, sorted};

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
