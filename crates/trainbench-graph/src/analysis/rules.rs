//! Per-operation rules of the analysis: forward and backward FLOPs, what autograd keeps for backward, and
//! the transient workspace of each layer. All figures are per sample.
//!
//! FLOPs follow `torch.utils.flop_counter`: 2 x multiply-accumulates of convolutions, linear layers, matrix
//! products (attention's score and weighted-sum products included) and recurrent gate matmuls; nothing for
//! biases, element-wise ops, normalisation, pooling, softmax, embedding lookups, RoI align or losses.

use crate::graph::{Activation, Graph, LossKind, Node, Op, PoolKind, RnnCell};

/// Forward FLOPs of a node and how its backward splits (per sample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flops {
    /// Forward FLOPs.
    pub forward: u64,
    /// Backward FLOPs given which inputs need a gradient.
    pub backward: u64,
}

/// What a node keeps alive for its backward pass, per sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Saved {
    /// Inputs (by position) whose tensors are kept.
    pub inputs: Vec<usize>,
    /// The node keeps its own output.
    pub output: bool,
    /// Internal float tensors kept (elements at activation precision).
    pub extra_elements: u64,
    /// Internal tensors kept whose size does not depend on the precision (dropout masks, pooling indices).
    pub other_bytes: u64,
}

fn gates(cell: RnnCell) -> u64 {
    match cell {
        RnnCell::Lstm => 4,
        RnnCell::Gru => 3,
    }
}

