//! `[model.moe]`: the mixture-of-experts feed-forward of a `gpt` decoder (Mixtral, Qwen3-MoE, DeepSeek-V3).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::graph::MoeRouter;

fn d_every() -> usize {
    1
}

/// Mixture-of-experts feed-forward layers: in each of them a router sends every token to `top_k` of `experts`
/// SwiGLU experts (no biases) of width `expert_ffn`, and sums their outputs weighted by the router; dense layers
/// keep the `ffn` feed-forward. Layer `i` (from 0) is a mixture-of-experts layer when `i >= first_dense` and
/// `(i - first_dense) % every == 0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts per layer (at least 1).
    pub experts: usize,
    /// Experts each token is routed to (1 to `experts`).
    pub top_k: usize,
    /// Inner width of each expert's SwiGLU feed-forward.
    pub expert_ffn: usize,
    /// Shared experts every token goes through (DeepSeek), fused into one SwiGLU feed-forward of width
    /// `shared_experts x expert_ffn`; 0 for none.
    #[serde(default)]
    pub shared_experts: usize,
    /// Every n-th layer (after the first dense ones) is a mixture-of-experts layer.
    #[serde(default = "d_every")]
    pub every: usize,
    /// The first k layers are dense (DeepSeek-V3: 3).
    #[serde(default)]
    pub first_dense: usize,
    /// How the router weighs the chosen experts: `softmax` then top-k, renormalised (Mixtral, Qwen3-MoE), or
    /// `sigmoid` then top-k, normalised (DeepSeek-V3).
    #[serde(default)]
    pub router: MoeRouter,
    /// Capacity factor: an expert takes at most `ceil(capacity_factor x tokens x top_k / experts)` assignments
    /// of a micro-batch; the rest are dropped (and counted). Left out: dropless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_factor: Option<f64>,
    /// Coefficient of the load-balancing loss (`experts x sum_e f_e P_e`, Switch Transformer's); 0 for none.
    #[serde(default)]
    pub aux_loss: f64,
}

impl MoeSpec {
    /// Whether layer `i` (from 0) is a mixture-of-experts layer.
    pub fn is_moe_layer(&self, i: usize) -> bool {
        i >= self.first_dense && (i - self.first_dense) % self.every.max(1) == 0
    }
}
