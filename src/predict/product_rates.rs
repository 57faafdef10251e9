//! Which rate each product class is priced at, by precision and the run's numerics: what the device's tensor
//! cores do with a run that the precision alone does not say.
//!
//! - TF32 (an fp32 run on a GPU profile with a `tf32` peak): matrix products (linear layers, matmuls,
//!   attention's products, LoRA's and the experts') run at the TF32 rate when `training.tf32.matmul` is on
//!   (PyTorch's default: off); convolutions and recurrent layers when `training.tf32.cudnn` is on (default: on).
//! - FP8 (`training.float8` on a bf16 run): the linear layers' products run at the FP8 rate, as TorchTitan's
//!   Float8 training converts `nn.Linear` only; a profile without an `fp8` peak is refused.
//!
//! Everything else of a layer (its bytes, element-wise work, fixed costs) keeps the precision's coefficients.
//! The MFU of an fp32 run with either TF32 switch on is taken over the TF32 peak ([`mfu_peak`]), as
//! `crate::metrics::peak::peak_for` measures a run; a float8 run's over the bf16 peak (its precision).

use trainbench_contract::Numerics;
use trainbench_graph::Precision;
use trainbench_graph::graph::Op;

use super::error::PredictError;
use super::rates::Coefficients;
use crate::hardware::wire::{DeviceKind, HardwareFile};

/// Which switch decides a product's tensor rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductClass {
    /// A linear layer: TF32 by the matmul switch, FP8 under `training.float8`.
    Linear,
    /// Another matrix product through cuBLAS (matmul, attention, LoRA, experts): TF32 by the matmul switch.
    Matmul,
    /// Convolutions and recurrent layers through cuDNN: TF32 by the cuDNN switch.
    Cudnn,
    /// No products (element-wise, normalisation, views): the precision's rate.
    Other,
}

