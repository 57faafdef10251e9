//! What a comparison produces: its settings, the verdict and statistics of each pair, the runs left without a
//! partner, and the whole [`Comparison`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::change::Change;
use super::env::EnvDifference;
use super::utilization;
use crate::stats;

/// Settings of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CompareOptions {
    /// Smallest relative change of the median step time that counts, as a fraction (0.05 = 5%).
    pub threshold: f64,
    /// Significance level of the Mann-Whitney U test.
    pub alpha: f64,
    /// Confidence level of the bootstrap interval.
    pub confidence: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Seed of the bootstrap (results are deterministic for a given seed).
    pub seed: u64,
    /// Compare pairs whose environments differ (device, backend, libraries), with a warning.
    pub allow_env_diff: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            threshold: 0.05,
            alpha: 0.05,
            confidence: 0.95,
            resamples: stats::BOOTSTRAP_RESAMPLES,
            seed: 0x5452_4149_4e42,
            allow_env_diff: false,
        }
    }
}

/// Why a threshold does not parse (the text as given).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    /// Not a number, with or without `%`.
    #[error("`{text}`: {source}")]
    NotANumber {
        /// The text given.
        text: String,
        /// Why it is no number.
        source: std::num::ParseFloatError,
    },
    /// A bare number of 1 or more: a percentage or a fraction?
    #[error("`{text}` is ambiguous; write a percentage (`{value}%`) or a fraction below 1 (`0.05`)")]
    Ambiguous {
        /// The text given.
        text: String,
        /// The number read.
        value: f64,
    },
    /// Below 0% or from 100% up.
    #[error("`{0}` must be between 0% and 100%")]
    OutOfRange(String),
}

/// Parse a threshold written as `5%` or `0.05`.
pub fn parse_threshold(s: &str) -> Result<f64, ThresholdError> {
    let t = s.trim();
    let not_a_number = |source| ThresholdError::NotANumber { text: s.to_string(), source };
    let value = if let Some(p) = t.strip_suffix('%') {
        p.trim().parse::<f64>().map(|v| v / 100.0).map_err(not_a_number)?
    } else {
        let v = t.parse::<f64>().map_err(not_a_number)?;
        if v >= 1.0 {
            return Err(ThresholdError::Ambiguous { text: s.to_string(), value: v });
        }
        v
    };
    if !(0.0..1.0).contains(&value) || !value.is_finite() {
        return Err(ThresholdError::OutOfRange(s.to_string()));
    }
    Ok(value)
}

/// The verdict for one pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significantly slower beyond the threshold: a regression.
    Slower,
    /// Significantly faster beyond the threshold.
    Faster,
    /// No significant change (or a change within the threshold).
    NoChange,
    /// The baseline completed but the candidate failed or ran out of memory: a regression.
    CandidateFailed,
    /// The baseline failed but the candidate completed.
    BaselineFailed,
    /// Neither side measured anything.
    NoData,
    /// The environments differ; not compared (see `--allow-env-diff`).
    NotComparable,
    /// Two MLPerf entries of one benchmark (e.g. a published result and a user's run), compared on time to
    /// train only.
    TimeToTrain,
}

impl Verdict {
    /// True for verdicts that fail `compare` (exit 1).
    pub fn is_regression(self) -> bool {
        matches!(self, Verdict::Slower | Verdict::CandidateFailed)
    }
    /// Short text for tables.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Slower => "SLOWER (regression)",
            Verdict::Faster => "faster",
            Verdict::NoChange => "no significant change",
            Verdict::CandidateFailed => "FAILED in candidate (regression)",
            Verdict::BaselineFailed => "fixed (baseline failed)",
            Verdict::NoData => "no data",
            Verdict::NotComparable => "not comparable",
            Verdict::TimeToTrain => "time to train compared (MLPerf)",
        }
    }
}

