//! A configuration's token throughput and FLOP utilisation as the report shows them: tokens per second (global
//! and per device) for token models, MFU and, under activation checkpointing, HFU, each with the precision and
//! the figure of the peak it divides by (medians over repeats; the peak is the first repeat's).

use super::model::{ConfigRow, median_of};
use crate::format;
use crate::result::ModelFlopUtilization;

/// MFU (and HFU) of a configuration with the peak they divide by.
#[derive(Debug, Clone, PartialEq)]
pub struct Utilization {
    /// MFU, median over repeats.
    pub mfu: f64,
    /// HFU, median over the repeats that have one.
    pub hfu: Option<f64>,
    /// The peak's FLOP/s (all devices together).
    pub peak_flop_per_s: f64,
    /// The peak's precision (`bf16`, `tf32`, `fp32`).
    pub precision: String,
    /// Where the peak comes from.
    pub source: String,
    /// The model-FLOP convention.
    pub convention: String,
}

impl ConfigRow<'_> {
    /// Each repeat's MFU figures, where available.
    fn mfus(&self) -> impl Iterator<Item = &ModelFlopUtilization> + '_ {
        self.metrics().filter_map(|m| m.flops.mfu.as_ref().and_then(|x| x.get()))
    }
    /// Median over repeats of tokens per second, global and per device, for token models.
    pub fn tokens_per_s(&self) -> Option<(f64, Option<f64>)> {
        let first = self.first_metrics()?;
        if first.throughput.item_unit != "tokens" {
            return None;
        }
        let global = median_of(self.metrics().map(|m| m.throughput.items_per_s).collect())?;
        let per_device = median_of(self.metrics().filter_map(|m| m.throughput.items_per_s_per_device).collect());
        Some((global, per_device))
    }
    /// MFU and HFU with their peak, where the runs recorded them.
    pub fn utilization(&self) -> Option<Utilization> {
        let first = self.mfus().next()?;
        Some(Utilization {
            mfu: median_of(self.mfus().map(|m| m.mfu).collect())?,
            hfu: median_of(self.mfus().filter_map(|m| m.hfu.as_ref().map(|h| h.hfu)).collect()),
            peak_flop_per_s: first.peak.flop_per_s,
            precision: first.peak.precision.clone(),
            source: first.peak.source.clone(),
            convention: first.convention.clone(),
        })
    }
}

/// A peak in TFLOP/s (or GFLOP/s below one TFLOP/s) with its precision: `989.4 TFLOP/s bf16`.
pub fn peak_text(flop_per_s: f64, precision: &str) -> String {
    if flop_per_s >= 1e12 {
        format!("{} TFLOP/s {precision}", format::sig(flop_per_s / 1e12))
    } else {
        format!("{} GFLOP/s {precision}", format::sig(flop_per_s / 1e9))
    }
}
