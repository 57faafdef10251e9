//! The roofline of one training step, layer by layer and phase by phase: FLOPs (from the static analysis) over
//! the compute rate a kernel of that size reaches, bytes moved over the memory bandwidth, the larger of the two
//! plus a fixed overhead per framework operation; then the optimizer step, memory-bound. Element-wise operations
//! of a calibrated class (`elementwise.rs`) cost at least their measured per-element work, counted as compute.
//!
//! Bytes moved, per layer and batch (activations at the precision's activation size, weights fp32 or, under
//! autocast, their 2-byte copies): forward reads the inputs and the weights and writes the output; backward
//! reads the output gradient and the saved input, writes the input gradient (where an input needs one), reads
//! the weights and writes their gradient; operations that pass over their data several times (normalisation,
//! softmax, dropout, attention's scores) move more (`extra_bytes`). Views (reshape, transpose, slice) move
//! nothing. The optimizer reads each parameter, its gradient and its state and writes the parameter and the
//! state (fp32).

use serde::Serialize;
use trainbench_graph::analysis::Analysis;
use trainbench_graph::graph::{Graph, InputKind, LossKind, Op};
use trainbench_graph::{OptimizerSpec, Precision};

use super::device::{DeviceModel, KernelClass};

/// What limits a phase of a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// FLOPs over the compute rate exceed bytes over the bandwidth.
    Compute,
    /// Bytes over the bandwidth win (every layer without FLOPs).
    Memory,
}

/// One phase (forward or backward) of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseCost {
    /// FLOPs for the per-device batch.
    pub flops: f64,
    /// Bytes moved through device memory.
    pub bytes: f64,
    /// FLOPs over the rate a kernel of this size reaches, seconds.
    pub compute_s: f64,
    /// Bytes over the memory bandwidth, seconds.
    pub memory_s: f64,
    /// Framework operations times the per-operation overhead, seconds.
    pub overhead_s: f64,
    /// max(compute, memory) + overhead, seconds.
    pub time_s: f64,
    /// Which of compute and memory is larger.
    pub bound: Bound,
}

impl PhaseCost {
    fn new(flops: f64, bytes: f64, compute_s: f64, memory_s: f64, overhead_s: f64) -> Self {
        let bound = if compute_s > 0.0 && compute_s >= memory_s { Bound::Compute } else { Bound::Memory };
        Self { flops, bytes, compute_s, memory_s, overhead_s, time_s: compute_s.max(memory_s) + overhead_s, bound }
    }
}

/// Forward and backward of one layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerCost {
    /// Node name.
    pub name: String,
    /// Operation kind.
    pub op: String,
    /// Forward pass.
    pub forward: PhaseCost,
    /// Backward pass (zero where nothing needs a gradient).
    pub backward: PhaseCost,
}

/// The compute part of one step on one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCompute {
    /// Every layer but the inputs, in graph order.
    pub layers: Vec<LayerCost>,
    /// The optimizer step.
    pub optimizer: PhaseCost,
}

/// Framework operations a node costs (forward, backward), in libtorch eager terms: one kernel for most
/// layers; linear's backward is two products and a bias sum; a recurrent layer runs its cell step by step
/// (about 8 operations per step, layer and direction); attention is its projections, the fused core and
/// reshapes; dropout draws a mask and multiplies.
fn op_count(graph: &Graph, node: &trainbench_graph::graph::Node) -> (f64, f64) {
    match &node.op {
        Op::Input { .. } => (0.0, 0.0),
        Op::Linear { .. } | Op::MatMul { .. } => (1.0, 3.0),
        Op::Rnn { layers, bidirectional, .. } => {
            let t = graph.nodes[node.inputs[0]].shape.0.first().copied().unwrap_or(1) as f64;
            let per = *layers as f64 * if *bidirectional { 2.0 } else { 1.0 } * (1.0 + 8.0 * t);
            (per, 2.0 * per)
        }
        Op::Attention { .. } => (10.0, 14.0),
        // Dropout with p = 0 returns its input: one call, no backward node.
        Op::Dropout { p } if *p <= 0.0 => (1.0, 0.0),
        Op::Dropout { .. } => (2.0, 1.0),
        Op::RoiAlign { .. } => (5.0, 5.0),
        Op::Loss { loss: LossKind::CrossEntropy, .. } => (2.0, 2.0),
        Op::Loss { .. } => (3.0, 3.0),
        _ => (1.0, 1.0),
    }
}

