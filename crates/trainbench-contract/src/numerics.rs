//! How a run's arithmetic is set up beyond its precision: the TF32 switches of CUDA's fp32 matmuls and cuDNN
//! (PyTorch's `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`), cuDNN's
//! algorithm autotuning and fp16's initial loss scale. The spec's `training` table sets them; every run carries
//! them in [`RunPlan::numerics`](crate::RunPlan::numerics).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether fp32 work may run on TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation) on CUDA devices
/// of compute capability 8.0 and later. The defaults are PyTorch's: cuDNN (convolutions and recurrent layers)
/// on, cuBLAS matmuls off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tf32 {
    /// Matrix multiplications through cuBLAS (linear layers, attention, recurrent cells written as matmuls):
    /// PyTorch's `torch.backends.cuda.matmul.allow_tf32`, off by default.
    #[serde(default)]
    pub matmul: bool,
    /// Convolutions and recurrent layers through cuDNN: PyTorch's `torch.backends.cudnn.allow_tf32`, on by
    /// default.
    #[serde(default = "yes")]
    pub cudnn: bool,
}

fn yes() -> bool {
    true
}

impl Default for Tf32 {
    fn default() -> Self {
        Self { matmul: false, cudnn: true }
    }
}

impl Tf32 {
    /// Both switches off: fp32 is IEEE fp32 everywhere.
    pub const OFF: Tf32 = Tf32 { matmul: false, cudnn: false };

    /// Whether either switch is on.
    pub fn any(self) -> bool {
        self.matmul || self.cudnn
    }

    /// A short form for messages and peak sources: `matmul+cudnn`, `cudnn`, `matmul` or `off`.
    pub fn label(self) -> &'static str {
        match (self.matmul, self.cudnn) {
            (true, true) => "matmul+cudnn",
            (false, true) => "cudnn",
            (true, false) => "matmul",
            (false, false) => "off",
        }
    }
}

/// The numerical settings of one run (all but TF32's default apply on CUDA only; the CPU has no TF32, cuDNN or
/// loss scaling).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Numerics {
    /// TF32 switches for fp32 work on CUDA.
    #[serde(default)]
    pub tf32: Tf32,
    /// Let cuDNN time its convolution algorithms for each new shape and keep the fastest.
    #[serde(default = "yes")]
    pub cudnn_benchmark: bool,
    /// Initial dynamic loss scale of fp16 runs.
    #[serde(default = "default_loss_scale")]
    pub loss_scale: f64,
    /// FP8 (e4m3/e5m2 with dynamic scaling) for the linear layers' products of a bf16 run, as TorchTitan's and
    /// torchao's Float8 training do; off by default. No backend trains it yet: `run` refuses a plan with it, and
    /// `predict` prices those products at the device's FP8 rate.
    #[serde(default, skip_serializing_if = "is_false")]
    pub float8: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn default_loss_scale() -> f64 {
    Numerics::DEFAULT_LOSS_SCALE
}

impl Numerics {
    /// `torch.amp.GradScaler`'s initial scale, 2^16.
    pub const DEFAULT_LOSS_SCALE: f64 = 65536.0;

    /// Whether these are the defaults (plans leave them out of their JSON then).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl Default for Numerics {
    fn default() -> Self {
        Self { tf32: Tf32::default(), cudnn_benchmark: true, loss_scale: Self::DEFAULT_LOSS_SCALE, float8: false }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_pytorchs_and_fill_missing_keys() {
        let t: Tf32 = serde_json::from_str("{}").unwrap();
        assert_eq!(t, Tf32 { matmul: false, cudnn: true });
        let t: Tf32 = serde_json::from_str(r#"{"matmul": true}"#).unwrap();
        assert_eq!(t.label(), "matmul+cudnn");
        assert!(serde_json::from_str::<Tf32>(r#"{"conv": true}"#).is_err());
        assert!(Numerics::default().is_default());
        assert!(!Numerics { loss_scale: 1024.0, ..Numerics::default() }.is_default());
        assert!(!Numerics { float8: true, ..Numerics::default() }.is_default());
        // Off is left out of the JSON (plans written before the field read the same), on round-trips.
        assert!(!serde_json::to_string(&Numerics::default()).unwrap().contains("float8"));
        let on = Numerics { float8: true, ..Numerics::default() };
        assert_eq!(serde_json::from_str::<Numerics>(&serde_json::to_string(&on).unwrap()).unwrap(), on);
        assert_eq!(Tf32::OFF.label(), "off");
        assert!(!Tf32::OFF.any());
    }
}
