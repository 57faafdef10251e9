//! Fresh pages ([`Term::FreshPages`]): an allocation larger than the host allocator keeps for reuse (glibc maps
//! anything above its mmap threshold, which rises with what is freed to at most 32 MiB) is mapped from the operating
//! system on every call and unmapped when freed, so a training step pays its pages' faults and the kernel's zeroing
//! again each time. Which tensors of a step are allocated afresh, and how large (the framework's own, as libtorch
//! runs them on a CPU):
//!
//! - forward: each node's output (a view allocates nothing); a dropout's mask; a cross-entropy's log-probabilities;
//!   an unfused attention's scores and their softmax;
//! - backward: the gradient of each input that needs one; each trained tensor's gradient (gradients are set to none
//!   after every step, so each is allocated again); a tied weight's own gradient and its sum with the owner's; a
//!   cross-entropy's second pass over the logits; an unfused attention's two score-sized gradients;
//! - the optimizer (`torch::optim`, per trained tensor): Adam's and AdamW's square root of the second moment and its
//!   quotient, a weight decay's sum (Adam and SGD), Nesterov's look-ahead.
//!
//! Each allocation above [`FreshPages::reused_up_to_bytes`] costs its bytes times the calibrated seconds per byte;
//! smaller ones nothing. What other temporaries a kernel makes inside, and bf16 copies of the weights under
//! autocast, are not counted.
//!
//! Reclaimed pages ([`Term::ReclaimedPages`]): on a virtual machine whose kernel hands memory left free back to
//! the hypervisor (free page reporting, a balloon's), a step that gives back gigabytes and takes them again a
//! while later finds part of them reclaimed, and faulting those in from the host costs several times a kept
//! page. Each fresh byte of such a step costs [`FreshPages::reclaimed_per_byte`] more, read from the calibration's
//! step-like cycles at the step's fresh bytes and length ([`reclaimed_share`]).

use trainbench_graph::analysis::Analysis;
use trainbench_graph::graph::{Graph, LossKind, Node, Op};
use trainbench_graph::params;
use trainbench_graph::{OptimizerSpec, Precision};

pub use super::fresh_rates::{CycledFreshPoint, FreshPages};
use super::layer;

/// Bytes of an fp32 gradient or optimizer temporary per parameter.
pub const PARAMETER_BYTES: f64 = 4.0;

/// The sizeable allocations of one node for `b` samples, bytes: (forward, backward).
pub fn node_allocations(
    graph: &Graph,
    analysis: &Analysis,
    index: usize,
    b: f64,
    precision: Precision,
) -> (Vec<f64>, Vec<f64>) {
    let node = &graph.nodes[index];
    if matches!(node.op, Op::Input { .. }) || layer::moves_nothing(&node.op) {
        return (Vec::new(), Vec::new());
    }
    let Some(a) = analysis.layers.get(index) else {
        return (Vec::new(), Vec::new());
    };
    let out = a.output_elements as f64 * b * layer::element_bytes(&node.op, precision);
    let (mut forward, mut backward) = (vec![out], Vec::new());
    let extra = own_temporaries(graph, node, b, precision.activation_bytes() as f64);
    forward.extend(extra.0);
    if !a.requires_grad {
        return (forward, backward);
    }
    backward.extend(extra.1);
    let grad_inputs = node.inputs.iter().filter(|&&j| analysis.layers.get(j).is_some_and(|l| l.requires_grad));
    backward.extend(grad_inputs.map(|&j| b * layer::sample_bytes(graph, j, precision)));
    // A frozen node's tensors are not trainable (`params::tensors`): they get no gradient.
    let (tied, trained): (Vec<_>, Vec<_>) =
        params::tensors(node).into_iter().filter(|d| d.trainable()).partition(|d| params::is_tied(node, d));
    backward.extend(trained.iter().map(|d| d.numel() as f64 * PARAMETER_BYTES));
    // A tied weight's gradient here is a tensor of its own, and autograd adds it to the owner's out of place:
    // two allocations of the weight's size (libtorch's `add` of the two, not an in-place accumulation).
    backward.extend(tied.iter().flat_map(|d| [d.numel() as f64 * PARAMETER_BYTES; 2]));
    // A recurrent layer's hidden weights' gradient, a fresh output at every time step.
    if let Some((steps, grad)) = layer::rnn_weight_gradient_steps(graph, node).filter(|_| !a.frozen) {
        backward.extend(std::iter::repeat_n(grad, steps as usize));
    }
    (forward, backward)
}

