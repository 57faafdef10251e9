//! [`FrozenDtype`]: the type a graph's frozen weights are kept in (LoRA's `base_dtype`), which backends
//! allocate them in and the spec names.

use serde::{Deserialize, Serialize};

/// The type the frozen weights of a graph are kept in (LoRA's base model: `[training.lora] base_dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FrozenDtype {
    /// fp32, as the trained weights.
    #[default]
    Fp32,
    /// bfloat16: half the bytes; a layer with bf16 frozen weights computes in bf16 (its floating inputs cast to
    /// bf16, its output cast back), while the adapters and their optimizer state stay fp32.
    Bf16,
}

impl FrozenDtype {
    /// Whether this is the default, fp32.
    pub fn is_fp32(&self) -> bool {
        *self == FrozenDtype::Fp32
    }

    /// The name as written in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            FrozenDtype::Fp32 => "fp32",
            FrozenDtype::Bf16 => "bf16",
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            FrozenDtype::Fp32 => 4,
            FrozenDtype::Bf16 => 2,
        }
    }
}
