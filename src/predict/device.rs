//! What the model knows about the device from a profile: the compute rate a kernel of a given size reaches
//! (the datasheet peak, or the calibrated efficiency curve), the memory bandwidth a working set of a given size
//! reaches (the datasheet's, or the calibrated curve from cache-sized to memory-sized vectors) and the
//! per-operation overhead.

use trainbench_workload::Precision;

use super::PredictError;
use crate::hardware::wire::{Calibration, HardwareFile, KernelPoint};

/// Which efficiency curve a kernel follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelClass {
    /// Matrix products: linear, matmul, attention, recurrent gates.
    Gemm,
    /// Convolutions.
    Conv,
    /// Convolutions' backward (input and weight gradients together).
    ConvBackward,
}

/// The device as the roofline sees it.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// Peak FLOP/s at the precision predicted.
    pub peak_flop_s: f64,
    /// Memory bandwidth, bytes per second (the calibrated triad when there is one, else the datasheet).
    pub memory_bytes_s: f64,
    /// Calibrated (bytes per call, achieved bytes/s net of overhead) by working set, sorted by bytes; empty
    /// without bandwidth points (every size at `memory_bytes_s`).
    bandwidth: Vec<(f64, f64)>,
    /// Element-wise classes measured: (class, forward seconds per element, backward seconds per element), net
    /// of the per-operation overhead.
    elementwise: Vec<(String, f64, f64)>,
    /// Fixed seconds per framework operation (0 in datasheet profiles).
    pub op_overhead_s: f64,
    /// Calibrated (FLOPs per call, achieved FLOP/s net of overhead) points per class, sorted by FLOPs.
    gemm: Vec<(f64, f64)>,
    conv: Vec<(f64, f64)>,
    conv_backward: Vec<(f64, f64)>,
}

impl DeviceModel {
    /// The model of `profile`'s device at `precision`; refuses a precision the profile has no peak for.
    pub fn new(profile: &HardwareFile, precision: Precision) -> Result<Self, PredictError> {
        let p = &profile.device.peak_tflops;
        let peak = match precision {
            Precision::Fp32 => Some(p.fp32),
            Precision::Fp16 => p.fp16,
            Precision::Bf16 => p.bf16,
        }
        .ok_or_else(|| PredictError::NoPeak { profile: profile.name.clone(), precision: precision.as_str() })?;
        let cal = profile.calibration.as_ref();
        let overhead = cal.map_or(0.0, |c| c.op_overhead_us * 1e-6);
        let memory = cal.map_or(profile.device.memory_bandwidth_gbs, |c| c.triad_gbs) * 1e9;
        let curve = |points: fn(&Calibration) -> &Vec<KernelPoint>| {
            cal.map(|c| curve(points(c), precision, overhead)).unwrap_or_default()
        };
        let mut bandwidth: Vec<(f64, f64)> = cal
            .map(|c| {
                c.bandwidth
                    .iter()
                    .filter(|p| p.bytes > 0.0 && p.seconds > 0.0)
                    .map(|p| (p.bytes, p.bytes / net_of_overhead(p.seconds, overhead)))
                    .collect()
            })
            .unwrap_or_default();
        bandwidth.sort_by(|a, b| a.0.total_cmp(&b.0));
        let per_element = |s: f64, n: f64| (s - overhead).max(0.0) / n;
        let elementwise = cal
            .map(|c| {
                c.elementwise
                    .iter()
                    .filter(|p| p.elements > 0.0)
                    .map(|p| {
                        (p.op.clone(), per_element(p.forward_s, p.elements), per_element(p.backward_s, p.elements))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            peak_flop_s: peak * 1e12,
            memory_bytes_s: memory,
            bandwidth,
            elementwise,
            op_overhead_s: overhead,
            gemm: curve(|c| &c.gemm),
            conv: curve(|c| &c.conv),
            conv_backward: curve(|c| &c.conv_backward),
        })
    }

    /// Seconds of `flops` of work in one kernel of `class`: along the calibrated curve (log-log
    /// interpolation between measured sizes, flat beyond them) or at peak without one.
    pub fn compute_s(&self, class: KernelClass, flops: f64) -> f64 {
        if flops <= 0.0 {
            return 0.0;
        }
        let conv = if self.conv.is_empty() { &self.gemm } else { &self.conv };
        let curve = match class {
            KernelClass::Gemm => &self.gemm,
            KernelClass::Conv => conv,
            KernelClass::ConvBackward if self.conv_backward.is_empty() => conv,
            KernelClass::ConvBackward => &self.conv_backward,
        };
        flops / interpolate(curve, flops).unwrap_or(self.peak_flop_s)
    }

    /// Seconds of the element-wise work of a node of `class` on `elements` elements, (forward, backward), when the
    /// class was measured.
    pub fn elementwise_s(&self, class: &str, elements: f64) -> Option<(f64, f64)> {
        self.elementwise.iter().find(|(c, _, _)| c == class).map(|(_, f, b)| (f * elements, b * elements))
    }

    /// Seconds to move `bytes` through device memory: at the bandwidth measured for a working set of that size
    /// (log-log interpolation, flat beyond the measured sizes), else at `memory_bytes_s`.
    pub fn memory_s(&self, bytes: f64) -> f64 {
        if bytes <= 0.0 {
            return 0.0;
        }
        bytes / interpolate(&self.bandwidth, bytes).unwrap_or(self.memory_bytes_s)
    }
}

/// Achieved rate net of the per-call overhead, per measured size, at `precision`.
fn curve(points: &[KernelPoint], precision: Precision, overhead_s: f64) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.precision == precision && p.flops > 0.0 && p.seconds > 0.0)
        .map(|p| (p.flops, p.flops / net_of_overhead(p.seconds, overhead_s)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// A call's seconds without the per-operation overhead the model adds on its own; a call that took less than
/// twice the overhead says little about the rate and is counted at its total time.
fn net_of_overhead(seconds: f64, overhead_s: f64) -> f64 {
    if seconds > 2.0 * overhead_s { seconds - overhead_s } else { seconds }
}

/// The rate at `flops` on a curve of (flops, rate): log-log linear between points, the end value outside.
pub fn interpolate(curve: &[(f64, f64)], flops: f64) -> Option<f64> {
    let first = curve.first()?;
    let last = curve.last()?;
    if flops <= first.0 {
        return Some(first.1);
    }
    if flops >= last.0 {
        return Some(last.1);
    }
    let i = curve.partition_point(|p| p.0 <= flops);
    let (a, b) = (curve[i - 1], curve[i]);
    if b.0 <= a.0 {
        return Some(a.1);
    }
    let t = (flops.ln() - a.0.ln()) / (b.0.ln() - a.0.ln());
    Some((a.1.ln() + t * (b.1.ln() - a.1.ln())).exp())
}
