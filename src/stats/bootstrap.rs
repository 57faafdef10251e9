//! Seeded bootstrap confidence intervals: of a median, of a ratio of medians, and the two-level
//! (hierarchical) interval of a ratio of medians that compare uses for results with several repeats per side.
//!
//! Why two levels: step times within one run are correlated (the same process, caches, clocks and
//! neighbours), so consecutive runs differ by more than the spread inside a run. Resampling only the pooled
//! iterations treats 3 x 50 samples as 150 independent ones and gives intervals that are too narrow.
//! Resampling repeats first, then iterations within each drawn repeat, carries the run-to-run variance into
//! the interval.

use trainbench_contract::stats::quantile_sorted;

pub use trainbench_contract::steplog::SplitMix64;

/// Default number of bootstrap resamples.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Medians of resamples of one sample, without sorting each resample: the sample is sorted once, each draw
/// counts the rank of the value it drew, and the median's order statistics are read off the counts. The same
/// draws give exactly the median that sorting the resample would (type 7), in O(n) per resample.
struct Resampler<'a> {
    xs: &'a [f64],
    sorted: Vec<f64>,
    rank: Vec<usize>,
    counts: Vec<u32>,
}

impl<'a> Resampler<'a> {
    fn new(xs: &'a [f64]) -> Self {
        let mut order: Vec<usize> = (0..xs.len()).collect();
        order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
        let mut rank = vec![0; xs.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let sorted = order.iter().map(|&i| xs[i]).collect();
        Resampler { xs, sorted, rank, counts: vec![0; xs.len()] }
    }

    /// The median of one resample with replacement of `xs.len()` draws.
    fn median(&mut self, rng: &mut SplitMix64) -> f64 {
        let n = self.xs.len();
        self.counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..n {
            self.counts[self.rank[rng.below(n)]] += 1;
        }
        let h = (n - 1) as f64 * 0.5;
        let (lo, hi) = (h.floor() as usize, (h.floor() as usize + 1).min(n - 1));
        let (mut at_lo, mut at_hi) = (None, None);
        let mut seen = 0usize;
        for (r, &c) in self.counts.iter().enumerate() {
            seen += c as usize;
            if at_lo.is_none() && seen > lo {
                at_lo = Some(self.sorted[r]);
            }
            if seen > hi {
                at_hi = Some(self.sorted[r]);
                break;
            }
        }
        match (at_lo, at_hi) {
            (Some(a), Some(b)) => a + (h - lo as f64) * (b - a),
            _ => f64::NAN,
        }
    }
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
    let mut resampler = Resampler::new(xs);
    let stats = (0..resamples).map(|_| resampler.median(&mut rng)).collect();
    percentile_interval(stats, level)
}

/// Percentile-bootstrap confidence interval of `median(b) / median(a)`, resampling both independently;
/// `None` if either is empty. A ratio of step times above 1 means `b` is slower.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], level: f64, resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let (mut ra, mut rb) = (Resampler::new(a), Resampler::new(b));
    let stats = (0..resamples)
        .map(|_| {
            let ma = ra.median(&mut rng);
            let mb = rb.median(&mut rng);
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

#[cfg(test)]
mod resampler_tests {
    use super::*;

    /// The median of a resample found by sorting it, as the bootstrap did before [`Resampler`].
    fn sorted_resample_median(xs: &[f64], rng: &mut SplitMix64) -> f64 {
        let mut v: Vec<f64> = (0..xs.len()).map(|_| xs[rng.below(xs.len())]).collect();
        v.sort_by(f64::total_cmp);
        quantile_sorted(&v, 0.5).unwrap()
    }

    #[test]
    fn counting_ranks_gives_the_median_sorting_the_resample_gives() {
        for n in [1usize, 2, 3, 10, 101, 1000] {
            let xs: Vec<f64> = (0..n).map(|i| ((i * 7919) % 97) as f64 * 0.25).collect();
            let (mut a, mut b) = (SplitMix64::new(9), SplitMix64::new(9));
            let mut r = Resampler::new(&xs);
            for _ in 0..50 {
                assert_eq!(r.median(&mut a), sorted_resample_median(&xs, &mut b), "n {n}");
            }
        }
    }
}
