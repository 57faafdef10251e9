//! Exact static analysis of a workload graph: parameters, FLOPs, activations kept for backward and a memory
//! estimate per batch size, precision and optimizer. Pure and deterministic: the same graph always gives the
//! same numbers, so they are snapshot-tested.
//!
//! # What is counted
//! - **Parameters**: trained tensors of [`crate::params::graph_tensors`] (exactly what backends allocate;
//!   tied weights once; batch-norm running statistics are *buffers*, reported apart).
//! - **FLOPs** (per sample), the convention of PyTorch's `torch.utils.flop_counter`: 2 x multiply-accumulates
//!   of convolutions (transposed ones by their input size, as PyTorch counts them), linear layers, batched
//!   matrix products, the four projections and the two products (`QK^T`, `PV`) of attention — all positions,
//!   causal or not — and the gate matmuls of LSTM/GRU cells (input and recurrent, every step). Nothing for
//!   biases, activations, element-wise sums and products, normalisation, pooling, softmax, dropout,
//!   embedding lookups, positional encodings, RoI align and losses.
//! - **Training FLOPs** = forward + backward. The backward of a layer with weights costs one forward for the
//!   weight gradient plus one for the input gradient, except where the input needs no gradient (it is data,
//!   or computed from data by parameter-free ops only): the first layer after the input costs 1 x. Products
//!   without weights (matmul, attention's core) cost 1 x per operand that needs a gradient. This is what
//!   `FlopCounterMode` records for `loss.backward()`. Not counted: the optimizer step, and the WGAN-GP
//!   penalty's second-order pass (see [`Analysis::notes`]).
//! - **Activations kept for backward** (per sample): every tensor some layer saves for its backward, counted
//!   once even when several layers save it. Rules: conv, linear, batch norm, layer norm (+ mean and rstd per
//!   row), pooling, GELU, leaky ReLU and clipped ReLU save their input; ReLU, tanh, sigmoid and softmax their
//!   output; matmul and element-wise products both operands; max pooling adds 8-byte indices; dropout a
//!   1-byte mask; LSTM/GRU keep, per layer, direction and step, the gates and states ((gates + 2) x hidden)
//!   plus their input; attention keeps its inputs, the projected Q, K, V, the probabilities
//!   (heads x Tq x Tk) and the pre-projection output; cross-entropy keeps the log-softmax, CTC also its
//!   alpha table. Sums, concatenations, reshapes, slices and RoI align keep nothing; a saved view
//!   (reshape, transpose, slice) counts as its underlying tensor. Integer inputs
//!   (token ids, labels) are not counted; dense inputs saved by their first layer are.
//! - **Workspace**: the largest transient working set of one layer's backward: its output gradient, its
//!   inputs' gradients and, for convolutions with kernels above 1x1, an im2col buffer (C_in/groups x
//!   kernel x output positions).

mod model_flops;
mod rules;

pub use model_flops::{BlockAnalysis, COUNTER_CONVENTION, DECODER_CONVENTION, ModelFlops};

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::graph::{Graph, InputKind, LossKind, Op};
use crate::params::{ParamDecl, graph_tensors};
use crate::training::{Checkpointing, OptimizerSpec, Precision};

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
    /// Trained parameters this layer owns (a tied weight counts at its owner).
    pub parameters: u64,
    /// Output elements per sample.
    pub output_elements: u64,
    /// Elements kept for backward per sample, attributed to this layer: its output when some layer saves it,
    /// plus internal tensors it saves (gates, attention probabilities, log-softmax).
    pub saved_elements: u64,
    /// Precision-independent bytes kept per sample (dropout masks, max-pool indices).
    pub saved_other_bytes: u64,
    /// Forward FLOPs per sample.
    pub forward_flops: u64,
    /// Backward FLOPs per sample.
    pub backward_flops: u64,
    /// Whether the layer's output carries a gradient (it depends on trained parameters).
    pub requires_grad: bool,
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
    /// Trained parameters (tied weights once).
    pub parameters: u64,
    /// Non-trained buffers (batch-norm running statistics), elements.
    pub buffers: u64,
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
    /// Optimizer state: fp32 buffers per parameter (momentum: 1, Adam: 2).
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

