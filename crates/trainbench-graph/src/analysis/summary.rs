//! What an analysis holds: the per-layer figures ([`LayerAnalysis`]), the totals ([`FlopTotals`],
//! [`ActivationTotals`], [`KindTotals`]), model FLOPs and their convention ([`ModelFlops`]), the recomputable
//! blocks ([`BlockAnalysis`]), the whole [`Analysis`] of a graph, and a step's [`MemoryEstimate`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::frozen_dtype::FrozenDtype;
use crate::training::Precision;

/// Figures of one layer (node) of the graph, per sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LayerAnalysis {
    /// Node name.
    pub name: String,
    /// Operation kind (`conv2d`, `linear`, ...).
    pub op: String,
    /// Sub-network, when the model has several (WGAN-GP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Per-sample output shape.
    pub shape: Vec<usize>,
    /// Parameters this layer owns, trained or frozen (a tied weight counts at its owner).
    pub parameters: u64,
    /// Output elements per sample.
    pub output_elements: u64,
    /// Elements kept for backward per sample, attributed to this layer: its output when some layer saves it,
    /// plus internal tensors it saves (gates, attention probabilities, log-softmax).
    pub saved_elements: u64,
    /// Of those, the elements a half-precision run keeps in fp32 (autocast: the residual stream, the norms'
    /// inputs, the loss's log-probabilities).
    #[serde(default)]
    pub saved_wide_elements: u64,
    /// Precision-independent bytes kept per sample (dropout masks, max-pool indices).
    pub saved_other_bytes: u64,
    /// Forward FLOPs per sample.
    pub forward_flops: u64,
    /// Backward FLOPs per sample.
    pub backward_flops: u64,
    /// Whether the layer's output carries a gradient (it depends on trained parameters).
    pub requires_grad: bool,
    /// The layer's parameters are frozen (LoRA's base model): counted, but not trained.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frozen: bool,
}

/// FLOP totals per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FlopTotals {
    /// Forward pass.
    pub forward_per_sample: u64,
    /// Backward pass.
    pub backward_per_sample: u64,
    /// Forward + backward (one training step, without the optimizer update).
    pub train_per_sample: u64,
}

/// Activation totals per sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActivationTotals {
    /// Sum of all layers' output elements (every intermediate tensor, kept or not).
    pub output_elements_per_sample: u64,
    /// Elements kept for backward (feature maps), at activation precision.
    pub saved_elements_per_sample: u64,
    /// Of those, the elements a half-precision run keeps in fp32 (autocast's policy).
    #[serde(default)]
    pub saved_wide_elements_per_sample: u64,
    /// Precision-independent bytes kept for backward (masks, indices).
    pub saved_other_bytes_per_sample: u64,
    /// Largest transient working set of one layer's backward, in elements.
    pub workspace_elements_per_sample: u64,
    /// The layer with that largest working set.
    pub workspace_layer: String,
}

/// Totals of all layers of one operation kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KindTotals {
    /// Number of layers.
    pub layers: u64,
    /// Trained parameters.
    pub parameters: u64,
    /// Forward FLOPs per sample.
    pub forward_flops: u64,
    /// Forward + backward FLOPs per sample.
    pub train_flops: u64,
    /// Elements kept for backward per sample.
    pub saved_elements: u64,
}

/// The static analysis of a graph (all figures exact for the stated conventions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Analysis {
    /// Model name.
    pub model: String,
    /// Parameters, trained or frozen (tied weights once).
    pub parameters: u64,
    /// Parameters that are trained: all of them but the frozen ones (LoRA: the adapters only).
    pub trainable_parameters: u64,
    /// Parameters one token computes with: all of them but, in each mixture-of-experts layer, the experts the
    /// router does not choose (`experts - top_k` of them); equal to `parameters` for a dense model.
    pub active_parameters: u64,
    /// Non-trained buffers (batch-norm running statistics), elements.
    pub buffers: u64,
    /// The type the frozen parameters are kept in (LoRA's `base_dtype`; fp32, the default, left out of the JSON).
    #[serde(default, skip_serializing_if = "FrozenDtype::is_fp32")]
    pub frozen_dtype: FrozenDtype,
    /// Trained parameters per sub-network (empty for single-network models).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters_by_part: BTreeMap<String, u64>,
    /// Items a sample counts for throughput (tokens per sequence, 1 otherwise).
    pub items_per_sample: u64,
    /// Unit of those items.
    pub item_unit: String,
    /// FLOPs per sample.
    pub flops: FlopTotals,
    /// Activations per sample.
    pub activations: ActivationTotals,
    /// Totals per operation kind.
    pub by_kind: BTreeMap<String, KindTotals>,
    /// Model FLOPs (the numerator of MFU) with their convention.
    pub model_flops: ModelFlops,
    /// Figures of the recomputable blocks, in order (empty when the model has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockAnalysis>,
    /// Caveats specific to this model (what the conventions leave out).
    pub notes: Vec<String>,
    /// Per-layer figures, in graph order (left out of the JSON when emptied for a summary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerAnalysis>,
}

