//! [`Change`]: a summary metric on both sides of a pair and their ratio.

use serde::Serialize;

/// A summary metric on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// Baseline value.
    pub baseline: f64,
    /// Candidate value.
    pub candidate: f64,
    /// candidate / baseline.
    pub ratio: f64,
}

impl Change {
    /// Both values with their ratio, when both are known, the baseline positive and the candidate finite.
    pub fn new(baseline: Option<f64>, candidate: Option<f64>) -> Option<Self> {
        let (b, c) = (baseline?, candidate?);
        (b > 0.0 && c.is_finite()).then(|| Change { baseline: b, candidate: c, ratio: c / b })
    }
}
