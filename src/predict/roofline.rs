//! The roofline of one training step, layer by layer and phase by phase: FLOPs (from the static analysis) over
//! the compute rate a kernel of that size reaches, bytes moved over the memory bandwidth, the larger of the two
//! plus the fixed costs of the node; then the step's own fixed cost, the optimizer step and the first-node cold
//! starts. Every phase carries its seconds by [`Term`] ([`PhaseCost::terms`]); a term switched off ([`Terms`])
//! prices as zero, or, for a rate choice, at the simpler rate.
//!
//! Bytes moved, per layer and batch (activations at the precision's activation size, weights fp32 or, under
//! autocast, their 2-byte copies): forward reads the inputs and the weights and writes the output; backward
//! reads the output gradient and the saved input, writes the input gradient (where an input needs one), reads
//! the weights and writes their gradient; operations that pass over their data several times (normalisation,
//! softmax, dropout, attention's scores) move more (`layer::extra_bytes`). Views (reshape, transpose, slice) move
//! nothing. The optimizer reads each parameter, its gradient and its state and writes the parameter and the
//! state (fp32).

use serde::Serialize;
use trainbench_graph::analysis::Analysis;
use trainbench_graph::graph::{Graph, Op};
use trainbench_graph::{OptimizerSpec, Precision};

use super::layer::{self, Products};
use super::price_classes::{ElementwiseClass, NodeKind, OptimizerKind};
use super::product_rates::ProductRates;
use super::rates::{Coefficients, KernelClass};
use super::terms::{self, Breakdown, Term, Terms};

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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseCost {
    /// FLOPs for the per-device batch.
    pub flops: f64,
    /// Bytes moved through device memory.
    pub bytes: f64,
    /// FLOPs over the rate a kernel of this size reaches (and the other compute-side terms), seconds.
    pub compute_s: f64,
    /// Bytes over the memory bandwidth, seconds.
    pub memory_s: f64,
    /// Fixed costs of the node, seconds.
    pub overhead_s: f64,
    /// max(compute, memory) + overhead, seconds.
    pub time_s: f64,
    /// Which of compute and memory is larger.
    pub bound: Bound,
    /// `time_s` by term: the terms of the winning side (compute or memory) and the fixed costs; memory time is
    /// split between the terms whose bytes it moves in proportion to their bytes.
    #[serde(skip_serializing_if = "Breakdown::is_empty")]
    pub terms: Breakdown,
}

/// The terms of each side of a phase before the roofline picks one: (term, seconds) on the compute side, (term,
/// bytes) on the memory side, (term, seconds) of fixed costs.
#[derive(Debug, Default)]
struct Sides {
    compute: Vec<(Term, f64)>,
    memory: Vec<(Term, f64)>,
    overhead: Vec<(Term, f64)>,
}

impl PhaseCost {
    fn new(flops: f64, bytes: f64, compute_s: f64, memory_s: f64, overhead_s: f64, sides: Sides) -> Self {
        let bound = if compute_s > 0.0 && compute_s >= memory_s { Bound::Compute } else { Bound::Memory };
        let mut terms = Breakdown::new();
        match bound {
            Bound::Compute => sides.compute.iter().for_each(|&(t, s)| terms::add(&mut terms, t, s)),
            Bound::Memory => {
                let total: f64 = sides.memory.iter().map(|(_, b)| b).sum();
                for &(t, b) in sides.memory.iter().filter(|_| total > 0.0) {
                    terms::add(&mut terms, t, memory_s * b / total);
                }
            }
        }
        sides.overhead.iter().for_each(|&(t, s)| terms::add(&mut terms, t, s));
        Self {
            flops,
            bytes,
            compute_s,
            memory_s,
            overhead_s,
            time_s: compute_s.max(memory_s) + overhead_s,
            bound,
            terms,
        }
    }

    /// A phase of fixed cost only, of `term`.
    fn fixed(term: Term, seconds: f64) -> Self {
        Self::new(0.0, 0.0, 0.0, 0.0, seconds, Sides { overhead: vec![(term, seconds)], ..Sides::default() })
    }

