//! What a prediction says beyond the step's price: whether the step fits in the device's memory (the
//! analysis's estimate against the profile's `memory_gib`), and, where it does, the predicted throughput in
//! the model's items (tokens for token models) and the model FLOP utilisation (MFU) over the profile's peak
//! of the precision predicted, beside that peak, its precision, its source and the FLOP convention. A step
//! that does not fit has neither: its price is what the step would cost if it fit, not a throughput.

use serde::Serialize;
use trainbench_graph::Precision;
use trainbench_graph::analysis::{Analysis, MemoryEstimate};
use trainbench_graph::training::Checkpointing;

use crate::hardware::wire::HardwareFile;
use crate::result::{HardwareFlopUtilization, ModelFlopUtilization, PeakUsed, Sampled};

/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;

/// The step's memory against the device's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryFit {
    /// The analysis's estimate of one device's step (weights, gradients, optimizer state, activations of the
    /// per-device batch, workspace), bytes.
    pub estimate_bytes: u64,
    /// Of that, the activations, bytes.
    pub activation_bytes: u64,
    /// The profile's device memory (`device.memory_gib`), bytes.
    pub device_bytes: u64,
    /// Whether the estimate is within the device memory.
    pub fits: bool,
}

/// Throughput of a step that fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Throughput {
    /// Samples per second, all devices together (the prediction's `samples_per_s`).
    pub samples_per_s: f64,
    /// Items per second, all devices together (`item_unit`: tokens for token models, padding not counted).
    pub items_per_s: f64,
    /// `items_per_s` over the world size.
    pub items_per_s_per_device: f64,
    /// Unit of the items (`tokens`, `samples`).
    pub item_unit: String,
}

/// The figures derived from a prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// The memory estimate against the device's.
    pub memory: MemoryFit,
    /// Throughput, or why there is none (the step does not fit).
    pub throughput: Sampled<Throughput>,
    /// MFU over the profile's peak of the precision predicted, or why there is none.
    pub mfu: Sampled<ModelFlopUtilization>,
}

/// Everything [`figures`] reads about one prediction.
pub struct FigureInput<'a> {
    /// The model's analysis.
    pub analysis: &'a Analysis,
    /// The memory estimate of one device's step.
    pub memory: &'a MemoryEstimate,
    /// The profile predicted on.
    pub profile: &'a HardwareFile,
    /// The precision predicted.
    pub precision: Precision,
    /// The peak the MFU is taken over, FLOP/s (one device), and its name in `device.peak_tflops` (`tf32` for an
    /// fp32 run with TF32 on, else the precision's: `crate::predict::product_rates::mfu_peak`).
    pub peak: (f64, &'static str),
    /// Workers.
    pub world: usize,
    /// Predicted samples per second, all workers together.
    pub samples_per_s: f64,
    /// The activation checkpointing predicted (HFU counts what it recomputes).
    pub checkpointing: Checkpointing,
}

/// The figures of one prediction.
pub fn figures(i: &FigureInput<'_>) -> Figures {
    let device_bytes = (i.profile.device.memory_gib * GIB) as u64;
    let memory = MemoryFit {
        estimate_bytes: i.memory.total,
        activation_bytes: i.memory.activations,
        device_bytes,
        fits: i.memory.total <= device_bytes,
    };
    if !memory.fits {
        let reason = format!(
            "does not fit in device memory: the step needs an estimated {:.1} GiB ({:.1} GiB of activations) \
             per device, the {} profile's device has {:.1} GiB",
            memory.estimate_bytes as f64 / GIB,
            memory.activation_bytes as f64 / GIB,
            i.profile.name,
            i.profile.device.memory_gib
        );
        return Figures { memory, throughput: Sampled::unavailable(reason.clone()), mfu: Sampled::unavailable(reason) };
    }
    let a = i.analysis;
    let items_per_s = i.samples_per_s * a.items_per_sample as f64;
    let throughput = Sampled::Available(Throughput {
        samples_per_s: i.samples_per_s,
        items_per_s,
        items_per_s_per_device: items_per_s / i.world.max(1) as f64,
        item_unit: a.item_unit.clone(),
    });
    Figures { memory, throughput, mfu: mfu(i) }
}

/// MFU of a prediction that fits.
fn mfu(i: &FigureInput<'_>) -> Sampled<ModelFlopUtilization> {
    let model = &i.analysis.model_flops;
    if model.per_sample == 0 {
        return Sampled::unavailable("the analysis counted no model FLOPs");
    }
    let (peak_flop_s, peak_name) = i.peak;
    if peak_flop_s <= 0.0 {
        return Sampled::unavailable(format!("the {} profile has no positive peak", i.profile.name));
    }
    let devices = i.world.max(1);
    let total = peak_flop_s * devices as f64;
    let achieved = model.per_sample as f64 * i.samples_per_s;
    let what = match (i.profile.device.kind, peak_name) {
        (crate::hardware::wire::DeviceKind::Cpu, _) | (_, "fp32") => "",
        _ => " (dense tensor)",
    };
    let mut source =
        format!("profile {}: device.peak_tflops.{peak_name}{what} = {} TFLOP/s", i.profile.name, peak_flop_s / 1e12);
    if devices > 1 {
        source.push_str(&format!(" x {devices} devices"));
    }
    Sampled::Available(ModelFlopUtilization {
        model_flops_per_sample: model.per_sample,
        convention: model.convention.clone(),
        achieved_flop_per_s: achieved,
        mfu: achieved / total,
        peak: PeakUsed {
            flop_per_s: total,
            per_device_flop_per_s: peak_flop_s,
            devices,
            precision: peak_name.to_string(),
            source,
        },
        hfu: (!i.checkpointing.is_none()).then(|| {
            let hardware = i.analysis.hardware_flops(i.checkpointing);
            let achieved = hardware as f64 * i.samples_per_s;
            HardwareFlopUtilization {
                hardware_flops_per_sample: hardware,
                recomputed_flops_per_sample: i.analysis.recomputed_flops(i.checkpointing),
                checkpointing: i.checkpointing.mode_name().to_string(),
                achieved_flop_per_s: achieved,
                hfu: achieved / total,
            }
        }),
    })
}
