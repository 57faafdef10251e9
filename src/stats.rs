//! Pure statistics over step-time samples: quantiles, mean/stdev/CV, Tukey outliers, seeded bootstrap confidence
//! intervals, the Mann-Whitney U test, and MSER-5 steady-state detection. No I/O, no global state.
//!
//! Definitions used throughout:
//! - Quantiles: Hyndman & Fan type 7 (linear interpolation between order statistics at `h = (n - 1) q`), the
//!   default of NumPy, R and Excel's `PERCENTILE.INC`.
//! - Standard deviation: the sample form with `n - 1` in the denominator.
//! - Bootstrap: percentile intervals from resampling with replacement, driven by a seeded SplitMix64
//!   generator, so the same samples and seed always give the same interval.

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

/// A sorted copy of the samples (NaNs sort last, by `total_cmp`).
pub fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile `q` in `0..=1` of already **sorted** samples, type 7 (see the module docs); `None` if empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Quantile `q` of unsorted samples.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    quantile_sorted(&sorted(xs), q)
}

/// Median of unsorted samples.
pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
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

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fast, seedable generator, plenty for resampling indices.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform index in `0..n` (multiply-shift; the bias is below 2^-32 for the sample sizes used here).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
    /// Uniform float in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Default number of bootstrap resamples.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

fn resampled_median(xs: &[f64], rng: &mut SplitMix64, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..xs.len()).map(|_| xs[rng.below(xs.len())]));
    buf.sort_by(f64::total_cmp);
    quantile_sorted(buf, 0.5).unwrap_or(f64::NAN)
}

fn percentile_interval(mut stats: Vec<f64>, level: f64) -> Option<(f64, f64)> {
    stats.retain(|x| x.is_finite());
    stats.sort_by(f64::total_cmp);
    let alpha = (1.0 - level) / 2.0;
    Some((quantile_sorted(&stats, alpha)?, quantile_sorted(&stats, 1.0 - alpha)?))
}

/// Percentile-bootstrap confidence interval (`level`, e.g. 0.95) of the median; `None` for no samples.
pub fn bootstrap_median_ci(xs: &[f64], level: f64, resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if xs.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut buf = Vec::with_capacity(xs.len());
    let stats = (0..resamples).map(|_| resampled_median(xs, &mut rng, &mut buf)).collect();
    percentile_interval(stats, level)
}

/// Percentile-bootstrap confidence interval of `median(b) / median(a)`, resampling both independently;
/// `None` if either is empty. A ratio of step times above 1 means `b` is slower.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], level: f64, resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let stats = (0..resamples)
        .map(|_| {
            let ma = resampled_median(a, &mut rng, &mut ba);
            let mb = resampled_median(b, &mut rng, &mut bb);
            mb / ma
        })
        .collect();
    percentile_interval(stats, level)
}

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U statistic of the first sample (number of pairs `(a, b)` with `a > b`, ties counting one half).
    pub u: f64,
    /// Standardised statistic with continuity and tie corrections.
    pub z: f64,
    /// Two-sided p-value from the normal approximation.
    pub p_value: f64,
    /// Probability that a random `a` exceeds a random `b` (ties half): `U / (n_a n_b)`.
    pub prob_a_greater: f64,
}

/// Mann-Whitney U test of `a` against `b`: mid-ranks for ties, normal approximation with the tie-corrected
/// variance `n_a n_b / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1)))` and a 0.5 continuity correction (as SciPy's
/// `mannwhitneyu(..., method="asymptotic")`). `None` if a sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a.iter().map(|&x| (x, true)).chain(b.iter().map(|&x| (x, false))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let (mut rank_sum_a, mut tie_term) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += mid_rank * all[i..=j].iter().filter(|e| e.1).count() as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let (fa, fb, fnn) = (na as f64, nb as f64, n as f64);
    let u = rank_sum_a - fa * (fa + 1.0) / 2.0;
    let mu = fa * fb / 2.0;
    let var = if n > 1 { fa * fb / 12.0 * ((fnn + 1.0) - tie_term / (fnn * (fnn - 1.0))) } else { 0.0 };
    let (z, p_value) = if var > 0.0 {
        let d = (u - mu).abs() - 0.5;
        let z = d.max(0.0) / var.sqrt() * (u - mu).signum();
        (z, (2.0 * normal_sf(z.abs())).min(1.0))
    } else {
        (0.0, 1.0)
    };
    Some(MannWhitney { u, z, p_value, prob_a_greater: u / (fa * fb) })
}

/// Survival function of the standard normal, `P(Z > x)`.
pub fn normal_sf(x: f64) -> f64 {
    0.5 * erfc(x / std::f64::consts::SQRT_2)
}

/// Complementary error function: a positive-term series of erf for |x| < 3, the Laplace continued fraction
/// beyond (both accurate to about 1e-11 relative or better, ample for p-values).
pub fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        // erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1 * 3 * ... * (2n+1)): no cancellation.
        let (mut term, mut sum, x2) = (x, x, x * x);
        for n in 1..500 {
            term *= 2.0 * x2 / (2 * n + 1) as f64;
            sum += term;
            if term < 1e-17 * sum {
                break;
            }
        }
        1.0 - sum * 2.0 / std::f64::consts::PI.sqrt() * (-x2).exp()
    } else {
        // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...)))))
        let mut f = x;
        for k in (1..=60).rev() {
            f = x + (k as f64 / 2.0) / f;
        }
        (-x * x).exp() / std::f64::consts::PI.sqrt() / f
    }
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
    let mut best = (f64::INFINITY, 0);
    for d in 0..=k / 2 {
        let tail = &batches[d..];
        let m = tail.iter().sum::<f64>() / tail.len() as f64;
        let ss: f64 = tail.iter().map(|y| (y - m) * (y - m)).sum();
        let mser = ss / (tail.len() * tail.len()) as f64;
        // Strictly smaller: among equal values the earliest (least truncation) wins.
        if mser < best.0 {
            best = (mser, d);
        }
    }
    Mser { start: best.1 * MSER_BATCH, capped: best.1 > 0 && best.1 == k / 2 }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