    /// Adds `seconds` of fixed cost of `term`.
    pub fn charge(&mut self, term: Term, seconds: f64) {
        self.overhead_s += seconds;
        self.time_s = self.compute_s.max(self.memory_s) + self.overhead_s;
        terms::add(&mut self.terms, term, seconds);
    }

    /// [`Self::charge`] where `seconds` is not zero (a phase without it stays as it was, to the last digit).
    pub fn charge_nonzero(&mut self, term: Term, seconds: f64) {
        if seconds != 0.0 {
            self.charge(term, seconds);
        }
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

/// Elements of the calibration's flushing pass (`crate::calibrate::elementwise::flush_pass`, run before the
/// first-node micro-graphs' nodes): 4 MiB of fp32, twice a core's L2 cache on the development machine.
pub const FLUSH_ELEMENTS: usize = 1 << 20;

/// Bytes per element of the flushing pass that a step must move for [`Term::FirstNodeColdStart`] to count in
/// full (8 MiB, the flushing step's passes and its optimizer's together, as `docs/performance-model.md` gives
/// them); a step that moves less pays in proportion.
const FLUSHED_BYTES_PER_ELEMENT: f64 = 8.0;

/// The step's quantities every layer reads.
struct Ctx<'a> {
    graph: &'a Graph,
    analysis: &'a Analysis,
    b: f64,
    precision: Precision,
    weight_bytes: f64,
    saved: f64,
    sums: Vec<f64>,
    device: &'a Coefficients,
    products: &'a ProductRates,
    terms: &'a Terms,
}

/// The rates a step is priced with: the precision's coefficients, and the tensor rates of the product classes
/// the run's numerics move (TF32, FP8; [`ProductRates`]).
#[derive(Debug, Clone, Copy)]
pub struct Rates<'a> {
    /// The precision's coefficients: every layer's bytes, element-wise work and fixed costs, and the products
    /// no tensor rate applies to.
    pub device: &'a Coefficients,
    /// The product classes' own rates.
    pub products: &'a ProductRates,
}

/// The element-wise work of a node (forward, backward seconds) of a measured class ([`Term::ElementwiseWork`]):
/// an attention node at its class's measured shape nearest its own (`attention_shape`: query positions,
/// features per head), else its class's unshaped points; attention and cross-entropy without their own
/// measurement at softmax's work on their scores or logits; causal and cross-attention without their own at
/// self-attention's.
fn elementwise_work(
    device: &Coefficients,
    work: Option<(ElementwiseClass, f64)>,
    attention_shape: Option<(f64, f64)>,
) -> (f64, f64) {
    work.and_then(|(c, elements)| {
        let shaped = |class| attention_shape.and_then(|(t, d)| device.attention_s(class, elements, t, d));
        shaped(c)
            .or_else(|| device.elementwise_s(c, elements))
            .or_else(|| c.is_attention().then(|| shaped(ElementwiseClass::Attention)).flatten())
            .or_else(|| c.is_attention().then(|| device.elementwise_s(ElementwiseClass::Attention, elements)).flatten())
            .or_else(|| {
                (c.is_attention() || c == ElementwiseClass::CrossEntropy)
                    .then(|| device.elementwise_s(ElementwiseClass::Softmax, elements))
                    .flatten()
            })
    })
    .unwrap_or((0.0, 0.0))
}

/// A linear layer's bias on a CPU ([`Term::BiasPass`]): broadcast into the output before the product accumulates
/// onto it (forward, a pass writing the output and one reading it), summed over the rows of the output's gradient
/// (backward).
fn bias_pass(node: &trainbench_graph::graph::Node, out: f64, device: &Coefficients) -> (f64, f64) {
    match node.op {
        Op::Linear { bias: true, .. } if device.bias_pass => (device.memory_s(2.0 * out), device.memory_s(out)),
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
        | Op::Attention { .. }
        | Op::Rotary { .. }
        | Op::Sdpa { .. }
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
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Lora { .. }
        | Op::Moe { .. }
        | Op::Loss { .. } => (0.0, 0.0),
    }
}

