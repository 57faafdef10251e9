//! Change points in a series of measurements (one value per recorded run, in order): E-divisive means with a
//! Welch t-test instead of permutations, applied by binary segmentation, weak change points re-checked, a
//! minimum effect, and a noise level learned from the series itself. Deterministic: no random draws.
//!
//! How [`detect`] decides, in order:
//! 1. The noise of the series is the robust standard deviation of its successive differences
//!    (`1.4826 MAD(x[i+1] - x[i]) / sqrt(2)`), relative to the series' median ([`relative_noise`]). A level shift
//!    moves one difference only, so a step does not inflate it (a plain standard deviation would, and would then
//!    hide later changes).
//! 2. Binary segmentation: in a segment, the split that maximises Matteson & James' divergence statistic
//!    `Q(tau) = m n / (m + n) * (2 E|X - Y| - E|X - X'| - E|Y - Y'|)` (energy distance with exponent 1, the
//!    empirical means over all pairs of the `m` points before and the `n` points from `tau`) is the candidate.
//!    It is kept when Welch's t-test of the two sides gives `p < p_value` and the means move by at least the
//!    effect threshold `max(min_effect, noise_multiple * noise)`; then both sides are searched again. A
//!    segment whose best split fails is not split further.
//! 3. Re-check: each kept change point is tested again against only its neighbouring segments (between the
//!    previous and the next change point); the weakest one that now fails is dropped, its neighbours re-tested,
//!    until every change point passes. A change point found early against a long, mixed segment thus has to
//!    hold up locally.
//!
//! Each side of a change point holds at least `min_points_per_segment` points, so a lone outlier at either end
//! of a series can never be a segment of its own; inside a segment it inflates that side's variance, and the
//! t-test discounts it.

use super::student_t::welch_t_test;
use trainbench_contract::stats::median;

/// Settings of [`detect`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectOptions {
    /// Fewest points on either side of a change point (at least 2 is used). A series needs twice as many.
    pub min_points_per_segment: usize,
    /// Largest two-sided p-value of the Welch t-test that keeps a change point.
    pub p_value: f64,
    /// Smallest relative change of the segment means that counts (0.02 = 2%), whatever the noise.
    pub min_effect: f64,
    /// A change must also move the mean by this many times the series' own relative noise
    /// ([`relative_noise`]): a noisy series needs a larger effect.
    pub noise_multiple: f64,
}

impl Default for DetectOptions {
    /// Five points a side, p < 0.001 (as Apache Otava's default), at least 2% and at least the noise itself.
    fn default() -> Self {
        DetectOptions { min_points_per_segment: 5, p_value: 0.001, min_effect: 0.02, noise_multiple: 1.0 }
    }
}

/// One change point: where the level of the series changes, and by how much.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// Index (into the values given to [`detect`]) of the first point after the change.
    pub index: usize,
    /// Welch t-test p-value of the segments on both sides (each bounded by the neighbouring change points).
    pub p_value: f64,
    /// Mean of the segment before.
    pub mean_before: f64,
    /// Mean of the segment after.
    pub mean_after: f64,
    /// `(mean_after - mean_before) / |mean_before|`, positive when the values went up (see [`relative_change`]).
    pub relative_change: f64,
    /// The series' relative noise ([`relative_noise`]) the decision used.
    pub noise: f64,
    /// The effect threshold applied, `max(min_effect, noise_multiple * noise)`.
    pub effect_threshold: f64,
}

/// A series too short to detect anything in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{points} finite points, but change-point detection needs at least {needed}")]
pub struct TooFewPoints {
    /// Finite values in the series.
    pub points: usize,
    /// Values needed: twice the minimum segment length.
    pub needed: usize,
}

/// `(after - before) / |before|`; when `before` is 0, the change relative to the larger magnitude instead (so
/// -1, 0 or 1), never infinite.
pub fn relative_change(before: f64, after: f64) -> f64 {
    if before != 0.0 {
        (after - before) / before.abs()
    } else if after == 0.0 {
        0.0
    } else {
        after.signum()
    }
}

/// Robust relative noise of a series: `1.4826 MAD(successive differences) / sqrt(2)` (the standard deviation
/// of one point for independent normal noise, untouched by a few level shifts) divided by `|median|`.
/// 0 for fewer than three finite points or a constant series; infinite when the median is 0 but the series
/// moves.
pub fn relative_noise(values: &[f64]) -> f64 {
    let xs: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if xs.len() < 3 {
        return 0.0;
    }
    let diffs: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
    let centre = median(&diffs).unwrap_or(0.0);
    let deviations: Vec<f64> = diffs.iter().map(|d| (d - centre).abs()).collect();
    let sigma = 1.4826 * median(&deviations).unwrap_or(0.0) / std::f64::consts::SQRT_2;
    let scale = median(&xs).unwrap_or(0.0).abs();
    if sigma == 0.0 {
        0.0
    } else if scale > 0.0 {
        sigma / scale
    } else {
        f64::INFINITY
    }
}