/// Kernels of one forward pass of a node with FLOPs, and which curve they follow: the work of one kernel is the
/// layer's FLOPs over this count.
fn kernels(graph: &Graph, node: &trainbench_graph::graph::Node) -> (f64, KernelClass) {
    match &node.op {
        Op::Conv { .. } => (1.0, KernelClass::Conv),
        Op::Rnn { layers, bidirectional, .. } => {
            let t = graph.nodes[node.inputs[0]].shape.0.first().copied().unwrap_or(1) as f64;
            (*layers as f64 * if *bidirectional { 2.0 } else { 1.0 } * t, KernelClass::Gemm)
        }
        Op::Attention { .. } => (6.0, KernelClass::Gemm),
        _ => (1.0, KernelClass::Gemm),
    }
}

/// A layer's matrix products as `[m, k, n]` (`[m x k] x [k x n]`), forward and backward, where the grid prices
/// them: a linear layer (batch rows against its weight; backward the weight gradient `[k x m] x [m x n]` and, where
/// its input needs one, the input gradient `[m x n] x [n x k]`), a recurrent layer (the input projection over
/// every time step at once, then one hidden product per step, as libtorch runs them on a CPU; backward left to
/// the FLOP ratio), attention (four projections, then scores and context over batch x heads rows).
struct Products {
    forward: Vec<[f64; 3]>,
    backward: Vec<[f64; 3]>,
}

fn products(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    b: f64,
    input_grad: bool,
    trainable: bool,
) -> Option<Products> {
    let first_dim =
        |i: usize| node.inputs.get(i).and_then(|&j| graph.nodes[j].shape.0.first().copied()).unwrap_or(1) as f64;
    match &node.op {
        Op::Linear { in_features, out_features, .. } => {
            let (k, n) = (*in_features as f64, *out_features as f64);
            let rows = graph.nodes[*node.inputs.first()?].shape.numel() as f64 / k.max(1.0);
            let m = b * rows;
            let mut backward = Vec::new();
            if trainable {
                backward.push([k, m, n]);
            }
            if input_grad {
                backward.push([m, n, k]);
            }
            Some(Products { forward: vec![[m, k, n]], backward })
        }
        Op::Rnn { cell, input_size, hidden, layers, bidirectional } => {
            let t = first_dim(0);
            let gates = match cell {
                trainbench_graph::graph::RnnCell::Lstm => 4.0,
                trainbench_graph::graph::RnnCell::Gru => 3.0,
            };
            let (h, dirs) = (*hidden as f64, if *bidirectional { 2.0 } else { 1.0 });
            let mut forward = Vec::new();
            for l in 0..*layers {
                let input = if l == 0 { *input_size as f64 } else { h * dirs };
                for _ in 0..*bidirectional as usize + 1 {
                    forward.push([t * b, input, gates * h]);
                    forward.extend(std::iter::repeat_n([b, h, gates * h], t as usize));
                }
            }
            Some(Products { forward, backward: Vec::new() })
        }
        Op::Attention { embed_dim, heads, kdim, vdim, .. } => {
            let (tq, tk) = (first_dim(0), first_dim(1));
            let forward = super::elementwise::attention_products(
                b,
                tq,
                tk,
                *embed_dim as f64,
                *kdim as f64,
                *vdim as f64,
                *heads as f64,
            );
            Some(Products { forward, backward: Vec::new() })
        }
        _ => None,
    }
}

/// A plain convolution's (channels, output pixels) for the calibrated grid: the geometric mean of its input and
/// output channels, and its output elements over its output channels. Grouped and transposed convolutions are
/// left to the curve.
fn conv_size(node: &trainbench_graph::graph::Node, output_elements: f64) -> Option<(f64, f64)> {
    match &node.op {
        Op::Conv { in_channels, out_channels, groups: 1, transposed: false, .. } if *out_channels > 0 => {
            Some((((*in_channels * *out_channels) as f64).sqrt(), output_elements / *out_channels as f64))
        }
        _ => None,
    }
}