/// An embedding bag's calls' own work beyond the model's count of its operations ([`Term::InStepExcess`]),
/// (forward, backward) seconds: overhead, added to the phase whatever bounds it.
fn bag_excess(op: &Op, device: &Coefficients, t: &Terms) -> (f64, f64) {
    let bag = matches!(op, Op::EmbeddingBag { .. }) && t.on(Term::InStepExcess);
    if bag { device.in_step.bag_fixed } else { (0.0, 0.0) }
}

/// What convolutions and linear layers cost inside the step beyond their isolated kernels ([`Term::InStepExcess`]):
/// (per byte, per call), forward and backward (an embedding bag's, a call's own work, is overhead: [`bag_excess`]).
fn in_step_excess(op: &Op, device: &Coefficients) -> ((f64, f64), (f64, f64)) {
    match op {
        Op::Conv { .. } => (device.in_step.conv, device.in_step.conv_fixed),
        Op::Linear { .. } => (device.in_step.linear, (0.0, 0.0)),
        Op::Input { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
        | Op::Attention { .. }
        | Op::Rotary { .. }
        | Op::Sdpa { .. }
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
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Lora { .. }
        | Op::Moe { .. }
        | Op::Loss { .. } => ((0.0, 0.0), (0.0, 0.0)),
    }
}

/// The price of one layer (not an input), and the kind its first-node cost goes by.
fn layer_cost(cx: &Ctx, index: usize) -> (LayerCost, Option<NodeKind>) {
    let (graph, analysis, b, device, t) = (cx.graph, cx.analysis, cx.b, cx.device, cx.terms);
    let (node, a) = (&graph.nodes[index], &analysis.layers[index]);
    // The products' rate: the precision's, or the tensor rate the run's numerics give this class.
    let pd = cx.products.for_op(&node.op, device);
    let (ops_f, ops_b) = layer::op_count(graph, node);
    let input_grad = node.inputs.iter().any(|&j| analysis.layers.get(j).is_some_and(|l| l.requires_grad));
    let view = layer::moves_nothing(&node.op);
    let (inputs, out) = if view {
        (0.0, 0.0)
    } else {
        let inputs: f64 = node.inputs.iter().map(|&j| layer::sample_bytes(graph, j, cx.precision)).sum();
        (inputs * b, a.output_elements as f64 * b * layer::element_bytes(&node.op, cx.precision))
    };
    // A weight tied to another node's (an output projection sharing the embedding's) is read, and its gradient
    // computed, here as well: the analysis counts it once, at its owner ([`Term::TiedWeights`]).
    let tied = node.tied_to.and_then(|owner| analysis.layers.get(owner)).map_or(0.0, |o| o.parameters as f64);
    let tied = t.gate(Term::TiedWeights, tied);
    let weights = (a.parameters as f64 + tied) * cx.weight_bytes;
    // A frozen layer (LoRA's base) reads its weights in backward for its input's gradient, but computes and
    // writes no weight gradient.
    let trained = !a.frozen;
    let act = cx.precision.activation_bytes() as f64;
    let (extra_f, extra_b) = if view { (0.0, 0.0) } else { layer::extra_bytes(graph, node, out, b, act) };
    let (n_kernels, class) = layer::kernels(graph, node);
    let f_flops = a.forward_flops as f64 * b;
    let per_kernel = f_flops / n_kernels;
    let work = super::elementwise_work::work_of(graph, node, a.output_elements, b);
    // The kind the first-node cost goes by: the measured class, else the operation; none for a view.
    let kind = (!view).then(|| work.map_or(NodeKind::Op(node.op.kind_name()), |(class, _)| NodeKind::Class(class)));
    let shape = super::elementwise_work::attention_shape_of(graph, node);
    let ew = if t.on(Term::ElementwiseWork) { elementwise_work(device, work, shape) } else { (0.0, 0.0) };
    let rnn = layer::rnn_cell_work(graph, node, b, device).filter(|_| t.on(Term::RnnCellWork));
    let elementwise = match rnn {
        Some((f, bw)) => (ew.0 + f, ew.1 + bw),
        None => ew,
    };
    // The layer's products at their own shapes on the calibrated grid (forward, and the backward's where its
    // shapes are known), else its FLOPs along the curve ([`Term::RooflineCompute`]).
    let products: Option<Products> = if pd.has_grid() {
        layer::products(graph, node, b, input_grad, trained && (a.parameters > 0 || tied > 0.0))
    } else {
        None
    };
    let conv = layer::conv_size(node, a.output_elements as f64, b);
    let conv_s = |backward: bool, flops: f64| conv.and_then(|size| pd.conv_grid_s(backward, size, flops));
    let gemm_s = match (&products, conv_s(false, f_flops)) {
        (Some(p), _) => p.forward.iter().map(|&[m, k, n]| pd.gemm_s(m, k, n)).sum(),
        (None, Some(s)) => s,
        (None, None) => n_kernels * pd.compute_s(class, per_kernel),
    };
    let gemm_s = t.gate(Term::RooflineCompute, gemm_s);
    // Attention's products and its softmax run one after the other; an element-wise layer's work and its bytes
    // overlap.
    let sequential = layer::runs_in_sequence(&node.op);
    let compute_side = |products_s: f64, ew: f64, class_ew: f64| -> (f64, Vec<(Term, f64)>) {
        if sequential {
            let parts = vec![
                (Term::RooflineCompute, products_s),
                (Term::ElementwiseWork, class_ew),
                (Term::RnnCellWork, ew - class_ew),
            ];
            (products_s + ew, parts)
        } else if products_s >= ew {
            (products_s.max(ew), vec![(Term::RooflineCompute, products_s)])
        } else {
            (products_s.max(ew), vec![(Term::ElementwiseWork, ew)])
        }
    };
    let (f_compute, mut f_parts) = compute_side(gemm_s, elementwise.0, ew.0);
    let bias = if t.on(Term::BiasPass) { bias_pass(node, out, device) } else { (0.0, 0.0) };
    let f_compute = f_compute + bias.0;
    let f_bytes = inputs + out + weights + extra_f;
    let (fixed_f, fixed_b) = layer::per_op_overhead(node, ops_f, ops_b, device, t);
    let bag = bag_excess(&node.op, device, t);
    let (in_step, in_step_fixed) =
        if t.on(Term::InStepExcess) { in_step_excess(&node.op, device) } else { ((0.0, 0.0), (0.0, 0.0)) };
    f_parts.push((Term::BiasPass, bias.0));
    f_parts.push((Term::InStepExcess, in_step_fixed.0 + in_step.0 * f_bytes));
    let tied_f = tied * cx.weight_bytes;
    let f_memory_bytes = t.gate(Term::MemoryTraffic, f_bytes - tied_f) + tied_f;
    let forward = PhaseCost::new(
        f_flops,
        f_bytes,
        f_compute + in_step_fixed.0 + in_step.0 * f_bytes,
        if t.on(Term::MemoryTraffic) { device.memory_s(f_bytes) } else { device.memory_s(f_memory_bytes) },
        fixed_f + bag.0,
        Sides {
            compute: f_parts,
            memory: vec![(Term::MemoryTraffic, f_memory_bytes - tied_f), (Term::TiedWeights, tied_f)],
            overhead: vec![(Term::PerOpOverhead, fixed_f), (Term::InStepExcess, bag.0)],
        },
    );
    let backward = if a.requires_grad {
        let bw_flops = a.backward_flops as f64 * b;
        // Backward kernels have the forward's sizes (weight gradient, input gradient): the forward's rate, except
        // for convolutions, whose backward has a calibrated curve of its own, and products whose backward shapes
        // are known.
        let bw_compute = match (&products, class) {
            (Some(p), _) if !p.backward.is_empty() => p.backward.iter().map(|&[m, k, n]| pd.gemm_s(m, k, n)).sum(),
            (_, KernelClass::Conv) if bw_flops > 0.0 => {
                conv_s(true, bw_flops).unwrap_or_else(|| pd.compute_s(KernelClass::ConvBackward, bw_flops))
            }
            _ if f_flops > 0.0 => gemm_s * bw_flops / f_flops,
            _ => 0.0,
        };
        let bw_compute = t.gate(Term::RooflineCompute, bw_compute);
        let (bw_compute, mut b_parts) = compute_side(bw_compute, elementwise.1, ew.1);
        let bias_b = if trained && a.parameters > 0 { bias.1 } else { 0.0 };
        let bw_compute = bw_compute + bias_b;
        // A tensor read by several nodes gets one gradient from each: autograd sums them, an add per extra reader
        // over the tensor (two reads, one write) with its own operation's cost ([`Term::GradientSums`]). A tied
        // weight's gradient is added to its owner's: one more sum, over the weight ([`Term::TiedWeights`]).
        let sums = t.gate(Term::GradientSums, cx.sums[index]);
        let tied_sum = if trained && tied > 0.0 { 1.0 } else { 0.0 };
        let weight_passes = if trained { 2.0 } else { 1.0 };
        let base = out + inputs + if input_grad { inputs } else { 0.0 } + weight_passes * weights + extra_b;
        let (sum_bytes, tied_bytes) = (sums * 3.0 * out, tied_sum * 3.0 * tied * cx.weight_bytes);
        let bytes = base + sum_bytes + tied_bytes;
        let op_b =
            device.nodes.as_ref().filter(|_| t.on(Term::MeasuredNodeCosts)).map_or(device.op_overhead_s, |n| n.op.1);
        let fixed_all = fixed_b + bag.1 + (sums + tied_sum) * op_b;
        b_parts.push((Term::BiasPass, bias_b));
        b_parts.push((Term::InStepExcess, in_step_fixed.1 + in_step.1 * bytes));
        let memory_bytes = if t.on(Term::MemoryTraffic) { bytes } else { sum_bytes + tied_bytes };
        let working_set = if t.on(Term::BackwardWorkingSet) { cx.saved } else { 0.0 };
        // The backward's weight bytes of a tied weight (read, its gradient written) belong to its term too.
        let tied_rw = 2.0 * tied * cx.weight_bytes;
        let mut backward = PhaseCost::new(
            bw_flops,
            bytes,
            bw_compute + in_step_fixed.1 + in_step.1 * bytes,
            device.memory_in_s(memory_bytes, working_set),
            fixed_all,
            Sides {
                compute: b_parts,
                memory: vec![
                    (Term::MemoryTraffic, t.gate(Term::MemoryTraffic, base - tied_rw)),
                    (Term::GradientSums, sum_bytes),
                    (Term::TiedWeights, tied_bytes + t.gate(Term::MemoryTraffic, tied_rw)),
                ],
                overhead: vec![
                    (Term::PerOpOverhead, fixed_b),
                    (Term::InStepExcess, bag.1),
                    (Term::GradientSums, sums * op_b),
                    (Term::TiedWeights, tied_sum * op_b),
                ],
            },
        );
        // A recurrent layer's hidden weights' gradient, made and summed at every step: 4 passes over it at the
        // bandwidth of the two tensors the sum touches, between the step's products ([`Term::RnnWeightGradients`]).
        if let Some((steps, grad)) =
            layer::rnn_weight_gradient_steps(graph, node).filter(|_| trained && device.rnn_weight_gradient_per_step())
        {
            backward.charge_nonzero(
                Term::RnnWeightGradients,
                t.gate(Term::RnnWeightGradients, steps * device.memory_at_s(4.0 * grad, 2.0 * grad)),
            );
        }
        backward
    } else {
        PhaseCost::new(0.0, 0.0, 0.0, 0.0, 0.0, Sides::default())
    };
    (LayerCost { name: node.name.clone(), op: a.op.clone(), forward, backward }, kind)
}

/// The first node of each kind in a phase pays `first(kind)` (forward, backward) on top of its fixed cost: forward
/// runs in graph order, backward in reverse (kinds told apart by name). The [`Term::FirstNodeColdStart`] term.
pub fn first_node_cold_start(
    layers: &mut [LayerCost],
    kinds: &[(Option<NodeKind>, bool)],
    first: impl Fn(NodeKind) -> (f64, f64),
) {
    let charge = |p: &mut PhaseCost, s: f64| p.charge(Term::FirstNodeColdStart, s);
    let mut seen = std::collections::HashSet::new();
    for (layer, (kind, _)) in layers.iter_mut().zip(kinds) {
        if let Some(k) = kind.filter(|k| seen.insert(k.name())) {
            charge(&mut layer.forward, first(k).0);
        }
    }
    seen.clear();
    for (layer, (kind, backward)) in layers.iter_mut().zip(kinds).rev() {
        if let Some(k) = kind.filter(|k| *backward && seen.insert(k.name())) {
            charge(&mut layer.backward, first(k).1);
        }
    }
}

/// The optimizer step ([`Term::Optimizer`]): with that kind calibrated ([`Term::MeasuredOptimizer`]), tensors x
/// its per-tensor cost + parameters x its per-parameter cost; else memory-bound, parameter, gradient and state read
/// and parameter and state written (fp32), plus its per-tensor operations at the per-operation overhead.
fn optimizer_step(graph: &Graph, analysis: &Analysis, optimizer: &OptimizerSpec, device: &Coefficients) -> PhaseCost {
    let s = optimizer.state_buffers() as f64;
    // Only trained parameters are stepped (LoRA: the adapters).
    let params = analysis.trainable_parameters as f64;
    let bytes = params * 4.0 * (3.0 + 2.0 * s);
    let tensors = trainbench_graph::params::graph_tensors(graph).iter().filter(|(_, d)| d.trainable()).count();
    let one = |seconds: f64, memory: f64, overhead: f64| {
        let sides = Sides {
            memory: vec![(Term::Optimizer, bytes)],
            overhead: vec![(Term::Optimizer, overhead)],
            ..Sides::default()
        };
        PhaseCost::new(0.0, bytes, seconds, memory, overhead, sides)
    };
    match device.optimizer_s(OptimizerKind::of(optimizer), tensors as f64, params) {
        // Measured through the backend's own step: its passes over parameters, gradients and state.
        Some(seconds) => one(0.0, seconds, 0.0),
        None => {
            // Operations per tensor: the update, momentum's buffer (read, update), weight decay's add; Adam's
            // moments, their corrections and the update (libtorch's `_single_tensor_adam`, 8 calls).
            let per_tensor = match optimizer {
                OptimizerSpec::Sgd { momentum, weight_decay, .. } => {
                    1.0 + if *momentum > 0.0 { 2.0 } else { 0.0 } + if *weight_decay > 0.0 { 1.0 } else { 0.0 }
                }
                OptimizerSpec::Adam { .. } | OptimizerSpec::Adamw { .. } => 8.0,
            };
            one(0.0, device.memory_s(bytes), tensors as f64 * per_tensor * device.op_overhead_s)
        }
    }
}

/// The compute of one step of `graph` at `batch` samples per device, priced at `rates`, with `terms` on.
pub fn step(
    graph: &Graph,
    analysis: &Analysis,
    batch: usize,
    precision: Precision,
    optimizer: &OptimizerSpec,
    rates: Rates<'_>,
    terms: &Terms,
) -> StepCompute {
    let (b, device) = (batch as f64, rates.device);
    // What backward reads lies in the activations the forward pass kept: every non-view output of the step.
    let saved: f64 = graph
        .nodes
        .iter()
        .zip(&analysis.layers)
        .filter(|(n, _)| !layer::moves_nothing(&n.op) && !matches!(n.op, Op::Input { .. }))
        .map(|(n, a)| a.output_elements as f64 * b * layer::element_bytes(&n.op, precision))
        .sum();
    let cx = Ctx {
        graph,
        analysis,
        b,
        precision,
        // Weights are fp32, or under autocast their 2-byte copies.
        weight_bytes: if precision == Precision::Fp32 { 4.0 } else { 2.0 },
        saved,
        sums: layer::gradient_sums(graph, analysis),
        device,
        products: rates.products,
        terms,
    };
    // Allocations the host allocator does not keep, paid afresh every step ([`Term::FreshPages`]).
    let fresh = device.fresh_pages.as_ref().filter(|_| terms.on(Term::FreshPages));
    let mut layers = Vec::new();
    // Each layer's kind (for the first-node cost) and whether it runs a backward.
    let mut kinds: Vec<(Option<NodeKind>, bool)> = Vec::new();
    for (index, node) in graph.nodes.iter().enumerate().take(analysis.layers.len()) {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let (mut cost, kind) = layer_cost(&cx, index);
        if let Some(fresh) = fresh {
            let (f, bw) = super::fresh_pages::node_seconds(graph, analysis, index, b, precision, fresh);
            cost.forward.charge_nonzero(Term::FreshPages, f);
            cost.backward.charge_nonzero(Term::FreshPages, bw);
        }
        layers.push(cost);
        kinds.push((kind, analysis.layers[index].requires_grad));
    }
    // The step's own fixed cost (feeding the batch, summing the loss, starting backward), when calibrated
    // ([`Term::StepFixed`]).
    if let Some(n) = device.nodes.as_ref().filter(|n| n.step != (0.0, 0.0) && terms.on(Term::StepFixed)) {
        layers.push(LayerCost {
            name: "(step)".into(),
            op: "step".into(),
            forward: PhaseCost::fixed(Term::StepFixed, n.step.0),
            backward: PhaseCost::fixed(Term::StepFixed, n.step.1),
        });
    }
    let mut optimizer = if terms.on(Term::Optimizer) {
        let mut cost = optimizer_step(graph, analysis, optimizer, device);
        if let Some(fresh) = fresh {
            cost.charge_nonzero(Term::FreshPages, super::fresh_pages::optimizer_seconds(graph, optimizer, fresh));
        }
        cost
    } else {
        PhaseCost::new(0.0, 0.0, 0.0, 0.0, 0.0, Sides::default())
    };
    // Of those, what the host reclaimed between steps ([`Term::ReclaimedPages`]).
    if let Some(fresh) = fresh.filter(|_| terms.on(Term::ReclaimedPages)) {
        let own = |p: &PhaseCost| p.terms.get(&Term::FreshPages).copied().unwrap_or(0.0);
        let phases = layers.iter().flat_map(|l| [&l.forward, &l.backward]).chain([&optimizer]);
        let (fresh_s, step_s) = phases.fold((0.0, 0.0), |(f, s), p| (f + own(p), s + p.time_s));
        let share = super::fresh_pages::reclaimed_share(fresh, fresh_s, step_s);
        for p in layers.iter_mut().flat_map(|l| [&mut l.forward, &mut l.backward]).chain([&mut optimizer]) {
            let seconds = own(p) * share;
            p.charge_nonzero(Term::ReclaimedPages, seconds);
        }
    }
    // The first node of a kind finds its code cold when the step moves enough data to push it out of the
    // caches: in full past what the calibration's flushing pass touches, in proportion below.
    let moved: f64 = layers.iter().map(|l| l.forward.bytes + l.backward.bytes).sum::<f64>() + optimizer.bytes;
    let flushed = FLUSHED_BYTES_PER_ELEMENT * FLUSH_ELEMENTS as f64;
    let cold = (moved / flushed).min(1.0);
    if let Some(n) = device.nodes.as_ref().filter(|_| terms.on(Term::FirstNodeColdStart)) {
        first_node_cold_start(&mut layers, &kinds, |kind| {
            let (f, b) = n.first_of(kind);
            (f * cold, b * cold)
        });
    }
    StepCompute { layers, optimizer }
}