/// Step-time statistics of one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTimeComparison {
    /// Median of the baseline's pooled steady-state step times, seconds.
    pub baseline_median_s: f64,
    /// Median of the candidate's pooled steady-state step times, seconds.
    pub candidate_median_s: f64,
    /// candidate / baseline (> 1: slower).
    pub ratio: f64,
    /// Bootstrap confidence interval of the ratio.
    pub ratio_ci: [f64; 2],
    /// `two-level` (repeats, then iterations) or `iterations`.
    pub bootstrap: &'static str,
    /// Two-sided Mann-Whitney U p-value.
    pub p_value: f64,
    /// Probability that a random candidate step is slower than a random baseline step (ties half); 0.5 = none.
    pub prob_candidate_slower: f64,
    /// Samples pooled on each side.
    pub samples: [usize; 2],
    /// Repeats on each side.
    pub repeats: [usize; 2],
    /// Spread `max/min - 1` of the per-repeat medians of each side (baseline, candidate); `None` for a side
    /// with one repeat.
    pub repeat_spread: [Option<f64>; 2],
    /// The larger of the two spreads; `None` with one repeat per side.
    pub noise_floor: Option<f64>,
    /// The threshold the verdict used: the requested one, or the noise floor when that is higher.
    pub threshold: f64,
}

/// One side of a pair: the repeats of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Backend.
    pub backend: String,
    /// Device name.
    pub device: String,
    /// Result files.
    pub files: Vec<String>,
    /// Outcome of each repeat.
    pub outcomes: Vec<String>,
}

/// The comparison of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct PairReport {
    /// Spec name.
    pub spec: String,
    /// Configuration (run id without the repeat).
    pub config: String,
    /// Batch size of the baseline.
    pub batch_size: usize,
    /// Baseline side.
    pub baseline: Side,
    /// Candidate side.
    pub candidate: Side,
    /// The verdict.
    pub verdict: Verdict,
    /// Step-time statistics, when both sides measured steps and the pair was compared.
    pub step_time: Option<StepTimeComparison>,
    /// Samples per second (median over repeats); ratio > 1 is faster.
    pub throughput: Option<Change>,
    /// Highest allocator peak over repeats, bytes; ratio > 1 is more memory.
    pub peak_memory: Option<Change>,
    /// Tokens/s, MFU and HFU with the peaks, where both sides have them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization: Option<utilization::UtilizationChange>,
    /// Data-parallel configurations: the scaling efficiency on each side, against the world-size-1
    /// configuration of the same side's results; ratio > 1 scales better.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling_efficiency: Option<Change>,
    /// Runs with a training target: seconds to the target (median over the repeats that reached it); ratio > 1
    /// is slower to reach it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_target: Option<Change>,
    /// Environment differences; blocking ones make the pair not comparable unless `--allow-env-diff`.
    pub env_differences: Vec<EnvDifference>,
    /// Warnings and remarks.
    pub notes: Vec<String>,
}

/// A run left without a partner.
#[derive(Debug, Clone, Serialize)]
pub struct Unpaired {
    /// Spec name.
    pub spec: String,
    /// Configuration.
    pub config: String,
    /// Backend and device.
    pub target: String,
    /// Number of repeats.
    pub repeats: usize,
}

/// The comparison of two result sets.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The settings used.
    pub options: CompareOptions,
    /// Paired configurations, sorted by spec and configuration.
    pub pairs: Vec<PairReport>,
    /// Configurations only in the baseline.
    pub only_in_baseline: Vec<Unpaired>,
    /// Configurations only in the candidate.
    pub only_in_candidate: Vec<Unpaired>,
}

impl Comparison {
    /// True when any pair is a regression (exit 1).
    pub fn has_regression(&self) -> bool {
        self.pairs.iter().any(|p| p.verdict.is_regression())
    }
    /// Number of pairs per verdict.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for p in &self.pairs {
            *m.entry(p.verdict.label()).or_default() += 1;
        }
        m
    }
}
