//! Step-time statistics from a run's bounded [`StepLog`]: the steady-state start (MSER-5), the summary, the
//! median's bootstrap interval and the phase sums, in a cost that does not grow with the run.
//!
//! - Up to [`KEPT_STEPS`](trainbench_contract::steplog::KEPT_STEPS) measured steps the log holds every one of them, in order, and everything is exact:
//!   MSER-5 over the steps, type-7 percentiles, Tukey outliers.
//! - Past it, MSER-5 runs over the log's block means (each block the mean of `width` consecutive steps, so a
//!   batch of MSER-5 is `5 x width` steps) and the start is a multiple of the block width; count, mean,
//!   standard deviation, min, max and the phase means stay exact (merged block summaries); the percentiles
//!   and the outlier count come from the quantile sketch, within [`SKETCH_RELATIVE_ERROR`], over the steps
//!   from the first sketch segment at or after the start.
//! - The bootstrap interval of the median resamples the kept steps from the start on: every step below the
//!   cap, a uniform sample of at most that many of them above it (so the interval is that of a sample
//!   of that size: wider than the whole run's, never narrower).

use trainbench_contract::PhaseTimes;
use trainbench_contract::steplog::{Block, SKETCH_RELATIVE_ERROR, StepLog};

use crate::stats::{self, Summary};

/// What the statistics of one run's measured steps came to.
#[derive(Debug, Clone)]
pub struct StepFigures {
    /// Kept steps' whole-iteration times, in index order.
    pub kept_times: Vec<f64>,
    /// The kept steps' indices among the measured steps when they are a sample; `None` when every step is kept.
    pub kept_indices: Option<Vec<u64>>,
    /// Steps measured.
    pub seen: u64,
    /// First steady-state step.
    pub start: u64,
    /// Whether MSER-5's truncation hit its cap.
    pub capped: bool,
    /// Summary of the steady-state steps.
    pub summary: Summary,
    /// Bootstrap 95% interval of the median.
    pub median_ci: (f64, f64),
    /// Sum of every phase over the steady-state steps, and their count.
    pub phase_sum: PhaseTimes,
    /// Relative error of the percentiles: `None` when exact.
    pub percentile_error: Option<f64>,
}

/// The statistics of `log` (see the module docs); `None` when it holds no step. `seed` drives the bootstrap.
pub fn step_figures(log: &StepLog, seed: u64) -> Option<StepFigures> {
    let kept = log.kept();
    let kept_times: Vec<f64> = kept.iter().map(|k| k.phases.total_s).collect();
    let (start, capped, summary, phase_sum, percentile_error) = if log.is_sampled() {
        let (means, width) = log.block_means();
        let mser = stats::mser5(&means);
        let start = mser.start as u64 * width;
        let (summary, sum) = sampled_summary(log, start)?;
        (start, mser.capped, summary, sum, Some(SKETCH_RELATIVE_ERROR))
    } else {
        let mser = stats::mser5(&kept_times);
        let steady = &kept_times[mser.start..];
        let summary = stats::summarize(steady)?;
        let mut block = Block::default();
        kept[mser.start..].iter().for_each(|k| block.record(&k.phases));
        (mser.start as u64, mser.capped, summary, block.sum, None)
    };
    let steady_kept: Vec<f64> = kept.iter().filter(|k| k.index >= start).map(|k| k.phases.total_s).collect();
    let median_ci = stats::bootstrap_median_ci(&steady_kept, 0.95, stats::BOOTSTRAP_RESAMPLES, seed)
        .unwrap_or((summary.median, summary.median));
    Some(StepFigures {
        kept_indices: log.is_sampled().then(|| kept.iter().map(|k| k.index).collect()),
        kept_times,
        seen: log.seen(),
        start,
        capped,
        summary,
        median_ci,
        phase_sum,
        percentile_error,
    })
}

/// The summary of a sampled log's steps from `start` on: exact moments from the blocks, percentiles and
/// outliers from the sketch.
fn sampled_summary(log: &StepLog, start: u64) -> Option<(Summary, PhaseTimes)> {
    let steady = log.steady_from(start);
    let b = steady.block;
    if b.n == 0 {
        return None;
    }
    let q = |p| steady.sketch.quantile(p);
    let (q1, q3) = (q(0.25)?, q(0.75)?);
    let iqr = q3 - q1;
    let stdev = b.stdev();
    let summary = Summary {
        n: b.n as usize,
        mean: b.mean,
        median: q(0.5)?,
        p5: q(0.05)?,
        p95: q(0.95)?,
        p99: q(0.99)?,
        stdev,
        cv: if b.mean != 0.0 { stdev / b.mean } else { 0.0 },
        min: b.min,
        max: b.max,
        outliers: steady.sketch.count_outside(q1 - 1.5 * iqr, q3 + 1.5 * iqr) as usize,
    };
    Some((summary, b.sum))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainbench_contract::steplog::KEPT_STEPS;

    fn step(t: f64) -> PhaseTimes {
        PhaseTimes { forward_s: t, total_s: t, ..PhaseTimes::default() }
    }

    #[test]
    fn below_the_cap_the_figures_are_the_exact_ones() {
        let mut log = StepLog::new();
        let times: Vec<f64> = (0..200).map(|i| if i < 20 { 0.05 } else { 0.01 + (i % 7) as f64 * 1e-4 }).collect();
        times.iter().for_each(|&t| log.record(step(t), None));
        let f = step_figures(&log, 1).unwrap();
        assert_eq!(f.start, stats::mser5(&times).start as u64);
        assert_eq!(f.summary, stats::summarize(&times[f.start as usize..]).unwrap());
        assert!(f.kept_indices.is_none() && f.percentile_error.is_none());
        assert!((f.phase_sum.total_s - times[f.start as usize..].iter().sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn past_the_cap_the_transient_is_cut_and_the_moments_stay_exact() {
        // A slow transient of 5,000 steps, then 95,000 steady ones alternating 10 and 12 ms.
        let times: Vec<f64> = (0..100_000)
            .map(|i| {
                if i < 5_000 {
                    0.1
                } else if i % 2 == 0 {
                    0.010
                } else {
                    0.012
                }
            })
            .collect();
        let mut log = StepLog::new();
        times.iter().for_each(|&t| log.record(step(t), None));
        let f = step_figures(&log, 1).unwrap();
        assert!(f.start >= 5_000 && f.start < 6_000, "start {}", f.start);
        let steady = &times[f.start as usize..];
        assert_eq!(f.summary.n, steady.len());
        assert!((f.summary.mean - steady.iter().sum::<f64>() / steady.len() as f64).abs() < 1e-12);
        assert_eq!((f.summary.min, f.summary.max), (0.010, 0.012));
        assert!((f.summary.p95 - 0.012).abs() <= 0.012 * SKETCH_RELATIVE_ERROR);
        assert!((f.summary.p5 - 0.010).abs() <= 0.010 * SKETCH_RELATIVE_ERROR);
        assert_eq!(f.summary.outliers, 0);
        assert_eq!(f.kept_times.len(), KEPT_STEPS);
        assert_eq!(f.kept_indices.as_ref().map(Vec::len), Some(KEPT_STEPS));
        assert!(!f.capped);
    }
}