/// Fixed seconds of a node (forward, backward): with the training step calibrated, a linear layer's measured
/// cost, else its forward operations at one operation's forward and backward cost each (each forward operation
/// records one backward node); without it, every operation at the per-operation overhead.
fn fixed_costs(node: &trainbench_graph::graph::Node, ops_f: f64, ops_b: f64, device: &DeviceModel) -> (f64, f64) {
    match &device.nodes {
        Some(n) if matches!(node.op, Op::Linear { .. }) => n.linear,
        Some(n) => (ops_f * n.op.0, if ops_b > 0.0 { ops_f * n.op.1 } else { 0.0 }),
        None => (ops_f * device.op_overhead_s, ops_b * device.op_overhead_s),
    }
}

/// Bytes a layer moves beyond reading its inputs and writing its output once (forward, backward), for the
/// operations that make several passes: normalisations compute statistics before normalising (and their
/// backward reads input and output gradient twice); softmax and log-softmax take a maximum and a sum first;
/// dropout writes and reads a mask; attention's core writes the score tensor (heads x Tq x Tk), softmaxes it in
/// place and reads it for the weighted sum (its backward passes over it about twice as often).
fn extra_bytes(graph: &Graph, node: &trainbench_graph::graph::Node, out_bytes: f64, b: f64, act: f64) -> (f64, f64) {
    match &node.op {
        Op::BatchNorm { .. } | Op::LayerNorm { .. } => (out_bytes, 2.0 * out_bytes),
        Op::Softmax => (out_bytes, out_bytes),
        Op::Loss { loss: LossKind::CrossEntropy, .. } => {
            let logits = graph.nodes[node.inputs[0]].shape.numel() as f64 * b * act;
            (3.0 * logits, 2.0 * logits)
        }
        Op::Dropout { .. } => (out_bytes / act, out_bytes / act),
        Op::Attention { heads, .. } => {
            let tq = graph.nodes[node.inputs[0]].shape.0.first().copied().unwrap_or(1) as f64;
            let tk = graph.nodes[node.inputs[1]].shape.0.first().copied().unwrap_or(1) as f64;
            let scores = *heads as f64 * tq * tk * b * act;
            (4.0 * scores, 8.0 * scores)
        }
        _ => (0.0, 0.0),
    }
}

/// The element-wise work of a recurrent layer's cells (forward, backward seconds), when the activation classes
/// were measured: per time step, layer and direction, an LSTM cell evaluates three sigmoids and two tanhs and
/// combines them with five products and sums over `batch x hidden` elements (a GRU two sigmoids, one tanh and
/// six products and sums), each a call of its own on a CPU whose fixed cost the recurrent layer's operation
/// count already holds; priced per element at the `gelu` class (tanh, sigmoid) and the `relu` class (one cheap
/// pass).
fn rnn_cell_work(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    b: f64,
    device: &DeviceModel,
) -> Option<(f64, f64)> {
    let Op::Rnn { cell, hidden, layers, bidirectional, .. } = &node.op else {
        return None;
    };
    let steps = graph.nodes[*node.inputs.first()?].shape.0.first().copied().unwrap_or(1) as f64;
    let cells = steps * *layers as f64 * if *bidirectional { 2.0 } else { 1.0 };
    let (curved, cheap) = match cell {
        trainbench_graph::graph::RnnCell::Lstm => (5.0, 5.0),
        trainbench_graph::graph::RnnCell::Gru => (3.0, 6.0),
    };
    let elements = b * *hidden as f64;
    let (cf, cb) = device.elementwise_marginal_s("gelu", elements)?;
    let (pf, pb) = device.elementwise_marginal_s("relu", elements)?;
    Some((cells * (curved * cf + cheap * pf), cells * (curved * cb + cheap * pb)))
}

