//! What a training run computes that a model's analysis depends on: the numeric [`Precision`] and the
//! optimizer ([`OptimizerSpec`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Numeric precision of a training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 32-bit floating point everywhere.
    #[default]
    Fp32,
    /// Mixed precision: fp16 autocast with dynamic loss scaling, fp32 master weights.
    Fp16,
    /// Mixed precision: bf16 autocast, fp32 master weights, no loss scaling.
    Bf16,
}

impl Precision {
    /// Name as written in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }
    /// Bytes per element of activations under this precision.
    pub fn activation_bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            Precision::Fp16 | Precision::Bf16 => 2,
        }
    }
    /// Bytes beyond [`Precision::activation_bytes`] of each kept element a run at this precision holds in fp32
    /// all the same (autocast's fp32 share, `crate::analysis::autocast`): 2 in fp16 and bf16, none in fp32.
    pub fn kept_fp32_extra_bytes(self) -> u64 {
        4 - self.activation_bytes()
    }
}

/// The optimizer and its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum OptimizerSpec {
    /// Stochastic gradient descent, optionally with (Nesterov) momentum.
    Sgd {
        /// Learning rate.
        #[serde(default = "d_lr_sgd")]
        lr: f64,
        /// Momentum (0 for plain SGD; keeps one extra buffer per parameter when > 0).
        #[serde(default)]
        momentum: f64,
        /// L2 weight decay.
        #[serde(default)]
        weight_decay: f64,
        /// Nesterov momentum.
        #[serde(default)]
        nesterov: bool,
    },
    /// Adam (two moment buffers per parameter).
    Adam {
        /// Learning rate.
        #[serde(default = "d_lr_adam")]
        lr: f64,
        /// First-moment decay.
        #[serde(default = "d_beta1")]
        beta1: f64,
        /// Second-moment decay.
        #[serde(default = "d_beta2")]
        beta2: f64,
        /// Numerical epsilon.
        #[serde(default = "d_eps")]
        eps: f64,
        /// L2 weight decay (coupled).
        #[serde(default)]
        weight_decay: f64,
    },
    /// AdamW (decoupled weight decay; two moment buffers per parameter).
    Adamw {
        /// Learning rate.
        #[serde(default = "d_lr_adam")]
        lr: f64,
        /// First-moment decay.
        #[serde(default = "d_beta1")]
        beta1: f64,
        /// Second-moment decay.
        #[serde(default = "d_beta2")]
        beta2: f64,
        /// Numerical epsilon.
        #[serde(default = "d_eps")]
        eps: f64,
        /// Decoupled weight decay.
        #[serde(default = "d_wd")]
        weight_decay: f64,
    },
}

fn d_lr_sgd() -> f64 {
    0.01
}
fn d_lr_adam() -> f64 {
    1e-3
}
fn d_beta1() -> f64 {
    0.9
}
fn d_beta2() -> f64 {
    0.999
}
fn d_eps() -> f64 {
    1e-8
}
fn d_wd() -> f64 {
    0.01
}

impl Default for OptimizerSpec {
    fn default() -> Self {
        OptimizerSpec::Sgd { lr: 0.01, momentum: 0.9, weight_decay: 0.0, nesterov: false }
    }
}

impl OptimizerSpec {
    /// Extra fp32 state buffers kept per parameter element.
    pub fn state_buffers(&self) -> u64 {
        match self {
            OptimizerSpec::Sgd { momentum, .. } if *momentum > 0.0 => 1,
            OptimizerSpec::Sgd { .. } => 0,
            OptimizerSpec::Adam { .. } | OptimizerSpec::Adamw { .. } => 2,
        }
    }
    /// Name as written in specs.
    pub fn kind_name(&self) -> &'static str {
        match self {
            OptimizerSpec::Sgd { .. } => "sgd",
            OptimizerSpec::Adam { .. } => "adam",
            OptimizerSpec::Adamw { .. } => "adamw",
        }
    }
}

/// Which recomputable blocks ([`crate::graph::Graph::blocks`]) activation checkpointing recomputes: their
/// forward runs without keeping activations and is replayed with gradients in the backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Checkpointing {
    /// Every activation is kept (no recomputation).
    #[default]
    None,
    /// Every block is recomputed.
    Full,
    /// Blocks `0, n, 2n, ...` are recomputed (TorchTitan's every-n-th-layer checkpointing).
    EveryN {
        /// Recompute one block in every `n` (at least 1; 1 is the same as `Full`).
        n: u32,
    },
}

impl Checkpointing {
    /// Whether block `index` (in graph order) is recomputed.
    pub fn recomputes(self, index: usize) -> bool {
        match self {
            Checkpointing::None => false,
            Checkpointing::Full => true,
            Checkpointing::EveryN { n } => index % (n.max(1) as usize) == 0,
        }
    }
    /// Whether anything is recomputed.
    pub fn is_none(&self) -> bool {
        *self == Checkpointing::None
    }
    /// Name as written in specs (`none`, `full`, `every_n`).
    pub fn mode_name(self) -> &'static str {
        match self {
            Checkpointing::None => "none",
            Checkpointing::Full => "full",
            Checkpointing::EveryN { .. } => "every_n",
        }
    }
}

/// How one optimizer step is made of forward and backward passes: the activation checkpointing and the
/// number of micro-batches whose gradients accumulate into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StepSchedule {
    /// Activation checkpointing.
    #[serde(default, skip_serializing_if = "Checkpointing::is_none")]
    pub checkpointing: Checkpointing,
    /// Micro-batches per optimizer step (1: no accumulation). Each micro-batch holds the run's batch size,
    /// so a step trains on `grad_accumulation x batch_size` samples.
    #[serde(default = "one_u32")]
    pub grad_accumulation: u32,
}

fn one_u32() -> u32 {
    1
}

impl Default for StepSchedule {
    fn default() -> Self {
        Self { checkpointing: Checkpointing::None, grad_accumulation: 1 }
    }
}

impl StepSchedule {
    /// True for the plain schedule (no checkpointing, no accumulation), left out of JSON.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
    /// Micro-batches per optimizer step, at least 1.
    pub fn micro_batches(&self) -> u64 {
        u64::from(self.grad_accumulation.max(1))
    }
}
