//! The gate's three-outcome comparison of a candidate's repeats with a baseline's (PLACEHOLDER of the
//! `history-detect` branch, which owns this file: the lead keeps that branch's version at merge).

use super::{mean, median, normal_sf, stdev};

/// Settings of the gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateOptions {
    /// Smallest relative change that counts.
    pub min_effect: f64,
    /// Largest p-value that still counts as a change.
    pub p_value: f64,
}

impl Default for GateOptions {
    fn default() -> Self {
        Self { min_effect: 0.05, p_value: 0.01 }
    }
}

/// What the gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateOutcome {
    /// No change beyond the minimum effect.
    Pass,
    /// Worse beyond the minimum effect.
    Regression,
    /// Better beyond the minimum effect.
    Improvement,
    /// Neither could be shown.
    Inconclusive {
        /// Repeats of the candidate that would likely decide it.
        more_repeats_needed: Option<usize>,
    },
}

/// The gate's verdict with its figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateVerdict {
    /// The outcome.
    pub outcome: GateOutcome,
    /// Candidate over baseline, minus 1.
    pub relative_change: f64,
    /// Approximate 95% interval of `relative_change`.
    pub interval: (f64, f64),
    /// p-value of the difference.
    pub p_value: f64,
    /// Relative noise of one repeat.
    pub noise: f64,
}

fn medians(runs: &[Vec<f64>]) -> Vec<f64> {
    runs.iter().filter_map(|r| median(r)).collect()
}

/// Judge the candidate's repeats (each a list of step values) against the baseline's.
pub fn judge(
    baseline_steps: &[Vec<f64>],
    candidate_steps: &[Vec<f64>],
    lower_is_better: bool,
    opts: &GateOptions,
) -> GateVerdict {
    let (b, c) = (medians(baseline_steps), medians(candidate_steps));
    let inconclusive = GateVerdict {
        outcome: GateOutcome::Inconclusive { more_repeats_needed: None },
        relative_change: 0.0,
        interval: (f64::NEG_INFINITY, f64::INFINITY),
        p_value: 1.0,
        noise: f64::NAN,
    };
    let (Some(mb), Some(mc)) = (mean(&b), mean(&c)) else { return inconclusive };
    if mb <= 0.0 {
        return inconclusive;
    }
    let pooled: Vec<f64> = baseline_steps.iter().flatten().copied().collect();
    let noise = if b.len() >= 2 { stdev(&b).unwrap_or(0.0) / mb } else { stdev(&pooled).unwrap_or(0.0) / mb };
    let relative = mc / mb - 1.0;
    let se = noise * (1.0 / b.len() as f64 + 1.0 / c.len() as f64).sqrt();
    let p = if se > 0.0 {
        2.0 * normal_sf((relative / se).abs())
    } else if relative == 0.0 {
        1.0
    } else {
        0.0
    };
    let interval = (relative - 1.96 * se, relative + 1.96 * se);
    let worse = if lower_is_better { relative > 0.0 } else { relative < 0.0 };
    let outcome = if p < opts.p_value && relative.abs() >= opts.min_effect {
        if worse { GateOutcome::Regression } else { GateOutcome::Improvement }
    } else if interval.0 > -opts.min_effect && interval.1 < opts.min_effect {
        GateOutcome::Pass
    } else {
        let per_repeat = noise * 1.96 * 2.0 / opts.min_effect;
        let needed = (per_repeat * per_repeat).ceil() as usize;
        GateOutcome::Inconclusive { more_repeats_needed: Some(needed.saturating_sub(c.len()).max(1)) }
    };
    GateVerdict { outcome, relative_change: relative, interval, p_value: p, noise }
}
