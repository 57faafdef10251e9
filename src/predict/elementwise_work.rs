//! Which element-wise class prices a node's own work, and on how many elements: dropout, normalisations,
//! softmax and activations by output element, attention's fused core by score element, cross-entropy by logit,
//! max pooling by output element. A dropout, a normalisation or a softmax is not free once its bytes are moved: on
//! one CPU thread these cost 1-6 ns per element where an add of the same bytes costs 0.13 (`scripts/op_costs.py`),
//! so bytes over bandwidth alone under-predicts them by 7-37x. Also the products an attention node's projections
//! and scores make, which the model prices on the GEMM grid.

use trainbench_graph::graph::{Activation, Graph, LossKind, Op, PoolKind};

use super::price_classes::ElementwiseClass;

/// The products of an attention node the model prices on the GEMM grid, `[m, k, n]` for `batch` samples of `tq`
/// query and `tk` key positions: the four projections, then scores and context over batch x heads rows.
pub fn attention_products(batch: f64, tq: f64, tk: f64, e: f64, kdim: f64, vdim: f64, heads: f64) -> Vec<[f64; 3]> {
    let dh = e / heads.max(1.0);
    vec![
        [batch * tq, e, e],
        [batch * tk, kdim, e],
        [batch * tk, vdim, e],
        [batch * heads * tq, dh, tk],
        [batch * heads * tq, tk, dh],
        [batch * tq, e, e],
    ]
}

/// Cheap element-wise passes of a rotary embedding over its output (`x1 cos`, `x2 sin`, their difference, `x2
/// cos`, `x1 sin`, their sum, half an output each, and the concatenation): about four passes over the output.
pub const ROTARY_PASSES: f64 = 4.0;

/// The products of a fused scaled dot-product attention node, `[m, k, n]`, for `batch` samples of `t` query and
/// `tk` key positions: scores `Q K^T` and context `P V` over batch x heads rows (grouped-query attention shares
/// key and value heads, not these products).
pub fn sdpa_products(batch: f64, t: f64, tk: f64, heads: f64, head_dim: f64) -> Vec<[f64; 3]> {
    vec![[batch * heads * t, head_dim, tk], [batch * heads * t, tk, head_dim]]
}

