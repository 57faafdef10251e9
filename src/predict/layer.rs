//! The pieces of one layer's price that the roofline step ([`super::roofline::step`]) puts together: its
//! framework operations, its kernels and products, the bytes it moves beyond one pass, and the terms priced per
//! layer ([`Term::PerOpOverhead`], [`Term::RnnCellWork`], the count [`Term::GradientSums`] prices), each with the
//! constants it uses.

use trainbench_graph::Precision;
use trainbench_graph::analysis::Analysis;
use trainbench_graph::graph::{Graph, LossKind, Op};

use super::conv_classes::ConvClass;
use super::price_classes::ElementwiseClass;
use super::rates::{Coefficients, ConvSize, KernelClass};
use super::terms::{Term, Terms};

/// Framework operations of an attention node (forward, backward): the model's count of its four projections, the
/// fused core and the reshapes around it in libtorch eager (a count, not a measurement); the fit nets the
/// calibration's attention points of the forward count (`crate::calibrate::fit`).
pub const ATTENTION_OPS: (f64, f64) = (10.0, 14.0);

/// Framework operations of a fused scaled dot-product attention node (forward, backward) as the tch lowering
/// runs it: the heads split out of q, k and v (a reshape and a transpose each), the fused kernel, the heads
/// merged back (a transpose and a copying reshape); backward the kernel's and the merge's (a count, not a
/// measurement).
pub const SDPA_OPS: (f64, f64) = (9.0, 3.0);

/// Framework operations of a rotary embedding node (forward, backward): the heads' view, the two halves, the
/// angle table's two rows cast to the activation type, four products, a difference, a sum, the concatenation and
/// the merged view; backward the products', sums' and concatenation's.
pub const ROTARY_OPS: (f64, f64) = (14.0, 7.0);

/// Framework operations of a loss other than cross-entropy (an MSE: the difference, its square, the mean; each
/// records one backward node); the calibration's step cost is netted of these (`crate::calibrate::stepcost`).
pub const LOSS_OPS: (f64, f64) = (3.0, 3.0);

/// Bytes of one element of a dense input as a backend feeds it (f32 features).
pub const DENSE_INPUT_BYTES: f64 = 4.0;

/// Bytes of one element of an index input as a backend feeds it (i64 token ids and labels, libtorch's `Long`).
pub const INDEX_INPUT_BYTES: f64 = 8.0;

/// Framework operations a node costs (forward, backward), in libtorch eager terms: one kernel for most
/// layers; linear's backward is two products and a bias sum; a recurrent layer runs its cell step by step
/// (about 8 operations per step, layer and direction); attention is its projections, the fused core and
/// reshapes; dropout draws a mask and multiplies.
pub fn op_count(graph: &Graph, node: &trainbench_graph::graph::Node) -> (f64, f64) {
    match &node.op {
        Op::Input { .. } => (0.0, 0.0),
        Op::Linear { .. } | Op::MatMul { .. } => (1.0, 3.0),
        Op::Rnn { layers, bidirectional, .. } => {
            let t = graph.nodes[node.inputs[0]].shape.0.first().copied().unwrap_or(1) as f64;
            let per = *layers as f64 * if *bidirectional { 2.0 } else { 1.0 } * (1.0 + 8.0 * t);
            (per, 2.0 * per)
        }
        Op::Attention { .. } => ATTENTION_OPS,
        Op::Sdpa { .. } => SDPA_OPS,
        Op::Rotary { .. } => ROTARY_OPS,
        // The class token broadcast, cast and concatenated; an embedding bag's flattened ids, offsets and bag.
        Op::ClassToken { .. } | Op::EmbeddingBag { .. } => (3.0, 1.0),
        // Dropout with p = 0 returns its input: one call, no backward node.
        Op::Dropout { p } if *p <= 0.0 => (1.0, 0.0),
        Op::Dropout { .. } => (2.0, 1.0),
        Op::RoiAlign { .. } => (5.0, 5.0),
        // The adapter's two products and its scale (with dropout: its mask and product); backward the scale's,
        // each product's weight gradient and the gradient of A x, and the input's where needed.
        Op::Lora { dropout, .. } => {
            let drop = if *dropout > 0.0 { 2.0 } else { 0.0 };
            (3.0 + drop, 5.0 + drop / 2.0)
        }
        Op::Moe { .. } => super::moe_price::op_count(node),
        Op::Loss { loss: LossKind::CrossEntropy, .. } => (2.0, 2.0),
        Op::Loss { .. } => LOSS_OPS,
        Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Embedding { .. }
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
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch => (1.0, 1.0),
    }
}