/// Estimated device memory of one training step, in bytes, split by what the memory holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryEstimate {
    /// Batch size.
    pub batch_size: usize,
    /// Precision.
    pub precision: Precision,
    /// Optimizer kind.
    pub optimizer: String,
    /// fp32 parameters and buffers, plus (mixed precision) the 16-bit copies autocast caches for the step.
    pub weights: u64,
    /// fp32 gradients, one per trained parameter.
    pub gradients: u64,
    /// Optimizer state: fp32 buffers per trained parameter (momentum: 1, Adam: 2).
    pub optimizer_state: u64,
    /// Feature maps kept for backward, at activation precision, plus masks and indices, for the whole batch.
    pub activations: u64,
    /// Workspace allowance: the largest transient working set of one layer's backward for the batch.
    pub workspace: u64,
    /// Sum of the above.
    pub total: u64,
    /// Activations' share of the total, in [0, 1].
    pub activation_share: f64,
    /// True when activations exceed weights, gradients and optimizer state together (TBD's finding).
    pub feature_maps_dominate: bool,
}

/// Convention of decoder-only models' model FLOPs (PaLM, appendix B; TorchTitan and nanoGPT count alike).
pub const DECODER_CONVENTION: &str = "palm: 6 x matmul parameters (all but the token-embedding lookup and \
     learned positions; a tied head counts) + 12 x layers x heads x head_dim x seq_len, per token";
/// Convention of a decoder fine-tuned with LoRA: the frozen base computes its forward and its inputs'
/// gradients (2 x its forward), the adapters their forward and both gradients (3 x).
pub const LORA_DECODER_CONVENTION: &str = "palm-lora: 4 x frozen matmul parameters (forward and input gradient, no \
     weight gradient; all but the token-embedding lookup and learned positions, a tied head counts) + 6 x adapter \
     parameters + 12 x layers x heads x head_dim x seq_len, per token";
/// Convention of a mixture-of-experts decoder: PaLM's, over the parameters a token is computed with.
pub const MOE_DECODER_CONVENTION: &str = "palm-moe: 6 x active matmul parameters (per token: the router, the \
     top_k chosen experts of each mixture-of-experts layer and the shared ones, every dense layer; all but the \
     token-embedding lookup and learned positions, a tied head counts) + 12 x layers x heads x head_dim x seq_len, \
     per token";
/// Convention of every other model's model FLOPs.
pub const COUNTER_CONVENTION: &str =
    "flop-counter: forward + backward matmul and convolution FLOPs as torch.utils.flop_counter counts them";

/// Model FLOPs per sample: the work the model needs, whatever the implementation recomputes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelFlops {
    /// FLOPs of one training sample (forward + backward) by the convention.
    pub per_sample: u64,
    /// Per token, for token models (`per_sample / tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_token: Option<u64>,
    /// How they are counted ([`DECODER_CONVENTION`], [`LORA_DECODER_CONVENTION`], [`MOE_DECODER_CONVENTION`] or
    /// [`COUNTER_CONVENTION`]).
    pub convention: String,
}

/// A recomputable block's figures, per sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlockAnalysis {
    /// Block name (`layers.3`).
    pub name: String,
    /// Forward FLOPs of the block (what a recomputation costs again).
    pub forward_flops: u64,
    /// Elements its nodes keep for backward, its output excluded (what checkpointing frees).
    pub saved_elements: u64,
    /// Of those, the elements a half-precision run keeps in fp32.
    #[serde(default)]
    pub saved_wide_elements: u64,
}
