//! Seeded bootstrap confidence intervals: of a median, of a ratio of medians, and the two-level
//! (hierarchical) interval of a ratio of medians that compare uses for results with several repeats per side.
//!
//! Why two levels: step times within one run are correlated (the same process, caches, clocks and
//! neighbours), so consecutive runs differ by more than the spread inside a run. Resampling only the pooled
//! iterations treats 3 x 50 samples as 150 independent ones and gives intervals that are too narrow.
//! Resampling repeats first, then iterations within each drawn repeat, carries the run-to-run variance into
//! the interval.

use super::quantile_sorted;

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

/// Median of one two-level resample: draw `groups.len()` groups with replacement, then as many samples from
/// each drawn group as it holds, with replacement; pool and take the median.
fn resampled_pooled_median(groups: &[&[f64]], rng: &mut SplitMix64, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    for _ in 0..groups.len() {
        let g = groups[rng.below(groups.len())];
        buf.extend((0..g.len()).map(|_| g[rng.below(g.len())]));
    }
    buf.sort_by(f64::total_cmp);
    quantile_sorted(buf, 0.5).unwrap_or(f64::NAN)
}

/// Percentile-bootstrap interval (`level`, e.g. 0.95) of `median(b) / median(a)` where each side is a list of
/// repeats (groups of samples), resampled at both levels. Empty groups are ignored; `None` when a side has no
/// samples or `resamples` is 0.
pub fn hierarchical_ratio_ci(
    a: &[Vec<f64>],
    b: &[Vec<f64>],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    let ga: Vec<&[f64]> = a.iter().filter(|g| !g.is_empty()).map(Vec::as_slice).collect();
    let gb: Vec<&[f64]> = b.iter().filter(|g| !g.is_empty()).map(Vec::as_slice).collect();
    if ga.is_empty() || gb.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let mut ratios: Vec<f64> = (0..resamples)
        .map(|_| {
            let ma = resampled_pooled_median(&ga, &mut rng, &mut ba);
            let mb = resampled_pooled_median(&gb, &mut rng, &mut bb);
            mb / ma
        })
        .filter(|r| r.is_finite())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    Some((quantile_sorted(&ratios, tail)?, quantile_sorted(&ratios, 1.0 - tail)?))
}
