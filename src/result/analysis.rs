//! The static analysis a result keeps: parameters, FLOPs (training, model and hardware FLOPs) and the memory
//! estimate at the run's batch size, precision and optimizer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The static analysis of the run's model, at the run's batch size and precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSummary {
    /// Parameters (tied weights once), trained or frozen.
    pub parameters: u64,
    /// Parameters the optimizer trains, when fewer than `parameters` (LoRA: the adapters, the base frozen);
    /// absent when every parameter trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainable_parameters: Option<u64>,
    /// Parameters one token computes with, when fewer than `parameters` (a mixture of experts: the experts the
    /// router leaves out are not counted); absent for a dense model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_parameters: Option<u64>,
    /// Non-trained buffers (batch-norm running statistics), elements.
    pub buffers: u64,
    /// Forward FLOPs per sample (one multiply-add = 2 FLOPs; PyTorch `flop_counter` convention).
    pub forward_flops_per_sample: u64,
    /// Backward FLOPs per sample.
    pub backward_flops_per_sample: u64,
    /// Training FLOPs per sample (forward + backward; the optimizer update is not counted).
    pub train_flops_per_sample: u64,
    /// Model FLOPs per sample (the numerator of MFU) and their convention; absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_flops: Option<trainbench_graph::analysis::ModelFlops>,
    /// Hardware FLOPs per sample under the run's activation checkpointing (training FLOPs + recomputed
    /// forward FLOPs, the numerator of HFU); absent without checkpointing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_flops_per_sample: Option<u64>,
    /// Memory estimate at the run's batch size, precision and optimizer.
    pub memory: MemoryEstimate,
    /// Caveats of the analysis for this model (what its conventions leave out).
    pub notes: Vec<String>,
    /// A pipelined run's chunks (`topology.pipeline_parallel` > 1): which blocks each pipeline rank held, cut
    /// by FLOPs; absent without a pipeline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline_stages: Vec<StageRecord>,
}

/// One pipeline chunk of a run, as its result records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageRecord {
    /// Chunk index in model order (more chunks than ranks with virtual stages).
    pub chunk: usize,
    /// Pipeline rank (stage) that runs it: the `pp` coordinate of its ranks.
    pub stage: usize,
    /// Blocks it holds, `[first, end)`.
    pub blocks: [usize; 2],
    /// Parameters it holds (before any tensor split).
    pub parameters: u64,
    /// Forward + backward FLOPs per sample.
    pub train_flops_per_sample: u64,
    /// Of them, the forward pass's (absent in results written before it was recorded).
    #[serde(default)]
    pub forward_flops_per_sample: u64,
}

/// Memory predicted by the static analysis, bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryEstimate {
    /// Parameters.
    pub weights_bytes: u64,
    /// Gradients.
    pub gradients_bytes: u64,
    /// Optimizer state.
    pub optimizer_state_bytes: u64,
    /// Feature maps kept for the backward pass (plus masks and indices) at the run's batch size and precision.
    pub activations_bytes: u64,
    /// Workspace allowance: the largest transient working set of one layer's backward for the batch.
    pub workspace_bytes: u64,
    /// Sum of the above.
    pub total_bytes: u64,
}
