//! The CI gate's verdict on a candidate against a baseline, each a set of runs of raw steady-state step times:
//! pass, regression, improvement, or inconclusive with an estimate of how many more candidate repeats would
//! decide it.
//!
//! The steps are compared as `compare` compares them, and the decision stays honest about the variance between
//! runs and between the sessions (invocations) runs come from:
//! - the change is `median(candidate steps) / median(baseline steps) - 1` over the pooled raw steps;
//! - the steps' own evidence is compare's: the two-level bootstrap interval (runs, then steps within each drawn
//!   run; [`hierarchical_ratio_ci`]) and the Mann-Whitney U test of the pooled raw steps;
//! - the runs' evidence: a t-test of the difference of the mean run medians, whose standard error is the larger
//!   of the runs' own (the pooled variance of the per-run medians, `1/n_b + 1/n_c`) and the sessions' (the
//!   series' point-to-point noise learned from its history, [`SessionNoise`], `1/k_b + 1/k_c` over the points
//!   each side's runs come from). Steps within a run share a process, and runs of one invocation share the
//!   machine's state of the moment, so neither thousands of steps nor three repeats of one invocation can look
//!   surer than the series has shown the machine to be from one invocation to the next;
//! - the p-value is the larger of the two tests' (both must agree), the interval the hull of the bootstrap's and
//!   the t interval (the bootstrap alone is too narrow with three or four runs a side);
//! - the noise is the relative standard deviation of one run's median, or the series' noise when larger.
//!
//! Outcomes, with "worse" meaning slower for a lower-is-better metric: [`GateOutcome::Regression`] when the
//! interval lies wholly on the worse side of zero, the change is at least the minimum effect and `p` is below
//! the level; [`GateOutcome::Improvement`] the same on the better side; [`GateOutcome::Pass`] when the interval
//! rules out a worsening of the minimum effect; [`GateOutcome::Inconclusive`] otherwise, and whenever a side
//! has fewer runs than `min_runs`. High noise widens the interval past both boundaries: inconclusive, never a
//! regression.
//!
//! Why not a rank test of the per-run medians (this gate's first statistic): it is exact but cannot use the size
//! of a gap, only the order, so three candidate runs against six baseline runs can never reach `p < 0.01` (its
//! floor is 2/84) and every such gate was inconclusive, however large the regression.

use super::bootstrap::{BOOTSTRAP_RESAMPLES, hierarchical_ratio_ci};
use super::rank::mann_whitney;
use super::student_t::{student_t_two_sided_p, student_t_two_sided_quantile};
use trainbench_contract::stats::median;

/// Settings of [`judge`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateOptions {
    /// Smallest relative change that counts as a regression or improvement (0.05 = 5%).
    pub min_effect: f64,
    /// Largest p-value (of the raw steps' rank test and the runs' t-test, see the module documentation) for a
    /// regression or improvement.
    pub p_value: f64,
    /// Confidence level of the interval.
    pub confidence: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed: the same runs and seed give the same verdict.
    pub seed: u64,
    /// Fewest runs on each side for any verdict but inconclusive (at least 2 is used).
    pub min_runs: usize,
    /// Largest number of additional candidate repeats the estimate proposes; beyond it, more repeats are not
    /// expected to decide (`more_repeats_needed: None`).
    pub max_extra_repeats: usize,
}

impl Default for GateOptions {
    /// 5% (as `compare`), p < 0.01 (a merge gate must rarely cry wolf), 95% intervals, three runs a side.
    fn default() -> Self {
        GateOptions {
            min_effect: 0.05,
            p_value: 0.01,
            confidence: 0.95,
            resamples: BOOTSTRAP_RESAMPLES,
            seed: 0x4741_5445,
            min_runs: 3,
            max_extra_repeats: 50,
        }
    }
}

