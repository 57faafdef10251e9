//! Tokens per second and FLOP utilisation of a pair: each side's median over repeats, and the peaks their MFU
//! divides by (a change of precision or device moves the peak, so the MFU change says against which).

use serde::Serialize;

use super::change::Change;
use crate::result::{LoadedResult, ModelFlopUtilization, RunResult};
use crate::stats;

/// Tokens/s, MFU and HFU of a pair, where both sides have them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilizationChange {
    /// Tokens per second, all devices together (token models); ratio > 1 is faster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<Change>,
    /// Model FLOP utilisation; ratio > 1 uses its peak better.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mfu: Option<Change>,
    /// Hardware FLOP utilisation (activation checkpointing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hfu: Option<Change>,
    /// The baseline's MFU peak: figure and precision, `989.4 TFLOP/s bf16`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_peak: Option<String>,
    /// The candidate's MFU peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_peak: Option<String>,
}

fn mfus<'a>(runs: &'a [&'a LoadedResult]) -> impl Iterator<Item = &'a ModelFlopUtilization> + 'a {
    runs.iter().filter_map(|l| l.result.metrics.as_ref()?.flops.mfu.as_ref()?.get())
}

fn median(v: Vec<f64>) -> Option<f64> {
    stats::median(&v)
}

fn tokens(r: &RunResult) -> Option<f64> {
    let t = &r.metrics.as_ref()?.throughput;
    (t.item_unit == "tokens").then_some(t.items_per_s)
}

fn peak(runs: &[&LoadedResult]) -> Option<String> {
    mfus(runs).next().map(|m| crate::report::utilization::peak_text(m.peak.flop_per_s, &m.peak.precision))
}

/// The pair's figures; `None` when neither tokens/s nor MFU are on both sides.
pub(super) fn change(base: &[&LoadedResult], cand: &[&LoadedResult]) -> Option<UtilizationChange> {
    let side = |runs: &[&LoadedResult]| {
        (
            median(runs.iter().filter_map(|l| tokens(&l.result)).collect()),
            median(mfus(runs).map(|m| m.mfu).collect()),
            median(mfus(runs).filter_map(|m| m.hfu.as_ref().map(|h| h.hfu)).collect()),
        )
    };
    let (b, c) = (side(base), side(cand));
    let u = UtilizationChange {
        tokens_per_s: Change::new(b.0, c.0),
        mfu: Change::new(b.1, c.1),
        hfu: Change::new(b.2, c.2),
        baseline_peak: peak(base),
        candidate_peak: peak(cand),
    };
    (u.tokens_per_s.is_some() || u.mfu.is_some()).then_some(u)
}

/// Lines under a pair's throughput: `tokens/s 8.1k -> 8.4k (+3.7%)`, `MFU 41.2% -> 42.9% (989.4 TFLOP/s bf16)`.
pub(super) fn lines(u: &UtilizationChange) -> Vec<String> {
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    let share = |x: f64| format!("{:.1}%", x * 100.0);
    let mut out = Vec::new();
    if let Some(t) = &u.tokens_per_s {
        let sig = crate::format::sig;
        out.push(format!("tokens/s {} -> {} ({})", sig(t.baseline), sig(t.candidate), pct(t.ratio)));
    }
    let peaks = match (&u.baseline_peak, &u.candidate_peak) {
        (Some(b), Some(c)) if b == c => b.clone(),
        (Some(b), Some(c)) => format!("{b} / {c}"),
        _ => String::new(),
    };
    for (name, ch) in [("MFU", &u.mfu), ("HFU", &u.hfu)] {
        if let Some(m) = ch {
            out.push(format!("{name} {} -> {} ({}; {peaks})", share(m.baseline), share(m.candidate), pct(m.ratio)));
        }
    }
    out
}