impl ProductClass {
    /// The class of an operation's products.
    pub fn of(op: &Op) -> Self {
        match op {
            Op::Linear { .. } => ProductClass::Linear,
            Op::MatMul { .. } | Op::Attention { .. } | Op::Sdpa { .. } | Op::Lora { .. } | Op::Moe { .. } => {
                ProductClass::Matmul
            }
            Op::Conv { .. } | Op::Rnn { .. } => ProductClass::Cudnn,
            Op::Input { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::RmsNorm { .. }
            | Op::Embedding { .. }
            | Op::Rotary { .. }
            | Op::ClassToken { .. }
            | Op::EmbeddingBag { .. }
            | Op::Pool { .. }
            | Op::AdaptivePool { .. }
            | Op::Act { .. }
            | Op::Softmax
            | Op::Dropout { .. }
            | Op::Add
            | Op::Mul
            | Op::Concat { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Mean { .. }
            | Op::SinusoidalPositions { .. }
            | Op::LearnedPositions { .. }
            | Op::CriticBatch
            | Op::RoiAlign { .. }
            | Op::Loss { .. } => ProductClass::Other,
        }
    }
}

/// The coefficients each product class is priced with, beside the precision's own.
#[derive(Debug, Clone, Default)]
pub struct ProductRates {
    /// cuBLAS products' TF32 coefficients, where TF32 matmuls apply.
    matmul: Option<Coefficients>,
    /// cuDNN products' TF32 coefficients, where TF32 cuDNN applies.
    cudnn: Option<Coefficients>,
    /// Linear layers' FP8 coefficients, under `training.float8`.
    linear: Option<Coefficients>,
}

impl ProductRates {
    /// The rates of a run at `precision` with `numerics` on `profile`. `base` is the precision's coefficients and
    /// `bf16` the device's bf16 ones (`None` where it has no bf16 peak), both with the prediction's terms applied.
    /// Refuses `float8` on a bf16 run where the profile has no FP8 peak; `float8` beside another precision (a
    /// what-if row's) changes nothing.
    pub fn new(
        profile: &HardwareFile,
        precision: Precision,
        numerics: &Numerics,
        base: &Coefficients,
        bf16: Option<&Coefficients>,
    ) -> Result<Self, PredictError> {
        let peaks = &profile.device.peak_tflops;
        let mut rates = Self::default();
        if let Some(tf32) = tf32_peak(profile, precision, numerics) {
            let at_tf32 = tensor_rate(base, bf16, tf32 * 1e12);
            rates.matmul = numerics.tf32.matmul.then(|| at_tf32.clone());
            rates.cudnn = numerics.tf32.cudnn.then_some(at_tf32);
        }
        if numerics.float8 && precision == Precision::Bf16 {
            let fp8 =
                peaks.fp8.filter(|p| *p > 0.0).ok_or_else(|| PredictError::NoFp8 { profile: profile.name.clone() })?;
            rates.linear = Some(tensor_rate(base, bf16, fp8 * 1e12));
        }
        Ok(rates)
    }

    /// The coefficients `op`'s products are priced with: a tensor rate where one applies, else `base`.
    pub fn for_op<'a>(&'a self, op: &Op, base: &'a Coefficients) -> &'a Coefficients {
        let chosen = match ProductClass::of(op) {
            ProductClass::Linear => self.linear.as_ref().or(self.matmul.as_ref()),
            ProductClass::Matmul => self.matmul.as_ref(),
            ProductClass::Cudnn => self.cudnn.as_ref(),
            ProductClass::Other => None,
        };
        chosen.unwrap_or(base)
    }

    /// Whether any product class is priced at a rate other than the precision's.
    pub fn any(&self) -> bool {
        self.matmul.is_some() || self.cudnn.is_some() || self.linear.is_some()
    }
}

/// The TF32 peak (TFLOP/s) an fp32 run with a TF32 switch on reaches on a GPU profile that gives one; `None`
/// otherwise (another precision, both switches off, a CPU, a device without TF32).
fn tf32_peak(profile: &HardwareFile, precision: Precision, numerics: &Numerics) -> Option<f64> {
    let gpu = profile.device.kind == DeviceKind::Gpu;
    let tf32 = profile.device.peak_tflops.tf32.filter(|p| *p > 0.0)?;
    (gpu && precision == Precision::Fp32 && numerics.tf32.any()).then_some(tf32)
}

/// The peak the MFU of a run at `precision` with `numerics` is taken over, TFLOP/s, and its name in
/// `device.peak_tflops`: TF32 for an fp32 run with either TF32 switch on where the profile gives a TF32 peak
/// (as `crate::metrics::peak::peak_for` measures a run), else the precision's; `None` without one.
pub fn mfu_peak(profile: &HardwareFile, precision: Precision, numerics: &Numerics) -> Option<(f64, &'static str)> {
    match tf32_peak(profile, precision, numerics) {
        Some(tf32) => Some((tf32, "tf32")),
        None => profile.device.peak_tflops.of(precision).map(|p| (p, precision.as_str())),
    }
}

/// `base` with its products at a tensor-core rate of `peak_flop_s`: its product curves and grids are `reference`'s
/// (the bf16 coefficients) scaled by `peak_flop_s` over the reference's peak. ASSUMPTION: with no curve measured
/// at TF32 or FP8, a kernel reaches the same share of that peak as a bf16 kernel of the same FLOPs does of the
/// bf16 peak. Without a reference, no curve: every product at the peak.
pub fn tensor_rate(base: &Coefficients, reference: Option<&Coefficients>, peak_flop_s: f64) -> Coefficients {
    let mut c = base.clone();
    c.peak_flop_s = peak_flop_s;
    match reference.filter(|r| r.peak_flop_s > 0.0) {
        Some(r) => {
            let k = peak_flop_s / r.peak_flop_s;
            let scale = |curve: &[(f64, f64)]| curve.iter().map(|&(f, rate)| (f, rate * k)).collect::<Vec<_>>();
            c.gemm = scale(&r.gemm);
            c.conv = scale(&r.conv);
            c.conv_backward = scale(&r.conv_backward);
            c.attention = scale(&r.attention);
            c.grid = r.grid.as_ref().map(|g| g.scaled(k));
            c.conv_grid = r.conv_grid.as_ref().map(|(f, b)| (f.scaled(k), b.scaled(k)));
            c.conv_classes = r.conv_classes.clone();
        }
        None => {
            c.gemm.clear();
            c.conv.clear();
            c.conv_backward.clear();
            c.attention.clear();
            c.grid = None;
            c.conv_grid = None;
            c.conv_classes.clear();
        }
    }
    c
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "product_rates_tests.rs"]
mod tests;