/// What the gate says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateOutcome {
    /// No worsening of the minimum effect or more (an improvement too small to assert also passes).
    Pass,
    /// Worse by at least the minimum effect, with confidence.
    Regression,
    /// Better by at least the minimum effect, with confidence.
    Improvement,
    /// Too few runs, or too much noise to decide at the minimum effect.
    Inconclusive {
        /// Estimated additional candidate repeats that would decide it; `None` when candidate repeats alone are
        /// not expected to (a baseline with too few runs or too much spread of its own, or a change right at the
        /// minimum effect).
        more_repeats_needed: Option<usize>,
    },
}

/// The gate's verdict and the figures behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateVerdict {
    /// The outcome.
    pub outcome: GateOutcome,
    /// `median(candidate) / median(baseline) - 1` over the pooled steps; positive when the candidate's values are
    /// larger (slower, for step times). `NaN` when a side has no finite step.
    pub relative_change: f64,
    /// Confidence interval of `relative_change` (see the module documentation).
    pub interval: (f64, f64),
    /// Two-sided p-value: the larger of the raw steps' Mann-Whitney test and the runs' t-test (1 when it cannot
    /// be computed).
    pub p_value: f64,
    /// Relative standard deviation of one run's median (pooled over both sides), or the series' point-to-point
    /// noise when that is larger (0 with one run a side and no series noise).
    pub noise: f64,
    /// Runs used on each side (baseline, candidate): those with at least one finite step.
    pub runs: (usize, usize),
}

/// How much one session (one invocation's runs, a point of the series) moves from the next, learned from the
/// series' history, and how many sessions each side's runs come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionNoise {
    /// Relative standard deviation of one point about the series' level (the detector's
    /// [`relative_noise`](super::changepoint::relative_noise) of the series' points).
    pub relative_sd: f64,
    /// Points of the baseline's runs.
    pub baseline_points: usize,
    /// Points of the candidate's runs (one for one invocation).
    pub candidate_points: usize,
}

/// The finite steps of each run, runs without any dropped.
fn clean_runs(runs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    runs.iter()
        .map(|r| r.iter().copied().filter(|x| x.is_finite()).collect::<Vec<f64>>())
        .filter(|r| !r.is_empty())
        .collect()
}

/// Mean and sum of squared deviations.
fn mean_and_ss(xs: &[f64]) -> (f64, f64) {
    let mean = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    (mean, xs.iter().map(|x| (x - mean) * (x - mean)).sum())
}

/// Largest `n_a * n_b` for which the Mann-Whitney p-value is computed exactly.
const EXACT_RANK_TEST_MAX_PAIRS: usize = 900;

/// Two-sided Mann-Whitney p-value of `a` against `b`: exact (the permutation distribution of U, counted) for
/// small samples without ties, where the normal approximation is too conservative to let ten runs against three
/// ever reach 1%; the normal approximation of [`mann_whitney`] otherwise. 1 when a side is empty.
pub fn rank_test_p_value(a: &[f64], b: &[f64]) -> f64 {
    let Some(test) = mann_whitney(a, b) else { return 1.0 };
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    let tied = all.windows(2).any(|w| w[0] == w[1]);
    if tied || a.len() * b.len() > EXACT_RANK_TEST_MAX_PAIRS {
        return test.p_value;
    }
    let counts = rank_sum_counts(a.len(), b.len());
    let total: f64 = counts.iter().sum();
    let u = test.u.round() as usize;
    let below: f64 = counts.iter().take(u + 1).sum();
    let above: f64 = counts.iter().skip(u).sum();
    (2.0 * below.min(above) / total).min(1.0)
}

/// How many of the `C(m + n, m)` orderings of `m` against `n` distinct values give each U (pairs with the first
/// sample's value larger): the largest value is either the first sample's (beating all `n`) or the second's, so
/// `f(m, n, u) = f(m - 1, n, u - n) + f(m, n - 1, u)`.
fn rank_sum_counts(m: usize, n: usize) -> Vec<f64> {
    // row[j] = distribution for (i, j), built for i = 0..=m.
    let mut row: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for _ in 1..=m {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        next.push(vec![1.0]);
        for j in 1..=n {
            let (from_a, from_b) = (&row[j], &next[j - 1]);
            let mut dist = vec![0.0; (from_a.len() + j).max(from_b.len())];
            for (u, c) in from_a.iter().enumerate() {
                dist[u + j] += c;
            }
            for (u, c) in from_b.iter().enumerate() {
                dist[u] += c;
            }
            next.push(dist);
        }
        row = next;
    }
    row.pop().unwrap_or_default()
}

