//! Comparing two result sets: pair runs by spec and configuration, then decide per pair from the step-time
//! samples whether the candidate is slower, faster or not significantly different.
//!
//! Decision rule (noise-aware): with `r = median(candidate) / median(baseline)` of the steady-state step times
//! (repeats pooled), a pair is a significant change only when all three hold:
//! 1. the bootstrap 95% confidence interval of `r` excludes 1 (two-level bootstrap over repeats and iterations
//!    when both sides have at least two repeats, else over iterations);
//! 2. the two-sided Mann-Whitney U test of the pooled samples gives `p < alpha`;
//! 3. `|r - 1|` exceeds the threshold (default 5%), raised to the *noise floor* when that is higher: the largest
//!    spread `max/min - 1` of the per-repeat medians on either side. Two repeats of one side that differ by 12%
//!    say this machine moves a configuration by 12% with nothing changed, so a 10% difference between the sides
//!    is no evidence of a change. Both sides count, so that a noisy stretch during either run cannot fail a CI
//!    gate; the cost is that a change which makes the candidate itself erratic raises the bar too, so a note
//!    says when the candidate's spread is more than twice the baseline's.
//!
//! The repeats carry the noise between processes only when each ran in a process of its own
//! (`run.isolation = "process"`, recorded in each result); a note says when a side's repeats shared one.
//!
//! `r > 1` is slower (a regression), `r < 1` faster. A configuration that completed in the baseline but failed
//! (or ran out of memory) in the candidate is a regression too.
//!
//! MLPerf entries of one benchmark left unpaired on both sides (a published result imported by `import mlperf`
//! and a user's run of a spec with `[mlperf]`) are paired by that benchmark and compared on time to train
//! only (`mlperf_pairs.rs`, verdict `time_to_train`).

pub mod change;
pub mod comparison;
pub mod env;
pub mod mlperf_pairs;
pub mod pairing;
pub mod render;
pub mod utilization;

pub use change::Change;
pub use comparison::{
    CompareOptions, Comparison, PairReport, Side, StepTimeComparison, ThresholdError, Unpaired, Verdict,
    parse_threshold,
};
pub use env::{EnvDifference, differences};
pub use pairing::{compare, compare_samples};

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
