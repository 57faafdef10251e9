//! Statistics compare needs beyond `crate::stats`: a two-level (hierarchical) bootstrap of the ratio of
//! medians for results with several repeats per side.
//!
//! Why: step times within one run are correlated (the same process, caches, clocks and neighbours), so
//! consecutive runs differ by more than the spread inside a run. Resampling only the pooled iterations treats
//! 3 x 50 samples as 150 independent ones and gives intervals that are too narrow. Resampling repeats first,
//! then iterations within each drawn repeat, carries the run-to-run variance into the interval.

use crate::stats::{SplitMix64, quantile_sorted};

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
mod tests {
    use super::*;

    fn run(center: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| center * (1.0 + 0.02 * (rng.next_f64() - 0.5))).collect()
    }

    #[test]
    fn run_to_run_spread_widens_the_interval() {
        // Three repeats per side whose centres differ by a few percent (run-to-run noise), no true change.
        let a = vec![run(1.00, 50, 1), run(1.04, 50, 2), run(0.97, 50, 3)];
        let b = vec![run(1.02, 50, 4), run(0.98, 50, 5), run(1.03, 50, 6)];
        let (lo, hi) = hierarchical_ratio_ci(&a, &b, 0.95, 2000, 7).unwrap();
        assert!(lo < 1.0 && hi > 1.0, "[{lo}, {hi}] should contain 1");
        // Pooled single-level bootstrap of the same data is much narrower.
        let pa: Vec<f64> = a.concat();
        let pb: Vec<f64> = b.concat();
        let (plo, phi) = crate::stats::bootstrap_ratio_ci(&pa, &pb, 0.95, 2000, 7).unwrap();
        assert!(phi - plo < (hi - lo) / 2.0, "pooled [{plo}, {phi}] vs hierarchical [{lo}, {hi}]");
    }

    #[test]
    fn a_clear_slowdown_is_outside_the_interval() {
        let a = vec![run(1.0, 40, 1), run(1.01, 40, 2)];
        let b = vec![run(1.2, 40, 3), run(1.21, 40, 4)];
        let (lo, hi) = hierarchical_ratio_ci(&a, &b, 0.95, 1000, 9).unwrap();
        assert!(lo > 1.1 && hi < 1.3, "[{lo}, {hi}]");
    }

    #[test]
    fn empty_sides_give_none() {
        assert!(hierarchical_ratio_ci(&[], &[vec![1.0]], 0.95, 10, 1).is_none());
        assert!(hierarchical_ratio_ci(&[vec![]], &[vec![1.0]], 0.95, 10, 1).is_none());
    }
}