/// The spread of the per-run medians and of the series' sessions, and what it implies.
struct RunSpread {
    /// Mean of the baseline's run medians.
    base_mean: f64,
    /// Pooled variance of one run's median (absolute units).
    pooled_var: f64,
    /// Degrees of freedom of the pooled variance.
    pooled_df: usize,
    /// Variance of one session's level (absolute units) and the sessions on each side, when known.
    session: Option<(f64, usize, usize)>,
}

impl RunSpread {
    fn of(base: &[f64], cand: &[f64], session: Option<&SessionNoise>) -> Self {
        let (base_mean, ss_b) = mean_and_ss(base);
        let (_, ss_c) = mean_and_ss(cand);
        let pooled_df = (base.len() + cand.len()).saturating_sub(2);
        let pooled_var = if pooled_df > 0 { (ss_b + ss_c) / pooled_df as f64 } else { 0.0 };
        let session = session
            .filter(|s| s.relative_sd.is_finite() && s.relative_sd > 0.0)
            .map(|s| ((s.relative_sd * base_mean).powi(2), s.baseline_points.max(1), s.candidate_points.max(1)));
        RunSpread { base_mean, pooled_var, pooled_df, session }
    }

    /// Standard error (absolute) of the difference of mean run medians with `n_b` and `n_c` runs: the runs'
    /// own, or the sessions' when larger (more repeats of one invocation never shrink the sessions' part).
    fn standard_error(&self, n_b: usize, n_c: usize) -> f64 {
        let runs = (self.pooled_var / n_b as f64 + self.pooled_var / n_c as f64).sqrt();
        let sessions = self.session.map_or(0.0, |(var, k_b, k_c)| (var / k_b as f64 + var / k_c as f64).sqrt());
        runs.max(sessions)
    }

    /// Degrees of freedom of the t statistic with `n_b` and `n_c` runs.
    fn df(n_b: usize, n_c: usize) -> f64 {
        (n_b + n_c).saturating_sub(2).max(1) as f64
    }

    /// Relative half-width of the t interval of the difference of mean run medians with `n_b` and `n_c` runs.
    fn half_width(&self, n_b: usize, n_c: usize, confidence: f64) -> f64 {
        student_t_two_sided_quantile(1.0 - confidence, Self::df(n_b, n_c)) * self.standard_error(n_b, n_c)
            / self.base_mean.abs()
    }

    /// Two-sided p-value of the t-test of `shift` (relative) with `n_b` and `n_c` runs; 1 without a spread.
    fn p_value(&self, shift: f64, n_b: usize, n_c: usize) -> f64 {
        let se = self.standard_error(n_b, n_c) / self.base_mean.abs();
        if !(se.is_finite() && se > 0.0 && shift.is_finite()) {
            return 1.0;
        }
        student_t_two_sided_p(shift / se, Self::df(n_b, n_c))
    }
}

