//! Computing an analysis: [`analyze`] walks the graph with the per-op rules (`rules.rs`) and the model-FLOPs
//! conventions (`model_flops.rs`); [`memory_estimate`] turns an analysis into a step's device memory.

use std::collections::{BTreeMap, BTreeSet};

use super::autocast;
use super::model_flops;
use super::rules;
use super::summary::{ActivationTotals, Analysis, FlopTotals, KindTotals, LayerAnalysis, MemoryEstimate, ModelFlops};
use crate::graph::{FrozenDtype, Graph, LossKind, Op};
use crate::params::{ParamDecl, graph_tensors};
use crate::training::{Checkpointing, OptimizerSpec, Precision};

/// Whether each node's output carries a gradient: it has trained (not frozen) parameters or an input that does.
fn requires_grad(graph: &Graph, params: &[u64]) -> Vec<bool> {
    let mut rg = vec![false; graph.nodes.len()];
    for (i, n) in graph.nodes.iter().enumerate() {
        rg[i] = params[i] > 0 || (n.tied_to.is_some() && !n.frozen) || n.inputs.iter().any(|&j| rg[j]);
    }
    rg
}

/// The node whose storage a view aliases: reshape, transpose and slice outputs are views of their input, so
/// keeping a view keeps (and counts) the underlying tensor once.
fn storage(graph: &Graph, mut id: usize) -> usize {
    while graph.nodes[id].op.is_view() {
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
    if has(&|op| matches!(op, Op::Lora { .. })) {
        v.push(
            "LoRA: the base model is frozen; its layers' backward computes their inputs' gradients but no weight \
             gradients, and only the adapters hold gradients and optimizer state"
                .into(),
        );
    }
    if has(&|op| matches!(op, Op::Moe { .. })) {
        v.push(
            "mixture of experts: FLOPs and model FLOPs count the router, the top_k chosen experts per token and the \
             shared experts (dropless: tokens a capacity factor drops are counted as computed); parameters count \
             every expert, active_parameters the ones a token computes with"
                .into(),
        );
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
    let mut trained = vec![0u64; n];
    let mut buffers = 0u64;
    for (id, d) in graph_tensors(graph) {
        if d.trainable() {
            trained[id] += d.numel();
        }
        if d.is_parameter() {
            params[id] += d.numel();
        } else {
            buffers += ParamDecl::numel(&d);
        }
    }
    let rg = requires_grad(graph, &trained);

    // Which node outputs are kept for backward, and internal saved tensors per node; which of them a
    // half-precision run keeps in fp32 (`super::autocast`).
    let mut kept = BTreeSet::new();
    let mut kept_wide = BTreeSet::new();
    let wide_out = autocast::wide_outputs(graph);
    let mut extra = vec![0u64; n];
    let mut other = vec![0u64; n];
    for (i, node) in graph.nodes.iter().enumerate() {
        let s = rules::saved(graph, node);
        let policy = autocast::policy(&node.op);
        if s.output {
            kept.insert(i);
            if wide_out[i] {
                kept_wide.insert(i);
            }
        }
        for k in s.inputs {
            let j = storage(graph, node.inputs[k]);
            if !graph.nodes[j].op.is_index_input() {
                kept.insert(j);
                if autocast::saved_wide(policy, wide_out[node.inputs[k]]) {
                    kept_wide.insert(j);
                }
            }
        }
        extra[i] = s.extra_elements;
        other[i] = s.other_bytes;
    }

    let mut layers = Vec::with_capacity(n);
    let mut by_kind: BTreeMap<String, KindTotals> = BTreeMap::new();
    let (mut fwd, mut bwd, mut outputs, mut saved_total, mut other_total) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut wide_total = 0u64;
    let (mut ws_max, mut ws_layer) = (0u64, String::new());
    for (i, node) in graph.nodes.iter().enumerate() {
        let input_grad: Vec<bool> = node.inputs.iter().map(|&j| rg[j]).collect();
        let f = rules::flops(graph, node, &input_grad);
        let saved = extra[i] + if kept.contains(&i) { node.shape.numel() } else { 0 };
        let saved_wide = if autocast::internal_wide(autocast::policy(&node.op), wide_out[i]) { extra[i] } else { 0 }
            + if kept_wide.contains(&i) { node.shape.numel() } else { 0 };
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
        wide_total += saved_wide;
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
            saved_wide_elements: saved_wide,
            saved_other_bytes: other[i],
            forward_flops: f.forward,
            backward_flops: f.backward,
            requires_grad: rg[i],
            frozen: node.frozen,
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
        trainable_parameters: trained.iter().sum(),
        active_parameters: params.iter().sum::<u64>() - graph.nodes.iter().map(rules::inactive_parameters).sum::<u64>(),
        buffers,
        frozen_dtype: graph.frozen_dtype,
        parameters_by_part,
        items_per_sample: graph.items_per_sample,
        item_unit: graph.item_unit.clone(),
        flops: FlopTotals { forward_per_sample: fwd, backward_per_sample: bwd, train_per_sample: fwd + bwd },
        activations: ActivationTotals {
            output_elements_per_sample: outputs,
            saved_elements_per_sample: saved_total,
            saved_wide_elements_per_sample: wide_total,
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
/// Weights are fp32 and gradients fp32 for trained parameters only (mixed precision keeps fp32 master weights and gradients, and autocast
/// additionally caches a 16-bit copy of every trained weight during the step); optimizer state is
/// `optimizer.state_buffers()` fp32 tensors per parameter; activations and workspace scale with the batch at
/// [`Precision::activation_bytes`], but for the kept tensors a half-precision run holds in fp32 (autocast's
/// policy, `super::autocast`: the residual stream, the norms' inputs, the loss's log-probabilities). Framework overhead (CUDA context, allocator fragmentation) is not included.
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
    // Frozen parameters kept in bf16 (LoRA's `base_dtype`) take 2 bytes and need no 16-bit copy.
    let frozen = a.parameters - a.trainable_parameters;
    let (frozen_bytes, cast) = match a.frozen_dtype {
        FrozenDtype::Fp32 => (4 * frozen, a.parameters),
        FrozenDtype::Bf16 => (2 * frozen, a.trainable_parameters),
    };
    let cast_copy = if precision == Precision::Fp32 { 0 } else { 2 * cast };
    let weights = 4 * (a.trainable_parameters + a.buffers) + frozen_bytes + cast_copy;
    // Frozen parameters (LoRA's base) hold neither a gradient nor optimizer state.
    let gradients = 4 * a.trainable_parameters;
    let optimizer_state = 4 * a.trainable_parameters * optimizer.state_buffers();
    // A half-precision run keeps some tensors in fp32 (autocast's policy): 2 more bytes each.
    let wide_extra = a.saved_wide_elements(checkpointing) * precision.kept_fp32_extra_bytes();
    let activations =
        b * (a.saved_elements(checkpointing) * act + wide_extra + a.activations.saved_other_bytes_per_sample);
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