/// Gradient sums autograd makes for each node's output in backward: one fewer than the nodes that read it and
/// pass a gradient back (a node reading it several times, as self-attention's query, key and value, counts once:
/// its backward sums them itself).
fn gradient_sums(graph: &Graph, analysis: &Analysis) -> Vec<f64> {
    let mut readers = vec![0usize; graph.nodes.len()];
    for (node, _) in graph.nodes.iter().zip(&analysis.layers).filter(|(_, a)| a.requires_grad) {
        for (i, &input) in node.inputs.iter().enumerate() {
            if !node.inputs[..i].contains(&input) {
                if let Some(r) = readers.get_mut(input) {
                    *r += 1;
                }
            }
        }
    }
    readers.into_iter().map(|r| r.saturating_sub(1) as f64).collect()
}

/// The first node of each kind in a phase pays `first(kind)` (forward, backward) on top of its fixed cost: forward
/// runs in graph order, backward in reverse.
fn charge_first_nodes(
    layers: &mut [LayerCost],
    kinds: &[(Option<&'static str>, bool)],
    first: impl Fn(&str) -> (f64, f64),
) {
    let charge =
        |p: &mut PhaseCost, s: f64| *p = PhaseCost::new(p.flops, p.bytes, p.compute_s, p.memory_s, p.overhead_s + s);
    let mut seen = std::collections::HashSet::new();
    for (layer, (kind, _)) in layers.iter_mut().zip(kinds) {
        if let Some(k) = kind.filter(|k| seen.insert(*k)) {
            charge(&mut layer.forward, first(k).0);
        }
    }
    seen.clear();
    for (layer, (kind, backward)) in layers.iter_mut().zip(kinds).rev() {
        if let Some(k) = kind.filter(|k| *backward && seen.insert(*k)) {
            charge(&mut layer.backward, first(k).1);
        }
    }
}

fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape { .. } | Op::Transpose { .. } | Op::Slice { .. })
        || matches!(op, Op::Dropout { p } if *p <= 0.0)
}

/// Bytes of one element of a node's output as the backend holds it.
fn element_bytes(op: &Op, precision: Precision) -> f64 {
    match op {
        Op::Input { kind: InputKind::Tokens { .. } | InputKind::Labels { .. }, .. } => 8.0,
        Op::Input { .. } => 4.0,
        _ => precision.activation_bytes() as f64,
    }
}