/// Whether each node's output carries a gradient: it has trained parameters or an input that does.
fn requires_grad(graph: &Graph, params: &[u64]) -> Vec<bool> {
    let mut rg = vec![false; graph.nodes.len()];
    for (i, n) in graph.nodes.iter().enumerate() {
        rg[i] = params[i] > 0 || n.tied_to.is_some() || n.inputs.iter().any(|&j| rg[j]);
    }
    rg
}

/// The node whose storage a view aliases: reshape, transpose and slice outputs are views of their input, so
/// keeping a view keeps (and counts) the underlying tensor once.
fn storage(graph: &Graph, mut id: usize) -> usize {
    while matches!(graph.nodes[id].op, Op::Reshape { .. } | Op::Transpose { .. } | Op::Slice { .. }) {
        id = graph.nodes[id].inputs[0];
    }
    id
}

fn notes(graph: &Graph) -> Vec<String> {
    let has = |f: &dyn Fn(&Op) -> bool| graph.nodes.iter().any(|n| f(&n.op));
    let mut v = Vec::new();
    if has(&|op| matches!(op, Op::Loss { loss: LossKind::Wasserstein { .. }, .. })) {
        v.push(
            "WGAN-GP: counted as one pass of the graph (generator, critic on real + fake + interpolated, backward \
             through both); the gradient penalty's second-order backward and the separate generator update are \
             not counted"
                .into(),
        );
    }
    if has(&|op| matches!(op, Op::Rnn { .. })) {
        v.push("recurrent layers: FLOPs of the gate matmuls only (no gradient for the zero initial state); kept states follow a cuDNN-like reserve".into());
    }
    if has(&|op| matches!(op, Op::Attention { .. })) {
        v.push("attention: math (non-fused) kernels assumed: probabilities kept, causal masks not skipped".into());
    }
    if has(&|op| matches!(op, Op::RoiAlign { .. })) {
        v.push("RoI align over a fixed number of proposals; proposal generation (NMS) is not modelled".into());
    }
    v
}