/// Temporaries of an operation beyond its output and its inputs' gradients, bytes: (forward, backward).
fn own_temporaries(graph: &Graph, node: &Node, b: f64, act: f64) -> (Vec<f64>, Vec<f64>) {
    match &node.op {
        Op::Dropout { p } if *p > 0.0 => {
            let mask = graph.nodes[node.inputs[0]].shape.numel() as f64 * b * act;
            (vec![mask], Vec::new())
        }
        Op::Loss { loss: LossKind::CrossEntropy, .. } => {
            let logits = graph.nodes[node.inputs[0]].shape.numel() as f64 * b * act;
            (vec![logits], vec![logits])
        }
        Op::Attention { heads, .. } => {
            let scores = layer::attention_score_bytes(graph, node, *heads, b, act);
            (vec![scores, scores], vec![scores, scores])
        }
        Op::Input { .. }
        | Op::Dropout { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
        | Op::Rotary { .. }
        | Op::Sdpa { .. }
        | Op::ClassToken { .. }
        | Op::EmbeddingBag { .. }
        | Op::Pool { .. }
        | Op::AdaptivePool { .. }
        | Op::Act { .. }
        | Op::Softmax
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
        | Op::Loss { .. } => (Vec::new(), Vec::new()),
    }
}

/// Temporaries `torch::optim` allocates per trained tensor, each of the tensor's size.
pub fn optimizer_temporaries(optimizer: &OptimizerSpec) -> f64 {
    let decay = |w: f64| if w != 0.0 { 1.0 } else { 0.0 };
    match *optimizer {
        OptimizerSpec::Sgd { weight_decay, nesterov, .. } => decay(weight_decay) + if nesterov { 1.0 } else { 0.0 },
        OptimizerSpec::Adam { weight_decay, .. } => 2.0 + decay(weight_decay),
        OptimizerSpec::Adamw { .. } => 2.0,
    }
}

/// What each second of fresh pages costs more ([`Term::ReclaimedPages`]), as a share of it: the step's fresh bytes
/// (`fresh_s`, its fresh pages' seconds, over the seconds per byte) and its length (`step_s`) read against the
/// calibrated cycles. 0 without cycles or fresh pages.
pub fn reclaimed_share(fresh: &FreshPages, fresh_s: f64, step_s: f64) -> f64 {
    if fresh.cycled.is_empty() || fresh_s.is_nan() || fresh_s <= 0.0 || fresh.seconds_per_byte <= 0.0 {
        return 0.0;
    }
    fresh.reclaimed_per_byte(fresh_s / fresh.seconds_per_byte, step_s) / fresh.seconds_per_byte
}

/// Seconds of fresh pages of node `index` (forward, backward).
pub fn node_seconds(
    graph: &Graph,
    analysis: &Analysis,
    index: usize,
    b: f64,
    precision: Precision,
    fresh: &FreshPages,
) -> (f64, f64) {
    let (forward, backward) = node_allocations(graph, analysis, index, b, precision);
    let seconds = |v: Vec<f64>| v.into_iter().map(|bytes| fresh.seconds(bytes)).sum();
    (seconds(forward), seconds(backward))
}

/// Seconds of fresh pages of the optimizer step: its temporaries over every trained tensor.
pub fn optimizer_seconds(graph: &Graph, optimizer: &OptimizerSpec, fresh: &FreshPages) -> f64 {
    let per_tensor = optimizer_temporaries(optimizer);
    params::graph_tensors(graph)
        .iter()
        .filter(|(_, d)| d.trainable())
        .map(|(_, d)| per_tensor * fresh.seconds(d.numel() as f64 * PARAMETER_BYTES))
        .sum()
}

#[cfg(test)]
#[path = "fresh_pages_tests.rs"]
mod tests;