/// Judge `candidate_steps` against `baseline_steps` (each a list of runs of raw step times or other values);
/// `lower_is_better` says which way is worse (true for step times, false for throughput). See the module
/// documentation for the statistics; `session`, when the series has a history, its point-to-point noise.
/// Never panics: empty or non-finite input gives an inconclusive verdict.
pub fn judge(
    baseline_steps: &[Vec<f64>],
    candidate_steps: &[Vec<f64>],
    lower_is_better: bool,
    opts: &GateOptions,
    session: Option<&SessionNoise>,
) -> GateVerdict {
    let (base, cand) = (clean_runs(baseline_steps), clean_runs(candidate_steps));
    let (n_b, n_c) = (base.len(), cand.len());
    let base_medians: Vec<f64> = base.iter().filter_map(|r| median(r)).collect();
    let cand_medians: Vec<f64> = cand.iter().filter_map(|r| median(r)).collect();
    let pooled_median = |runs: &[Vec<f64>]| median(&runs.concat()).unwrap_or(f64::NAN);
    let relative_change = pooled_median(&cand) / pooled_median(&base) - 1.0;
    let spread = RunSpread::of(&base_medians, &cand_medians, session);
    let run_noise =
        if spread.base_mean != 0.0 && n_b > 0 { spread.pooled_var.sqrt() / spread.base_mean.abs() } else { 0.0 };
    let noise = run_noise.max(session.map_or(0.0, |s| s.relative_sd)).max(0.0);
    let steps_p = mann_whitney(&cand.concat(), &base.concat()).map_or(1.0, |t| t.p_value);
    let min_runs = opts.min_runs.max(2);
    let inconclusive = |more| GateOutcome::Inconclusive { more_repeats_needed: more };

    let mut verdict = GateVerdict {
        outcome: inconclusive(None),
        relative_change,
        interval: (f64::NAN, f64::NAN),
        p_value: 1.0,
        noise,
        runs: (n_b, n_c),
    };
    if n_b == 0 || n_c == 0 || !relative_change.is_finite() || spread.base_mean == 0.0 {
        return verdict;
    }
    let boot = hierarchical_ratio_ci(&base, &cand, opts.confidence, opts.resamples, opts.seed)
        .map(|(lo, hi)| (lo - 1.0, hi - 1.0));
    let mut interval = boot.unwrap_or((relative_change, relative_change));
    let (mean_c, _) = mean_and_ss(&cand_medians);
    let shift = (mean_c - spread.base_mean) / spread.base_mean.abs();
    let mut runs_p = 1.0;
    if spread.pooled_df > 0 || spread.session.is_some() {
        let half = spread.half_width(n_b, n_c, opts.confidence);
        if half.is_finite() {
            interval = (interval.0.min(shift - half), interval.1.max(shift + half));
        }
        runs_p = spread.p_value(shift, n_b, n_c);
    }
    let p_value = steps_p.max(runs_p);
    verdict.interval = interval;
    verdict.p_value = p_value;
    if n_b < min_runs {
        return verdict;
    }
    if n_c < min_runs {
        verdict.outcome = inconclusive(Some(min_runs - n_c));
        return verdict;
    }

    // Work in the "worse" direction: w > 0 is a worsening.
    let sign = if lower_is_better { 1.0 } else { -1.0 };
    let worse = sign * relative_change;
    let (worse_lo, worse_hi) = if lower_is_better { interval } else { (-interval.1, -interval.0) };
    let significant = p_value < opts.p_value;
    verdict.outcome = if worse_lo > 0.0 && worse >= opts.min_effect && significant {
        GateOutcome::Regression
    } else if worse_hi < 0.0 && worse <= -opts.min_effect && significant {
        GateOutcome::Improvement
    } else if worse_hi < opts.min_effect {
        GateOutcome::Pass
    } else {
        inconclusive(more_repeats(worse, n_b, n_c, &spread, opts))
    };
    verdict
}

/// Additional candidate repeats after which the t interval (with the spread seen so far) would be narrow enough
/// to decide: a change at or past the minimum effect needs the interval to clear zero (and the t-test to reach
/// the level), a smaller one needs it to clear the minimum effect. `None` when repeats cannot get there (the
/// baseline's or the sessions' part of the spread alone is too wide).
fn more_repeats(worse: f64, n_b: usize, n_c: usize, spread: &RunSpread, opts: &GateOptions) -> Option<usize> {
    let aim_regression = worse >= opts.min_effect;
    let room = if aim_regression { worse } else { opts.min_effect - worse };
    if room.is_nan() || room <= 1e-9 || spread.pooled_var.is_nan() || spread.pooled_var <= 0.0 {
        return None;
    }
    (n_c + 1..=n_c + opts.max_extra_repeats)
        .find(|&n| {
            spread.half_width(n_b, n, opts.confidence) < room
                && (!aim_regression || spread.p_value(worse, n_b, n) < opts.p_value)
        })
        .map(|n| n - n_c)
}