/// Forward and backward FLOPs. `input_grad[i]` says whether input `i` needs a gradient; trainable (not frozen)
/// weights always get one (the weight gradient costs as much as the forward product, the input gradient as much
/// again, so a layer reading raw data has backward = 1 x forward and any other layer 2 x forward).
pub(crate) fn flops(graph: &Graph, node: &Node, input_grad: &[bool]) -> Flops {
    let shape = |i: usize| &graph.nodes[node.inputs[i]].shape;
    let g = |i: usize| u64::from(input_grad.get(i).copied().unwrap_or(false));
    let f = flops_trained(graph, node, input_grad);
    // A frozen layer (LoRA's base) computes no weight gradient; with no input needing one, no backward at all.
    if node.frozen && !input_grad.iter().any(|&need| need) {
        return Flops { forward: f.forward, backward: 0 };
    }
    let w = u64::from(!node.frozen);
    match &node.op {
        Op::Conv { .. } | Op::Linear { .. } | Op::Moe { .. } => {
            Flops { forward: f.forward, backward: w * f.forward + g(0) * f.forward }
        }
        Op::Rnn { .. } => Flops { forward: f.forward, backward: f.backward - (1 - w) * f.forward },
        Op::Attention { embed_dim, kdim, vdim, tensor_shards, .. } => {
            let (tq, tk) = (shape(0).0[0] as u64, shape(1).0[0] as u64);
            let (e, l) = (*embed_dim as u64, (embed_dim / (*tensor_shards).max(1)) as u64);
            let weights = 2 * tq * e * l + 2 * tk * *kdim as u64 * l + 2 * tk * *vdim as u64 * l + 2 * tq * l * e;
            Flops { forward: f.forward, backward: f.backward - (1 - w) * weights }
        }
        Op::Input { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Embedding { .. }
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
        | Op::Loss { .. } => f,
    }
}

/// [`flops`] of the node as if its parameters were trained.
fn flops_trained(graph: &Graph, node: &Node, input_grad: &[bool]) -> Flops {
    let shape = |i: usize| &graph.nodes[node.inputs[i]].shape;
    let out = node.shape.numel();
    let g = |i: usize| u64::from(input_grad.get(i).copied().unwrap_or(false));
    match &node.op {
        Op::Conv { in_channels, out_channels, kernel, groups, transposed, .. } => {
            let k: u64 = kernel.iter().map(|&v| v as u64).product();
            let f = if *transposed {
                2 * shape(0).numel() * (out_channels / groups) as u64 * k
            } else {
                2 * out * (in_channels / groups) as u64 * k
            };
            Flops { forward: f, backward: f + g(0) * f }
        }
        Op::Linear { in_features, .. } => {
            let f = 2 * out * *in_features as u64;
            Flops { forward: f, backward: f + g(0) * f }
        }
        Op::MatMul { transpose_b } => {
            let (a, b) = (shape(0), shape(1));
            let k = a.last() as u64;
            let n = if *transpose_b { b.0[b.rank() - 2] } else { b.last() } as u64;
            let f = 2 * a.numel() * n;
            debug_assert_eq!(f, 2 * out * k);
            Flops { forward: f, backward: (g(0) + g(1)) * f }
        }
        Op::Rnn { cell, input_size, hidden, layers, bidirectional } => {
            let t = shape(0).0[0] as u64;
            let (h, gh) = (*hidden as u64, gates(*cell) * *hidden as u64);
            let dirs = if *bidirectional { 2 } else { 1 };
            let mut f = 0;
            let mut first_input = 0;
            for l in 0..*layers as u64 {
                let i = if l == 0 { *input_size as u64 } else { h * dirs };
                f += dirs * 2 * t * gh * (i + h);
                if l == 0 {
                    first_input = dirs * 2 * t * gh * i;
                }
            }
            // Weight gradients cost f; state and input gradients f again, less the first layer's input
            // gradient when the input needs none, and less the gradient w.r.t. the (constant, zero) initial
            // state at the first step of every layer and direction.
            let initial_state = *layers as u64 * dirs * 2 * gh * h;
            Flops { forward: f, backward: 2 * f - (1 - g(0)) * first_input - initial_state }
        }
        Op::Attention { embed_dim, kdim, vdim, tensor_shards, .. } => {
            // A tensor rank's share (`tensor_shards` > 1) projects to and from its heads' width `l` only.
            let (tq, tk) = (shape(0).0[0] as u64, shape(1).0[0] as u64);
            let (e, l) = (*embed_dim as u64, (embed_dim / (*tensor_shards).max(1)) as u64);
            let (pq, pk, pv) = (2 * tq * e * l, 2 * tk * *kdim as u64 * l, 2 * tk * *vdim as u64 * l);
            let core = 2 * (2 * tq * tk * l);
            let out_proj = 2 * tq * l * e;
            let forward = pq + pk + pv + core + out_proj;
            // Projections: weight gradient plus input gradient where needed; the two products of the core and
            // the output projection see projected (hence gradient-carrying) operands.
            let backward = pq * (1 + g(0)) + pk * (1 + g(1)) + pv * (1 + g(2)) + 2 * core + 2 * out_proj;
            Flops { forward, backward }
        }
        Op::Sdpa { heads, head_dim, .. } => {
            let (tq, tk) = (shape(0).0[0] as u64, shape(1).0[0] as u64);
            // All positions, causal or not, as `FlopCounterMode` counts the fused kernel: QK^T and PV.
            let product = 2 * tq * tk * (*heads * *head_dim) as u64;
            let query_or_key = u64::from(g(0) + g(1) > 0);
            Flops { forward: 2 * product, backward: product * (g(0) + g(1)) + product * (g(2) + query_or_key) }
        }
        Op::Lora { in_features, out_features, rank, .. } => {
            let rows = out / (*out_features as u64).max(1);
            let (down, up) = (2 * rows * (*rank * *in_features) as u64, 2 * rows * (*rank * *out_features) as u64);
            // B's weight gradient and the gradient of A x, A's weight gradient, and x's gradient where needed.
            Flops { forward: down + up, backward: 2 * up + down + g(0) * down }
        }
        Op::Moe { .. } => {
            let f = moe_forward(node);
            // Weight gradients of the router and of every product run, and the input's gradient where needed.
            Flops { forward: f, backward: f + g(0) * f }
        }
        Op::Input { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Embedding { .. }
        | Op::Rotary { .. }
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
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Loss { .. } => Flops::default(),
    }
}

/// Forward FLOPs of a mixture-of-experts node per sample: the router over every expert, `top_k` experts'
/// SwiGLU products per token (the active work, not every expert's), and the shared feed-forward.
pub(crate) fn moe_forward(node: &Node) -> u64 {
    let Op::Moe { features, experts, top_k, expert_ffn, shared_ffn, .. } = &node.op else {
        return 0;
    };
    let d = *features as u64;
    let rows = node.shape.numel() / d.max(1);
    let router = 2 * rows * d * *experts as u64;
    let routed = 2 * rows * *top_k as u64 * 3 * d * *expert_ffn as u64;
    let shared = 2 * rows * 3 * d * *shared_ffn as u64;
    router + routed + shared
}

/// Parameters of a node a token does not compute with: the experts a mixture-of-experts router leaves out
/// (`experts - top_k` SwiGLU experts); 0 for every other node.
pub(crate) fn inactive_parameters(node: &Node) -> u64 {
    if let Op::Moe { features, experts, top_k, expert_ffn, .. } = &node.op {
        experts.saturating_sub(*top_k) as u64 * 3 * (*features * *expert_ffn) as u64
    } else {
        0
    }
}

/// What the node keeps for backward (see the module docs of `analysis` for the rules).
pub(crate) fn saved(graph: &Graph, node: &Node) -> Saved {
    let shape = |i: usize| &graph.nodes[node.inputs[i]].shape;
    let out = node.shape.numel();
    let keep = |inputs: Vec<usize>| Saved { inputs, ..Saved::default() };
    match &node.op {
        // A frozen product needs its weight, not its input, for the input's gradient.
        Op::Conv { .. } | Op::Linear { .. } if node.frozen => Saved::default(),
        Op::Conv { .. } | Op::BatchNorm { .. } | Op::Linear { .. } | Op::Pool { kind: PoolKind::Avg, .. } => {
            keep(vec![0])
        }
        Op::Lora { in_features, rank, dropout, .. } => {
            let rows = out / (node.shape.last() as u64).max(1);
            if *dropout > 0.0 {
                // The dropped input (A's operand) with its mask, and A x (B's operand).
                let dropped = rows * *in_features as u64;
                Saved { extra_elements: dropped + rows * *rank as u64, other_bytes: dropped, ..Saved::default() }
            } else {
                Saved { inputs: vec![0], extra_elements: rows * *rank as u64, ..Saved::default() }
            }
        }
        Op::Moe { features, experts, top_k, expert_ffn, shared_ffn, .. } => {
            let rows = out / (*features as u64).max(1);
            let (d, f, k) = (*features as u64, *expert_ffn as u64, *top_k as u64);
            // The router's probabilities and top-k weights; per assignment the gathered input, the gate and up
            // products, their gated product and the expert's output (the combine weight's operand); the shared
            // feed-forward's gate, up and gated product.
            let extra = rows * (*experts as u64 + k) + rows * k * (2 * d + 3 * f) + rows * 3 * *shared_ffn as u64;
            Saved { inputs: vec![0], extra_elements: extra, ..Saved::default() }
        }
        Op::AdaptivePool { kind: PoolKind::Avg, .. } => keep(vec![0]),
        Op::Pool { kind: PoolKind::Max, .. } | Op::AdaptivePool { kind: PoolKind::Max, .. } => {
            Saved { inputs: vec![0], other_bytes: 8 * out, ..Saved::default() }
        }
        Op::LayerNorm { features, .. } | Op::RmsNorm { features, .. } => {
            Saved { inputs: vec![0], extra_elements: 2 * out / (*features as u64).max(1), ..Saved::default() }
        }
        Op::Rnn { cell, hidden, layers, bidirectional, .. } => {
            let t = shape(0).0[0] as u64;
            let dirs = if *bidirectional { 2 } else { 1 };
            // Per layer, direction and step: the gate activations and the hidden state (LSTM: and the cell
            // state; GRU: and the recurrent part of the candidate gate).
            let per_step = (gates(*cell) + 2) * *hidden as u64;
            let all = *layers as u64 * dirs * t * per_step;
            Saved { inputs: vec![0], output: true, extra_elements: all - out, ..Saved::default() }
        }
        Op::Attention { embed_dim, heads, tensor_shards, .. } => {
            let (tq, tk) = (shape(0).0[0] as u64, shape(1).0[0] as u64);
            let e = (embed_dim / (*tensor_shards).max(1)) as u64;
            // Projected Q, K, V, the attention probabilities and the heads' output before out_proj.
            let extra = tq * e + 2 * tk * e + *heads as u64 * tq * tk + tq * e;
            Saved { inputs: vec![0, 1, 2], extra_elements: extra, ..Saved::default() }
        }
        Op::Sdpa { heads, .. } => {
            // The fused kernel keeps q, k, v, its output and one log-sum-exp per head and query.
            let tq = node.shape.0[0] as u64;
            Saved { inputs: vec![0, 1, 2], output: true, extra_elements: *heads as u64 * tq, ..Saved::default() }
        }
        Op::Act { function: Activation::Relu | Activation::Tanh | Activation::Sigmoid } | Op::Softmax => {
            Saved { output: true, ..Saved::default() }
        }
        Op::Act {
            function: Activation::Gelu | Activation::LeakyRelu(_) | Activation::HardTanh20 | Activation::Silu,
        } => keep(vec![0]),
        Op::Dropout { .. } => Saved { other_bytes: out, ..Saved::default() },
        Op::Mul | Op::MatMul { .. } => keep((0..node.inputs.len()).collect()),
        Op::Loss { loss, .. } => {
            let logits = shape(0).numel();
            match loss {
                // log_softmax's result (what nll_loss reads back).
                LossKind::CrossEntropy => Saved { extra_elements: logits, ..Saved::default() },
                // log_softmax's result and the forward variables alpha [T, 2L + 1].
                LossKind::Ctc => {
                    let t = shape(0).0[0] as u64;
                    let l = shape(1).numel();
                    Saved { extra_elements: logits + t * (2 * l + 1), ..Saved::default() }
                }
                LossKind::Mse | LossKind::SmoothL1 { .. } | LossKind::BceWithLogits => keep(vec![0, 1]),
                LossKind::Wasserstein { .. } => keep(vec![0]),
                LossKind::ActorCritic { .. } => {
                    Saved { inputs: vec![1, 3], extra_elements: logits, ..Saved::default() }
                }
            }
        }
        Op::Input { .. }
        | Op::Embedding { .. }
        | Op::Rotary { .. }
        | Op::ClassToken { .. }
        | Op::EmbeddingBag { .. }
        | Op::Add
        | Op::Concat { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Mean { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. } => Saved::default(),
    }
}

/// Transient elements while the node's backward runs: its output gradient, the gradients of inputs that need
/// one and, for convolutions, the im2col (or col2im) buffer of a GEMM-based kernel (kernels above 1x1 only).
pub(crate) fn workspace(graph: &Graph, node: &Node, input_grad: &[bool]) -> u64 {
    let mut w = node.shape.numel();
    for (i, &id) in node.inputs.iter().enumerate() {
        if input_grad.get(i).copied().unwrap_or(false) {
            w += graph.nodes[id].shape.numel();
        }
    }
    if let Op::Conv { in_channels, out_channels, kernel, groups, transposed, .. } = &node.op {
        let k: u64 = kernel.iter().map(|&v| v as u64).product();
        if k > 1 {
            let (c, spatial) = if *transposed {
                let s = &graph.nodes[node.inputs[0]].shape;
                (out_channels / groups, s.numel() / *in_channels as u64)
            } else {
                (in_channels / groups, node.shape.numel() / *out_channels as u64)
            };
            w += c as u64 * k * spatial;
        }
    }
    w
}
