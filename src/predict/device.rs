//! What the model knows about the device from a profile: the compute rate a kernel of a given size reaches
//! (the datasheet peak, or the calibrated efficiency curve), the memory bandwidth and the per-operation
//! overhead.

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
}

/// The device as the roofline sees it.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// Peak FLOP/s at the precision predicted.
    pub peak_flop_s: f64,
    /// Memory bandwidth, bytes per second (the calibrated triad when there is one, else the datasheet).
    pub memory_bytes_s: f64,
    /// Fixed seconds per framework operation (0 in datasheet profiles).
    pub op_overhead_s: f64,
    /// Calibrated (FLOPs per call, achieved FLOP/s net of overhead) points per class, sorted by FLOPs.
    gemm: Vec<(f64, f64)>,
    conv: Vec<(f64, f64)>,
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
        Ok(Self {
            peak_flop_s: peak * 1e12,
            memory_bytes_s: memory,
            op_overhead_s: overhead,
            gemm: curve(|c| &c.gemm),
            conv: curve(|c| &c.conv),
        })
    }

    /// Seconds of `flops` of work in one kernel of `class`: along the calibrated curve (log-log
    /// interpolation between measured sizes, flat beyond them) or at peak without one.
    pub fn compute_s(&self, class: KernelClass, flops: f64) -> f64 {
        if flops <= 0.0 {
            return 0.0;
        }
        let curve = match class {
            KernelClass::Gemm => &self.gemm,
            KernelClass::Conv if self.conv.is_empty() => &self.gemm,
            KernelClass::Conv => &self.conv,
        };
        flops / interpolate(curve, flops).unwrap_or(self.peak_flop_s)
    }

    /// Seconds to move `bytes` through device memory.
    pub fn memory_s(&self, bytes: f64) -> f64 {
        bytes / self.memory_bytes_s
    }
}

/// Achieved rate net of the per-call overhead, per measured size, at `precision`.
fn curve(points: &[KernelPoint], precision: Precision, overhead_s: f64) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.precision == precision && p.flops > 0.0 && p.seconds > 0.0)
        .map(|p| {
            // A call that took less than the overhead says nothing about the rate: count it at its total time.
            let net = if p.seconds > 2.0 * overhead_s { p.seconds - overhead_s } else { p.seconds };
            (p.flops, p.flops / net)
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
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