/// The class whose measured cost stands for a node's operation; `None` for operations priced by FLOPs and bytes
/// alone.
pub fn class_of(op: &Op) -> Option<ElementwiseClass> {
    use ElementwiseClass as C;
    match op {
        Op::Dropout { p } if *p > 0.0 => Some(C::Dropout),
        Op::Pool { kind: PoolKind::Max, .. } => Some(C::MaxPool),
        // RMSNorm makes LayerNorm's passes less the mean's: priced at LayerNorm's measured class.
        Op::LayerNorm { .. } | Op::RmsNorm { .. } => Some(C::LayerNorm),
        Op::BatchNorm { .. } => Some(C::BatchNorm),
        Op::Softmax => Some(C::Softmax),
        Op::Act { function: Activation::Relu | Activation::LeakyRelu(_) | Activation::HardTanh20 } => Some(C::Relu),
        Op::Act { function: Activation::Gelu | Activation::Tanh | Activation::Sigmoid | Activation::Silu } => {
            Some(C::Gelu)
        }
        // Rotary embeddings: products and sums of the input with the angle table, one cheap pass each.
        Op::Rotary { .. } => Some(C::Relu),
        Op::Attention { causal: true, .. } | Op::Sdpa { causal: true, .. } => Some(C::AttentionCausal),
        Op::Attention { .. } | Op::Sdpa { .. } => Some(C::Attention),
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
        | Op::ClassToken { .. }
        | Op::EmbeddingBag { .. }
        | Op::Pool { .. }
        | Op::AdaptivePool { .. }
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

/// The element-wise work of a node at `batch` samples: its measured class and how many elements it touches.
/// Attention's core (scaled dot-product attention: scores, softmax, weighted sum, beyond its projections) works
/// on its score tensor (heads x query positions x key positions per sample); a cross-entropy loss does
/// softmax's work on its logits; the other classes touch their output.
pub fn work_of(
    graph: &Graph,
    node: &trainbench_graph::Node,
    output_elements: u64,
    batch: f64,
) -> Option<(ElementwiseClass, f64)> {
    match &node.op {
        Op::Attention { heads, causal, .. } => {
            let positions = |i: usize| input_positions(graph, node, i);
            // Self-attention, causal self-attention (a decoder's), or attention to another sequence (its
            // keys and values projected apart from its queries, as an encoder-decoder's).
            let class = if *causal {
                ElementwiseClass::AttentionCausal
            } else if node.inputs.first() != node.inputs.get(1) {
                ElementwiseClass::AttentionCross
            } else {
                ElementwiseClass::Attention
            };
            Some((class, *heads as f64 * positions(0) * positions(1) * batch))
        }
        // The fused kernel's softmax over its scores (heads x query x key positions per sample; all positions,
        // as the analysis counts its products).
        Op::Sdpa { heads, causal, .. } => {
            let positions = |i: usize| input_positions(graph, node, i);
            let class = if *causal { ElementwiseClass::AttentionCausal } else { ElementwiseClass::Attention };
            Some((class, *heads as f64 * positions(0) * positions(1) * batch))
        }
        // Rotary: four products, a difference, a sum and the concatenation over the output.
        Op::Rotary { .. } => Some((ElementwiseClass::Relu, ROTARY_PASSES * output_elements as f64 * batch)),
        // Cross-entropy over its logits (priced as softmax's work where the class was not measured).
        Op::Loss { loss: LossKind::CrossEntropy, .. } => {
            let logits = node.inputs.first().map_or(0, |&j| graph.nodes[j].shape.numel());
            Some((ElementwiseClass::CrossEntropy, logits as f64 * batch))
        }
        op @ (Op::Input { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
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
        | Op::Loss { .. }) => class_of(op).map(|c| (c, output_elements as f64 * batch)),
    }
}

/// Positions (the first dimension of a sample) of input `i` of `node`; 1 where it has no such input.
pub fn input_positions(graph: &Graph, node: &trainbench_graph::Node, i: usize) -> f64 {
    node.inputs.get(i).and_then(|&j| graph.nodes[j].shape.0.first().copied()).unwrap_or(1) as f64
}

/// The shape an attention node's core runs at, (query positions, features per head), by which its measured
/// cost is looked up (`super::shaped_attention`); `None` for every other node.
pub fn attention_shape_of(graph: &Graph, node: &trainbench_graph::Node) -> Option<(f64, f64)> {
    let positions = input_positions(graph, node, 0);
    match &node.op {
        Op::Attention { embed_dim, heads, tensor_shards, .. } => {
            Some((positions, *embed_dim as f64 / (*heads * *tensor_shards).max(1) as f64))
        }
        Op::Sdpa { head_dim, .. } => Some((positions, *head_dim as f64)),
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
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
        | Op::Rotary { .. }
        | Op::Loss { .. } => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use trainbench_graph::GraphBuilder;
    use trainbench_graph::graph::InputKind;

    use super::*;

    #[test]
    fn attention_softmaxes_its_scores() {
        let mut b = GraphBuilder::new("attn");
        let q = b.input("q", &[16, 64], InputKind::Dense).unwrap();
        let kv = b.input("kv", &[10, 64], InputKind::Dense).unwrap();
        let a = b.attention("attn", q, kv, 4, false).unwrap();
        let t = b.input("t", &[16, 64], InputKind::Dense).unwrap();
        b.loss("loss", LossKind::Mse, &[a, t]).unwrap();
        let g = b.finish(1, "samples").unwrap();
        let node = g.nodes.iter().find(|n| n.name == "attn").unwrap();
        // 4 heads x 16 queries x 10 keys per sample, 8 samples.
        assert_eq!(work_of(&g, node, 1024, 8.0), Some((ElementwiseClass::AttentionCross, 4.0 * 16.0 * 10.0 * 8.0)));
        let loss = g.nodes.iter().find(|n| n.name == "loss").unwrap();
        assert_eq!(work_of(&g, loss, 1, 8.0), None, "an MSE loss is priced by its bytes");
    }

    #[test]
    fn the_new_operations_have_classes() {
        use trainbench_graph::graph::Activation;
        assert_eq!(class_of(&Op::RmsNorm { features: 8, eps: 1e-5 }), Some(ElementwiseClass::LayerNorm));
        assert_eq!(class_of(&Op::Act { function: Activation::Silu }), Some(ElementwiseClass::Gelu));
        let rotary = Op::Rotary { heads: 2, head_dim: 4, theta: 10000.0 };
        assert_eq!(class_of(&rotary), Some(ElementwiseClass::Relu));
        let sdpa = |causal| Op::Sdpa { heads: 4, kv_heads: 2, head_dim: 8, causal };
        assert_eq!(class_of(&sdpa(true)), Some(ElementwiseClass::AttentionCausal));
        assert_eq!(class_of(&sdpa(false)), Some(ElementwiseClass::Attention));
        // A class token and an embedding bag move bytes only.
        assert_eq!(class_of(&Op::ClassToken { dim: 8 }), None);
        // Scores then context, over batch x heads rows.
        assert_eq!(sdpa_products(2.0, 16.0, 16.0, 4.0, 8.0), vec![[128.0, 8.0, 16.0], [128.0, 16.0, 8.0]]);
    }

    #[test]
    fn max_pooling_is_priced_by_output_and_dropout_without_p_is_no_class() {
        let mut b = GraphBuilder::new("pool");
        let x = b.input("x", &[8, 16, 16], InputKind::Dense).unwrap();
        let p = b.pool("pool", x, PoolKind::Max, 2, 2, 0).unwrap();
        let d = b.dropout("drop", p, 0.0).unwrap();
        let t = b.input("t", &[8, 8, 8], InputKind::Dense).unwrap();
        b.loss("loss", LossKind::Mse, &[d, t]).unwrap();
        let g = b.finish(1, "samples").unwrap();
        let pool = g.nodes.iter().find(|n| n.name == "pool").unwrap();
        // 8 x 8 x 8 outputs, 4 samples: priced by output (a 2 x 2 window with stride 2 costs about as much per
        // output as the measured 3 x 3 with stride 1).
        assert_eq!(work_of(&g, pool, 512, 4.0), Some((ElementwiseClass::MaxPool, 512.0 * 4.0)));
        let drop = g.nodes.iter().find(|n| n.name == "drop").unwrap();
        assert_eq!(work_of(&g, drop, 512, 4.0), None, "dropout with p = 0 returns its input");
    }
}