/// Kernels of one forward pass of a node with FLOPs, and which curve they follow: the work of one kernel is the
/// layer's FLOPs over this count.
pub fn kernels(graph: &Graph, node: &trainbench_graph::graph::Node) -> (f64, KernelClass) {
    match &node.op {
        Op::Conv { .. } => (1.0, KernelClass::Conv),
        Op::Rnn { layers, bidirectional, .. } => {
            let t = graph.nodes[node.inputs[0]].shape.0.first().copied().unwrap_or(1) as f64;
            (*layers as f64 * if *bidirectional { 2.0 } else { 1.0 } * t, KernelClass::Gemm)
        }
        Op::Attention { .. } => (6.0, KernelClass::Gemm),
        Op::Sdpa { .. } => (2.0, KernelClass::Attention),
        Op::Lora { .. } => (2.0, KernelClass::Gemm),
        Op::Moe { .. } => (super::moe_price::kernels(node), KernelClass::Gemm),
        Op::Input { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
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
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Loss { .. } => (1.0, KernelClass::Gemm),
    }
}

/// A layer's matrix products as `[m, k, n]` (`[m x k] x [k x n]`), forward and backward, where the grid prices
/// them: a linear layer (batch rows against its weight; backward the weight gradient `[k x m] x [m x n]` and, where
/// its input needs one, the input gradient `[m x n] x [n x k]`), a recurrent layer (the input projection over
/// every time step at once, then one hidden product per step, as libtorch runs them on a CPU; backward left to
/// the FLOP ratio), attention (four projections, then scores and context over batch x heads rows).
pub struct Products {
    /// Forward products.
    pub forward: Vec<[f64; 3]>,
    /// Backward products (empty: left to the FLOP ratio).
    pub backward: Vec<[f64; 3]>,
}

/// The products of `node` at `b` samples (see [`Products`]); `None` for a node without them.
pub fn products(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    b: f64,
    input_grad: bool,
    trainable: bool,
) -> Option<Products> {
    let first_dim = |i: usize| super::elementwise_work::input_positions(graph, node, i);
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
        // A x, then B (A x); backward B's weight gradient, the gradient of A x, A's weight gradient, and the
        // input's where needed.
        Op::Lora { in_features, out_features, rank, .. } => {
            let (k, r, n) = (*in_features as f64, *rank as f64, *out_features as f64);
            let m = b * graph.nodes[*node.inputs.first()?].shape.numel() as f64 / k.max(1.0);
            let mut backward = vec![[r, m, n], [m, n, r], [k, m, r]];
            if input_grad {
                backward.push([m, r, k]);
            }
            Some(Products { forward: vec![[m, k, r], [m, r, n]], backward })
        }
        Op::Moe { .. } => {
            let (forward, backward) = super::moe_price::products(node, b, input_grad)?;
            Some(Products { forward, backward })
        }
        Op::RoiAlign { proposals, output, .. } => {
            let [rows, columns] = roi_align_products(graph, node, b, *proposals, output)?;
            // The weights are constants: backward is the input's gradient only, each product transposed.
            let backward = if input_grad {
                let [m, k, n] = columns;
                let [m2, k2, n2] = rows;
                let mut v = vec![[m, n, k]; *proposals];
                v.push([k2, m2, n2]);
                v
            } else {
                Vec::new()
            };
            let mut forward = vec![rows];
            forward.extend(std::iter::repeat_n(columns, *proposals));
            Some(Products { forward, backward })
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
            let forward = super::elementwise_work::attention_products(
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
        Op::Sdpa { heads, head_dim, .. } => {
            let forward =
                super::elementwise_work::sdpa_products(b, first_dim(0), first_dim(1), *heads as f64, *head_dim as f64);
            Some(Products { forward, backward: Vec::new() })
        }
        Op::Input { .. }
        | Op::Conv { .. }
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
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::Loss { .. } => None,
    }
}

/// RoIAlign's two products at `b` samples, as the tch backend runs it (separable interpolation weights, a bin a
/// row weight times a column weight): the rows' `[proposals x oh, H] x [H, b C W]`, then per proposal the
/// columns' `[oh b C, W] x [W, ow]`. `None` without a `[C, H, W]` input or a 2-d output.
fn roi_align_products(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    b: f64,
    proposals: usize,
    output: &[usize],
) -> Option<[[f64; 3]; 2]> {
    let input = &graph.nodes.get(*node.inputs.first()?)?.shape.0;
    let ([c, h, w], [oh, ow]) = (input.as_slice(), output) else { return None };
    let (c, h, w, oh, ow) = (*c as f64, *h as f64, *w as f64, *oh as f64, *ow as f64);
    Some([[proposals as f64 * oh, h, b * c * w], [oh * b * c, w, ow]])
}

/// A convolution's size for the calibrated grid, at `batch` samples of `output_elements` each: the geometric mean
/// of its input and output channels, its output elements per sample over its output channels, and its kernel
/// class (the larger kernel side and stride, and its direction). Grouped convolutions are left to the curve; a
/// transposed one is too where its class was not measured ([`super::conv_classes::share`]).
pub fn conv_size(node: &trainbench_graph::graph::Node, output_elements: f64, batch: f64) -> Option<ConvSize> {
    match &node.op {
        Op::Conv { in_channels, out_channels, kernel, stride, groups: 1, transposed, .. } if *out_channels > 0 => {
            let largest = |v: &[usize]| v.iter().copied().max().unwrap_or(1) as u64;
            Some(ConvSize {
                channels: ((*in_channels * *out_channels) as f64).sqrt(),
                image_pixels: output_elements / *out_channels as f64,
                batch,
                class: ConvClass {
                    kernel: largest(kernel.as_slice()),
                    stride: largest(stride.as_slice()),
                    transposed: *transposed,
                },
            })
        }
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
        | Op::Loss { .. } => None,
    }
}

/// Fixed seconds of a node (forward, backward): with the training step calibrated, a linear layer's measured
/// cost, else its forward operations at one operation's forward and backward cost each (each forward operation
/// records one backward node); without it (or with [`Term::MeasuredNodeCosts`] off), every operation at the
/// per-operation overhead. The [`Term::PerOpOverhead`] term.
pub fn per_op_overhead(
    node: &trainbench_graph::graph::Node,
    ops_f: f64,
    ops_b: f64,
    device: &Coefficients,
    terms: &Terms,
) -> (f64, f64) {
    if !terms.on(Term::PerOpOverhead) {
        return (0.0, 0.0);
    }
    match device.nodes.as_ref().filter(|_| terms.on(Term::MeasuredNodeCosts)) {
        Some(n) if matches!(node.op, Op::Linear { .. }) => n.linear,
        Some(n) => (ops_f * n.op.0, if ops_b > 0.0 { ops_f * n.op.1 } else { 0.0 }),
        None => (ops_f * device.op_overhead_s, ops_b * device.op_overhead_s),
    }
}

/// Bytes a layer moves beyond reading its inputs and writing its output once (forward, backward), for the
/// operations that make several passes: normalisations compute statistics before normalising (and their
/// backward reads input and output gradient twice); softmax and log-softmax take a maximum and a sum first;
/// dropout writes and reads a mask; attention's core writes the score tensor (heads x Tq x Tk), softmaxes it in
/// place and reads it for the weighted sum (its backward passes over it about twice as often); a fused scaled
/// dot-product attention keeps its scores on chip (nothing beyond its inputs and output); a rotary embedding
/// reads its angle table (two rows of half the output's width, per position) and writes its two halves before
/// concatenating them.
pub fn extra_bytes(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    out_bytes: f64,
    b: f64,
    act: f64,
) -> (f64, f64) {
    match &node.op {
        Op::BatchNorm { .. } | Op::LayerNorm { .. } | Op::RmsNorm { .. } => (out_bytes, 2.0 * out_bytes),
        Op::Softmax => (out_bytes, out_bytes),
        Op::Loss { loss: LossKind::CrossEntropy, .. } => {
            let logits = graph.nodes[node.inputs[0]].shape.numel() as f64 * b * act;
            (3.0 * logits, 2.0 * logits)
        }
        Op::Dropout { .. } => (out_bytes / act, out_bytes / act),
        Op::Attention { heads, .. } => {
            let scores = attention_score_bytes(graph, node, *heads, b, act);
            (4.0 * scores, 8.0 * scores)
        }
        Op::Rotary { .. } => (2.0 * out_bytes, 2.0 * out_bytes),
        Op::Moe { .. } => super::moe_price::extra_bytes(node, b, act),
        // The rows' product's output, written and read by the columns' (backward: its gradient, the same).
        Op::RoiAlign { proposals, output, .. } => {
            let rows = roi_align_products(graph, node, b, *proposals, output).map_or(0.0, |[[m, _, n], _]| m * n);
            (2.0 * rows * act, 2.0 * rows * act)
        }
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
        | Op::Sdpa { .. }
        | Op::ClassToken { .. }
        | Op::EmbeddingBag { .. }
        | Op::Pool { .. }
        | Op::AdaptivePool { .. }
        | Op::Act { .. }
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
        | Op::Lora { .. }
        | Op::Loss { .. } => (0.0, 0.0),
    }
}

/// Bytes of an unfused attention's score tensor (heads x Tq x Tk) for `b` samples of `act` bytes per element.
pub fn attention_score_bytes(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    heads: usize,
    b: f64,
    act: f64,
) -> f64 {
    let positions = |i: usize| graph.nodes[node.inputs[i]].shape.0.first().copied().unwrap_or(1) as f64;
    heads as f64 * positions(0) * positions(1) * b * act
}

/// The element-wise work of a recurrent layer's cells (forward, backward seconds), when the activation classes
/// were measured: per time step, layer and direction, an LSTM cell evaluates three sigmoids and two tanhs and
/// combines them with five products and sums over `batch x hidden` elements (a GRU two sigmoids, one tanh and
/// six products and sums), each a call of its own on a CPU whose fixed cost the recurrent layer's operation
/// count already holds; priced per element at the `gelu` class (tanh, sigmoid) and the `relu` class (one cheap
/// pass). The [`Term::RnnCellWork`] term.
pub fn rnn_cell_work(
    graph: &Graph,
    node: &trainbench_graph::graph::Node,
    b: f64,
    device: &Coefficients,
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
    let (cf, cb) = device.elementwise_marginal_s(ElementwiseClass::Gelu, elements)?;
    let (pf, pb) = device.elementwise_marginal_s(ElementwiseClass::Relu, elements)?;
    Some((cells * (curved * cf + cheap * pf), cells * (curved * cb + cheap * pb)))
}

/// A recurrent layer's weight-gradient steps in backward: (time steps x layers x directions, bytes of one hidden
/// weight's gradient). libtorch's GRU on a CPU (`at::gru`) applies the hidden weight at every time step as a product
/// of its own; backward makes that weight's gradient at every step (3 x hidden x hidden, fp32) and autograd sums it
/// into the running gradient, the product's output written, then read with the sum and written back: 4 times the
/// weight's bytes per step ([`Term::RnnWeightGradients`]; the output's fresh pages, where it is above what the
/// allocator keeps, are [`Term::FreshPages`]'). The input weights' products run once over every step. An LSTM has
/// none: libtorch runs it on a CPU through oneDNN (`mkldnn_rnn_layer`, whose backward makes each weight's gradient
/// once over every step, as cuDNN does on a GPU; a bf16 LSTM on a CPU without AVX-512 BF16 falls back to the
/// per-step products, which the model does not see).
pub fn rnn_weight_gradient_steps(graph: &Graph, node: &trainbench_graph::graph::Node) -> Option<(f64, f64)> {
    let Op::Rnn { cell, hidden, layers, bidirectional, .. } = &node.op else {
        return None;
    };
    let steps = graph.nodes[*node.inputs.first()?].shape.0.first().copied().unwrap_or(1) as f64;
    let gates = match cell {
        trainbench_graph::graph::RnnCell::Lstm => return None,
        trainbench_graph::graph::RnnCell::Gru => 3.0,
    };
    let cells = steps * *layers as f64 * if *bidirectional { 2.0 } else { 1.0 };
    Some((cells, gates * (*hidden as f64).powi(2) * 4.0))
}

/// Gradient sums autograd makes for each node's output in backward: one fewer than the nodes that read it and
/// pass a gradient back (a node reading it several times, as self-attention's query, key and value, counts once:
/// its backward sums them itself). The count the [`Term::GradientSums`] term prices.
pub fn gradient_sums(graph: &Graph, analysis: &Analysis) -> Vec<f64> {
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

/// Whether a node moves nothing: a view of its input ([`Op::is_view`]: reshape, transpose, slice) or a dropout
/// with p = 0, which returns its input.
pub fn moves_nothing(op: &Op) -> bool {
    op.is_view() || matches!(op, Op::Dropout { p } if *p <= 0.0)
}

/// Whether a node's products and its element-wise work run one after the other (attention's products and its
/// softmax, a recurrent layer's gate products and its cells) rather than overlapping (an element-wise layer's
/// work and its bytes).
pub fn runs_in_sequence(op: &Op) -> bool {
    match op {
        Op::Attention { .. } | Op::Sdpa { .. } | Op::Rnn { .. } => true,
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
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
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Lora { .. }
        | Op::Moe { .. }
        | Op::Loss { .. } => false,
    }
}

/// Bytes of node `index`'s output for one sample, as the backend holds it.
pub fn sample_bytes(graph: &Graph, index: usize, precision: Precision) -> f64 {
    let node = &graph.nodes[index];
    node.shape.numel() as f64 * element_bytes(&node.op, precision)
}

/// Bytes of one element of a node's output as the backend holds it.
pub fn element_bytes(op: &Op, precision: Precision) -> f64 {
    match op.input_kind() {
        Some(kind) if kind.holds_indices() => INDEX_INPUT_BYTES,
        Some(_) => DENSE_INPUT_BYTES,
        None => precision.activation_bytes() as f64,
    }
}
