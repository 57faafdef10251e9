//! FLOP utilisation of a run: the analysis's training FLOPs (`flops.fraction`), its model FLOPs (MFU) and,
//! under activation checkpointing, its hardware FLOPs (HFU), each at the run's throughput over the peak of all
//! its devices together: a data-parallel run over W ranks sustains the global rate on W devices, so the
//! denominator is W x one rank's peak (every rank is taken to have rank 0's device).
//!
//! MFU divides only by a peak of the arithmetic the run computes in ([`PeakPrecision::serves`]): a bf16 run
//! against an fp32 figure (a CPU's GEMM rate, a GPU without bf16) has no MFU, and says why.

use trainbench_contract::RunPlan;

use super::peak::{Peak, PeakPrecision};
use crate::result::{AnalysisSummary, FlopUtilization, HardwareFlopUtilization, Mfu, ModelFlopUtilization, PeakUsed};

/// The utilisation figures of a run at `samples_per_s` (all devices together).
pub(super) fn flop_utilization(
    plan: &RunPlan,
    analysis: Option<&AnalysisSummary>,
    peak: Option<&Peak>,
    samples_per_s: f64,
    tf32: Option<trainbench_contract::Tf32>,
) -> FlopUtilization {
    let devices = plan.topology.world_size().max(1);
    let used = peak.filter(|p| p.flop_per_s > 0.0).map(|p| peak_used(p, devices));
    let flops_per_sample = analysis.map(|a| a.train_flops_per_sample);
    let achieved = flops_per_sample.map(|f| f as f64 * samples_per_s);
    let fraction = achieved.zip(used.as_ref()).map(|(a, p)| a / p.flop_per_s);
    FlopUtilization {
        flops_per_sample,
        achieved_flop_per_s: achieved,
        peak_flop_per_s: used.as_ref().map(|p| p.flop_per_s),
        peak_source: used.as_ref().map(|p| p.source.clone()),
        peak_precision: used.as_ref().map(|p| p.precision.clone()),
        fraction,
        mfu: Some(mfu(plan, analysis, peak, used, samples_per_s)),
        tf32,
    }
}

/// One device's `peak` summed over `devices`.
fn peak_used(peak: &Peak, devices: usize) -> PeakUsed {
    let source = match devices {
        1 => peak.source.clone(),
        n => format!("{} x {n} devices", peak.source),
    };
    PeakUsed {
        flop_per_s: peak.flop_per_s * devices as f64,
        per_device_flop_per_s: peak.flop_per_s,
        devices,
        precision: peak.precision.as_str().to_string(),
        source,
    }
}

/// MFU (and HFU with checkpointing) over `used`, or why there is none.
fn mfu(
    plan: &RunPlan,
    analysis: Option<&AnalysisSummary>,
    peak: Option<&Peak>,
    used: Option<PeakUsed>,
    samples_per_s: f64,
) -> Mfu {
    let Some(a) = analysis else { return Mfu::unavailable("the static analysis of the model failed") };
    let Some(model) = a.model_flops.as_ref().filter(|m| m.per_sample > 0) else {
        return Mfu::unavailable("the analysis counted no model FLOPs");
    };
    let (Some(peak), Some(used)) = (peak, used) else {
        return Mfu::unavailable("no peak FLOP/s is known for the run's device");
    };
    let precision = plan.precision;
    if !peak.precision.serves(precision) {
        return Mfu::unavailable(format!(
            "no {} peak is known for the run's device: the only one is the {} figure ({:.4e} FLOP/s, {}), \
             which is not the rate of the arithmetic the run computes in",
            precision.as_str(),
            peak.precision.as_str(),
            peak.flop_per_s,
            peak.source
        ));
    }
    debug_assert!(peak.precision != PeakPrecision::Tf32 || precision == trainbench_graph::Precision::Fp32);
    let achieved = model.per_sample as f64 * samples_per_s;
    let checkpointing = plan.schedule.checkpointing;
    let hfu = a.hardware_flops_per_sample.filter(|_| !checkpointing.is_none()).map(|hw| {
        let achieved = hw as f64 * samples_per_s;
        HardwareFlopUtilization {
            hardware_flops_per_sample: hw,
            recomputed_flops_per_sample: hw.saturating_sub(a.train_flops_per_sample),
            checkpointing: checkpointing.mode_name().to_string(),
            achieved_flop_per_s: achieved,
            hfu: achieved / used.flop_per_s,
        }
    });
    Mfu::Available(ModelFlopUtilization {
        model_flops_per_sample: model.per_sample,
        convention: model.convention.clone(),
        achieved_flop_per_s: achieved,
        mfu: achieved / used.flop_per_s,
        peak: used,
        hfu,
    })
}