/// The compute of one step of `graph` at `batch` samples per device.
pub fn step(
    graph: &Graph,
    analysis: &Analysis,
    batch: usize,
    precision: Precision,
    optimizer: &OptimizerSpec,
    device: &DeviceModel,
) -> StepCompute {
    let b = batch as f64;
    let weight_bytes = if precision == Precision::Fp32 { 4.0 } else { 2.0 };
    // What backward reads lies in the activations the forward pass kept: every non-view output of the step.
    let saved: f64 = graph
        .nodes
        .iter()
        .zip(&analysis.layers)
        .filter(|(n, _)| !is_view(&n.op) && !matches!(n.op, Op::Input { .. }))
        .map(|(n, a)| a.output_elements as f64 * b * element_bytes(&n.op, precision))
        .sum();
    let sums = gradient_sums(graph, analysis);
    let mut layers = Vec::new();
    // Each layer's kind (for the first-node cost) and whether it runs a backward.
    let mut kinds: Vec<(Option<&'static str>, bool)> = Vec::new();
    for (index, (node, a)) in graph.nodes.iter().zip(&analysis.layers).enumerate() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let (ops_f, ops_b) = op_count(graph, node);
        let input_grad = node.inputs.iter().any(|&j| analysis.layers.get(j).is_some_and(|l| l.requires_grad));
        let (inputs, out) = if is_view(&node.op) {
            (0.0, 0.0)
        } else {
            let inputs: f64 = node
                .inputs
                .iter()
                .map(|&j| graph.nodes[j].shape.numel() as f64 * element_bytes(&graph.nodes[j].op, precision))
                .sum();
            (inputs * b, a.output_elements as f64 * b * element_bytes(&node.op, precision))
        };
        // A weight tied to another node's (an output projection sharing the embedding's) is read, and its
        // gradient computed, here as well: the analysis counts it once, at its owner.
        let tied = node.tied_to.and_then(|owner| analysis.layers.get(owner)).map_or(0.0, |o| o.parameters as f64);
        let weights = (a.parameters as f64 + tied) * weight_bytes;
        let act = precision.activation_bytes() as f64;
        let (extra_f, extra_b) = if is_view(&node.op) { (0.0, 0.0) } else { extra_bytes(graph, node, out, b, act) };
        let (n_kernels, class) = kernels(graph, node);
        let f_flops = a.forward_flops as f64 * b;
        let per_kernel = f_flops / n_kernels;
        // Element-wise operations of a measured class: their per-element work, where it exceeds FLOPs at the
        // GEMM rate (dropout's random numbers, exponentials, reductions).
        // Attention and cross-entropy without their own measurement: softmax's work on their scores or logits.
        // Causal and cross-attention without their own: self-attention's.
        let work = super::elementwise::work_of(graph, node, a.output_elements, b);
        // The kind the first-node cost goes by: the measured class, else the operation; none for a view.
        let kind = (!is_view(&node.op)).then(|| work.map_or(node.op.kind_name(), |(class, _)| class));
        let elementwise = work
            .and_then(|(c, elements)| {
                device
                    .elementwise_s(c, elements)
                    .or_else(|| {
                        c.starts_with("attention").then(|| device.elementwise_s("attention", elements)).flatten()
                    })
                    .or_else(|| {
                        (c.starts_with("attention") || c == "cross_entropy")
                            .then(|| device.elementwise_s("softmax", elements))
                            .flatten()
                    })
            })
            .unwrap_or((0.0, 0.0));
        let elementwise = match rnn_cell_work(graph, node, b, device) {
            Some((f, bw)) => (elementwise.0 + f, elementwise.1 + bw),
            None => elementwise,
        };
        // The layer's products at their own shapes on the calibrated grid (forward, and the backward's where
        // its shapes are known), else its FLOPs along the curve.
        let products =
            if device.has_grid() { products(graph, node, b, input_grad, a.parameters > 0 || tied > 0.0) } else { None };
        // A convolution at its channels and pixels on the calibrated grid.
        let conv = conv_size(node, a.output_elements as f64 * b);
        let conv_s = |backward: bool, flops: f64| conv.and_then(|(c, p)| device.conv_grid_s(backward, c, p, flops));
        let gemm_s = match (&products, conv_s(false, f_flops)) {
            (Some(p), _) => p.forward.iter().map(|&[m, k, n]| device.gemm_s(m, k, n)).sum(),
            (None, Some(s)) => s,
            (None, None) => n_kernels * device.compute_s(class, per_kernel),
        };
        // Attention's products and its softmax run one after the other; an element-wise layer's work and its
        // bytes overlap.
        let sequential = matches!(node.op, Op::Attention { .. } | Op::Rnn { .. });
        let f_compute = if sequential { gemm_s + elementwise.0 } else { gemm_s.max(elementwise.0) };
        // A linear layer's bias on a CPU: broadcast into the output before the product accumulates onto it
        // (forward, a pass writing the output and one reading it), summed over the rows of the output's gradient
        // (backward).
        let bias_pass = match node.op {
            Op::Linear { bias: true, .. } if device.bias_pass => (device.memory_s(2.0 * out), device.memory_s(out)),
            _ => (0.0, 0.0),
        };
        let f_compute = f_compute + bias_pass.0;
        let f_bytes = inputs + out + weights + extra_f;
        let (fixed_f, fixed_b) = fixed_costs(node, ops_f, ops_b, device);
        // Convolutions and linear layers cost more inside the step than their isolated kernels: per byte moved
        // (calibrated).
        let (in_step, in_step_fixed) = match &node.op {
            Op::Conv { .. } => (device.in_step.conv, device.in_step.conv_fixed),
            Op::Linear { .. } => (device.in_step.linear, (0.0, 0.0)),
            _ => ((0.0, 0.0), (0.0, 0.0)),
        };
        let forward = PhaseCost::new(
            f_flops,
            f_bytes,
            f_compute + in_step_fixed.0 + in_step.0 * f_bytes,
            device.memory_s(f_bytes),
            fixed_f,
        );
        let backward = if a.requires_grad {
            let bw_flops = a.backward_flops as f64 * b;
            // Backward kernels have the forward's sizes (weight gradient, input gradient): the forward's rate,
            // except for convolutions, whose backward has a calibrated curve of its own, and products whose
            // backward shapes are known.
            let bw_compute = match (&products, class) {
                (Some(p), _) if !p.backward.is_empty() => {
                    p.backward.iter().map(|&[m, k, n]| device.gemm_s(m, k, n)).sum()
                }
                (_, KernelClass::Conv) if bw_flops > 0.0 => {
                    conv_s(true, bw_flops).unwrap_or_else(|| device.compute_s(KernelClass::ConvBackward, bw_flops))
                }
                _ if f_flops > 0.0 => gemm_s * bw_flops / f_flops,
                _ => 0.0,
            };
            let bw_compute = if sequential { bw_compute + elementwise.1 } else { bw_compute.max(elementwise.1) }
                + if a.parameters > 0 { bias_pass.1 } else { 0.0 };
            // A tensor read by several nodes gets one gradient from each: autograd sums them, an add per extra
            // reader over the tensor (two reads, one write) with its own operation's cost.
            // A tied weight's gradient is added to its owner's: one more sum, over the weight.
            let sums = sums[index];
            let tied_sum = if tied > 0.0 { 1.0 } else { 0.0 };
            let bytes = out
                + inputs
                + if input_grad { inputs } else { 0.0 }
                + 2.0 * weights
                + extra_b
                + sums * 3.0 * out
                + tied_sum * 3.0 * tied * weight_bytes;
            let fixed_b = fixed_b + (sums + tied_sum) * device.nodes.as_ref().map_or(device.op_overhead_s, |n| n.op.1);
            PhaseCost::new(
                bw_flops,
                bytes,
                bw_compute + in_step_fixed.1 + in_step.1 * bytes,
                device.memory_in_s(bytes, saved),
                fixed_b,
            )
        } else {
            PhaseCost::new(0.0, 0.0, 0.0, 0.0, 0.0)
        };
        layers.push(LayerCost { name: node.name.clone(), op: a.op.clone(), forward, backward });
        kinds.push((kind, a.requires_grad));
    }

    // The step's own fixed cost (feeding the batch, summing the loss, starting backward), when calibrated.
    if let Some(n) = device.nodes.as_ref().filter(|n| n.step != (0.0, 0.0)) {
        let fixed = |s: f64| PhaseCost::new(0.0, 0.0, 0.0, 0.0, s);
        layers.push(LayerCost {
            name: "(step)".into(),
            op: "step".into(),
            forward: fixed(n.step.0),
            backward: fixed(n.step.1),
        });
    }
    let s = optimizer.state_buffers() as f64;
    let params = analysis.parameters as f64;
    let bytes = params * 4.0 * (3.0 + 2.0 * s);
    let tensors = trainbench_graph::params::graph_tensors(graph).iter().filter(|(_, d)| d.trainable()).count();
    let kind = super::stepcost::optimizer_kind(optimizer);
    let optimizer = match device.optimizer_s(kind, tensors as f64, params) {
        // Measured through the backend's own step: its passes over parameters, gradients and state.
        Some(seconds) => PhaseCost::new(0.0, bytes, 0.0, seconds, 0.0),
        None => {
            let per_tensor = match optimizer {
                OptimizerSpec::Sgd { momentum, weight_decay, .. } => {
                    1.0 + if *momentum > 0.0 { 2.0 } else { 0.0 } + if *weight_decay > 0.0 { 1.0 } else { 0.0 }
                }
                OptimizerSpec::Adam { .. } | OptimizerSpec::Adamw { .. } => 8.0,
            };
            PhaseCost::new(0.0, bytes, 0.0, device.memory_s(bytes), tensors as f64 * per_tensor * device.op_overhead_s)
        }
    };
    // The first node of a kind finds its code cold when the step moves enough data to push it out of the
    // caches: in full past what the calibration's flushing pass touches, in proportion below.
    let moved: f64 = layers.iter().map(|l| l.forward.bytes + l.backward.bytes).sum::<f64>() + optimizer.bytes;
    let flushed = 8.0 * super::elementwise::FLUSH as f64;
    let cold = (moved / flushed).min(1.0);
    if let Some(n) = &device.nodes {
        charge_first_nodes(&mut layers, &kinds, |kind| {
            let (f, b) = n.first_of(kind);
            (f * cold, b * cold)
        });
    }
    StepCompute { layers, optimizer }
}