/// The split of `xs` that maximises the divergence statistic `Q(tau)` over `tau` in
/// `min_seg..=xs.len() - min_seg` (the earliest on ties); `None` when the segment is too short.
///
/// O(n^2) time and O(n) memory: with `L[k] = sum_{i<k} |x_i - x_k|` and `R[k] = sum_{j>k} |x_j - x_k|`, the
/// within-sums are prefix sums of `L` (pairs left of `tau`) and suffix sums of `R` (pairs from `tau` on), and
/// the between-sum is the total minus both.
pub fn best_split(xs: &[f64], min_seg: usize) -> Option<(usize, f64)> {
    let n = xs.len();
    let min_seg = min_seg.max(2);
    if n < 2 * min_seg {
        return None;
    }
    let mut left = vec![0.0; n];
    let mut right = vec![0.0; n];
    for k in 0..n {
        for i in 0..k {
            let d = (xs[i] - xs[k]).abs();
            left[k] += d;
            right[i] += d;
        }
    }
    let total: f64 = left.iter().sum();
    // within_left = pairs inside [0, tau), within_right = pairs inside [tau, n), both as running sums.
    let mut within_left: f64 = left[..min_seg].iter().sum();
    let mut within_right: f64 = right[min_seg..].iter().sum();
    let mut best: Option<(usize, f64)> = None;
    for tau in min_seg..=n - min_seg {
        if tau > min_seg {
            within_left += left[tau - 1];
            within_right -= right[tau - 1];
        }
        let between = total - within_left - within_right;
        let (m, k) = (tau as f64, (n - tau) as f64);
        let divergence =
            2.0 * between / (m * k) - 2.0 * within_left / (m * (m - 1.0)) - 2.0 * within_right / (k * (k - 1.0));
        let q = m * k / (m + k) * divergence;
        if q.is_finite() && best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// The test of one split: Welch's t-test of `xs[lo..tau]` against `xs[tau..hi]` and the relative change.
#[derive(Debug, Clone, Copy)]
struct SplitTest {
    p_value: f64,
    mean_before: f64,
    mean_after: f64,
    relative_change: f64,
}

fn test_split(xs: &[f64], lo: usize, tau: usize, hi: usize) -> Option<SplitTest> {
    let test = welch_t_test(xs.get(lo..tau)?, xs.get(tau..hi)?)?;
    Some(SplitTest {
        p_value: test.p_value,
        mean_before: test.mean_a,
        mean_after: test.mean_b,
        relative_change: relative_change(test.mean_a, test.mean_b),
    })
}

fn passes(test: &SplitTest, opts: &DetectOptions, effect_threshold: f64) -> bool {
    test.p_value < opts.p_value && test.relative_change.abs() >= effect_threshold
}

/// Change points of `values` (one per recorded run, oldest first), by E-divisive means with a Welch t-test
/// (see the module documentation), in index order. Non-finite values are skipped (the indices still refer to
/// `values`). Fewer than `2 * min_points_per_segment` finite values is [`TooFewPoints`]: no verdict from noise.
pub fn detect(values: &[f64], opts: &DetectOptions) -> Result<Vec<ChangePoint>, TooFewPoints> {
    let min_seg = opts.min_points_per_segment.max(2);
    let kept: Vec<(usize, f64)> = values.iter().copied().enumerate().filter(|(_, x)| x.is_finite()).collect();
    let needed = 2 * min_seg;
    if kept.len() < needed {
        return Err(TooFewPoints { points: kept.len(), needed });
    }
    let xs: Vec<f64> = kept.iter().map(|&(_, x)| x).collect();
    let noise = relative_noise(&xs);
    let effect_threshold = opts.min_effect.max(opts.noise_multiple * noise);

    // Binary segmentation.
    let mut found = Vec::new();
    let mut pending = vec![(0, xs.len())];
    while let Some((lo, hi)) = pending.pop() {
        let Some((offset, _)) = best_split(&xs[lo..hi], min_seg) else { continue };
        let tau = lo + offset;
        if test_split(&xs, lo, tau, hi).is_some_and(|t| passes(&t, opts, effect_threshold)) {
            found.push(tau);
            pending.push((lo, tau));
            pending.push((tau, hi));
        }
    }
    found.sort_unstable();

    // Re-check each change point against its neighbours only; drop the weakest failure until none fails.
    let tests = loop {
        let bounds = |i: usize, found: &[usize]| {
            let lo = if i == 0 { 0 } else { found[i - 1] };
            let hi = found.get(i + 1).copied().unwrap_or(xs.len());
            (lo, hi)
        };
        let tests: Vec<Option<SplitTest>> = (0..found.len())
            .map(|i| {
                let (lo, hi) = bounds(i, &found);
                test_split(&xs, lo, found[i], hi)
            })
            .collect();
        let weakest = tests
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_some_and(|t| passes(&t, opts, effect_threshold)))
            .max_by(|(_, a), (_, b)| {
                let p = |t: &&Option<SplitTest>| t.map_or(f64::INFINITY, |t| t.p_value);
                p(a).total_cmp(&p(b))
            })
            .map(|(i, _)| i);
        match weakest {
            Some(i) => {
                found.remove(i);
            }
            None => break tests,
        }
    };

    Ok(found
        .iter()
        .zip(tests)
        .filter_map(|(&tau, test)| {
            let test = test?;
            Some(ChangePoint {
                index: kept.get(tau)?.0,
                p_value: test.p_value,
                mean_before: test.mean_before,
                mean_after: test.mean_after,
                relative_change: test.relative_change,
                noise,
                effect_threshold,
            })
        })
        .collect())
}