/// Analyse a graph: parameters, FLOPs, kept activations and workspace, per layer and in total.
pub fn analyze(graph: &Graph) -> Analysis {
    let n = graph.nodes.len();
    let mut params = vec![0u64; n];
    let mut buffers = 0u64;
    for (id, d) in graph_tensors(graph) {
        if d.trainable() {
            params[id] += d.numel();
        } else {
            buffers += ParamDecl::numel(&d);
        }
    }
    let rg = requires_grad(graph, &params);

    // Which node outputs are kept for backward, and internal saved tensors per node.
    let mut kept = BTreeSet::new();
    let mut extra = vec![0u64; n];
    let mut other = vec![0u64; n];
    for (i, node) in graph.nodes.iter().enumerate() {
        let s = rules::saved(graph, node);
        if s.output {
            kept.insert(i);
        }
        for k in s.inputs {
            let j = storage(graph, node.inputs[k]);
            let integer =
                matches!(graph.nodes[j].op, Op::Input { kind: InputKind::Tokens { .. } | InputKind::Labels { .. } });
            if !integer {
                kept.insert(j);
            }
        }
        extra[i] = s.extra_elements;
        other[i] = s.other_bytes;
    }

    let mut layers = Vec::with_capacity(n);
    let mut by_kind: BTreeMap<String, KindTotals> = BTreeMap::new();
    let (mut fwd, mut bwd, mut outputs, mut saved_total, mut other_total) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut ws_max, mut ws_layer) = (0u64, String::new());
    for (i, node) in graph.nodes.iter().enumerate() {
        let input_grad: Vec<bool> = node.inputs.iter().map(|&j| rg[j]).collect();
        let f = rules::flops(graph, node, &input_grad);
        let saved = extra[i] + if kept.contains(&i) { node.shape.numel() } else { 0 };
        if !matches!(node.op, Op::Input { .. }) && rg[i] {
            let ws = rules::workspace(graph, node, &input_grad);
            if ws > ws_max {
                (ws_max, ws_layer) = (ws, node.name.clone());
            }
        }
        fwd += f.forward;
        bwd += f.backward;
        outputs += if matches!(node.op, Op::Input { .. }) { 0 } else { node.shape.numel() };
        saved_total += saved;
        other_total += other[i];
        let k = by_kind.entry(node.op.kind_name().to_string()).or_default();
        k.layers += 1;
        k.parameters += params[i];
        k.forward_flops += f.forward;
        k.train_flops += f.forward + f.backward;
        k.saved_elements += saved;
        layers.push(LayerAnalysis {
            name: node.name.clone(),
            op: node.op.kind_name().to_string(),
            part: node.part.clone(),
            shape: node.shape.0.clone(),
            parameters: params[i],
            output_elements: node.shape.numel(),
            saved_elements: saved,
            saved_other_bytes: other[i],
            forward_flops: f.forward,
            backward_flops: f.backward,
            requires_grad: rg[i],
        });
    }
    let mut parameters_by_part = BTreeMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        if let Some(p) = &node.part {
            *parameters_by_part.entry(p.clone()).or_insert(0) += params[i];
        }
    }
    let mut analysis = Analysis {
        model: graph.name.clone(),
        parameters: params.iter().sum(),
        buffers,
        parameters_by_part,
        items_per_sample: graph.items_per_sample,
        item_unit: graph.item_unit.clone(),
        flops: FlopTotals { forward_per_sample: fwd, backward_per_sample: bwd, train_per_sample: fwd + bwd },
        activations: ActivationTotals {
            output_elements_per_sample: outputs,
            saved_elements_per_sample: saved_total,
            saved_other_bytes_per_sample: other_total,
            workspace_elements_per_sample: ws_max,
            workspace_layer: ws_layer,
        },
        by_kind,
        model_flops: ModelFlops { per_sample: 0, per_token: None, convention: String::new() },
        blocks: Vec::new(),
        notes: notes(graph),
        layers,
    };
    analysis.model_flops = model_flops::model_flops(graph, &analysis);
    analysis.blocks = model_flops::blocks(graph, &analysis);
    analysis
}

/// Estimate the device memory of one training step at `batch` samples.
///
/// Weights and gradients are fp32 (mixed precision keeps fp32 master weights and gradients, and autocast
/// additionally caches a 16-bit copy of every trained weight during the step); optimizer state is
/// `optimizer.state_buffers()` fp32 tensors per parameter; activations and workspace scale with the batch at
/// [`Precision::activation_bytes`]. Framework overhead (CUDA context, allocator fragmentation) is not included.
pub fn memory_estimate(a: &Analysis, batch: usize, precision: Precision, optimizer: &OptimizerSpec) -> MemoryEstimate {
    memory_estimate_checkpointed(a, batch, precision, optimizer, Checkpointing::None)
}

/// [`memory_estimate`] under activation checkpointing: the activations are [`Analysis::saved_elements`].
pub fn memory_estimate_checkpointed(
    a: &Analysis,
    batch: usize,
    precision: Precision,
    optimizer: &OptimizerSpec,
    checkpointing: Checkpointing,
) -> MemoryEstimate {
    let b = batch as u64;
    let act = precision.activation_bytes();
    let cast_copy = if precision == Precision::Fp32 { 0 } else { 2 * a.parameters };
    let weights = 4 * (a.parameters + a.buffers) + cast_copy;
    let gradients = 4 * a.parameters;
    let optimizer_state = 4 * a.parameters * optimizer.state_buffers();
    let activations = b * (a.saved_elements(checkpointing) * act + a.activations.saved_other_bytes_per_sample);
    let workspace = b * a.activations.workspace_elements_per_sample * act;
    let total = weights + gradients + optimizer_state + activations + workspace;
    MemoryEstimate {
        batch_size: batch,
        precision,
        optimizer: optimizer.kind_name().to_string(),
        weights,
        gradients,
        optimizer_state,
        activations,
        workspace,
        total,
        activation_share: if total == 0 { 0.0 } else { activations as f64 / total as f64 },
        feature_maps_dominate: activations > weights + gradients + optimizer_state,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
