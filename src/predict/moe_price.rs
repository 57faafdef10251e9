//! What a mixture-of-experts node ([`Op::Moe`]) costs in the performance model: its framework operations (the
//! router, the dispatch, each expert's products, the combine, the load-balancing loss), its kernels, its matrix
//! products (the router over every token, each expert over the share of the assignments it takes: `top_k` of
//! `experts`, not all of them) and the bytes its dispatch and combine move; with expert parallelism, the
//! experts' parameters it shards and the bytes of its all-to-alls.

use trainbench_comm::layout::is_expert_tensor;
use trainbench_graph::graph::{Graph, Node, Op};
use trainbench_graph::params::tensors;

/// Matrix products `[m, k, n]` (`[m x k] x [k x n]`).
pub type ProductList = Vec<[f64; 3]>;

/// Framework operations of the router and combine around the experts (forward): the router's product, its
/// softmax or sigmoid, the top-k, the weights' normalisation (a sum and a division), the flattened choices'
/// sort and counts, the output's zeros, and the load-balancing loss (a one-hot, two means, a product, a sum).
const ROUTER_OPS: f64 = 13.0;

/// Framework operations of one routed expert (forward): its tokens' gather, three products, the SiLU, the gated
/// product, the router-weight product and the scatter-add into the output.
const EXPERT_OPS: f64 = 8.0;

/// Framework operations of the shared feed-forward (forward): three products, the SiLU, the gated product, the sum.
const SHARED_OPS: f64 = 6.0;

/// Forward and backward framework operations of a mixture-of-experts node (each forward operation records about
/// one backward node; the expert products' record their weight and input gradients as two).
pub fn op_count(node: &Node) -> (f64, f64) {
    let Op::Moe { experts, shared_ffn, .. } = &node.op else { return (0.0, 0.0) };
    let shared = if *shared_ffn > 0 { SHARED_OPS } else { 0.0 };
    let forward = ROUTER_OPS + EXPERT_OPS * *experts as f64 + shared;
    (forward, forward + 3.0 * *experts as f64 + if *shared_ffn > 0 { 3.0 } else { 0.0 })
}

/// GEMM kernels of one forward pass: the router's and three per expert (and three for the shared feed-forward).
pub fn kernels(node: &Node) -> f64 {
    let Op::Moe { experts, shared_ffn, .. } = &node.op else { return 1.0 };
    1.0 + 3.0 * *experts as f64 + if *shared_ffn > 0 { 3.0 } else { 0.0 }
}

/// The node's matrix products `[m, k, n]` at `b` samples, forward and backward: the router `[tokens, d] x [d,
/// experts]`; each expert's gate, up and down products over `tokens x top_k / experts` rows (a balanced load:
/// the active work, `top_k` experts per token); the shared feed-forward's over every token. Backward: each
/// product's weight gradient, and its input gradient where the input needs one (always inside the experts).
pub fn products(node: &Node, b: f64, input_grad: bool) -> Option<(ProductList, ProductList)> {
    let Op::Moe { features, experts, top_k, expert_ffn, shared_ffn, .. } = &node.op else { return None };
    let (d, e, f, s) = (*features as f64, *experts as f64, *expert_ffn as f64, *shared_ffn as f64);
    let tokens = b * node.shape.numel() as f64 / d.max(1.0);
    let rows = tokens * *top_k as f64 / e.max(1.0);
    let mut forward = vec![[tokens, d, e]];
    let mut backward = vec![[d, tokens, e]];
    if input_grad {
        backward.push([tokens, e, d]);
    }
    let mut ffn = |m: f64, width: f64, count: usize| {
        for _ in 0..count {
            forward.extend([[m, d, width], [m, d, width], [m, width, d]]);
            // Gate and up: weight and input gradients; down: weight gradient and the gated product's gradient.
            backward.extend([[d, m, width], [m, width, d], [d, m, width], [m, width, d], [width, m, d], [m, d, width]]);
        }
    };
    ffn(rows, f, *experts);
    if s > 0.0 {
        ffn(tokens, s, 1);
    }
    Some((forward, backward))
}

/// Bytes the dispatch and combine move beyond reading the input and writing the output once (forward,
/// backward): per assignment (`top_k` per token) the gathered input, the gate, up and gated products and the
/// expert's output, each written and read once; the backward passes over them about twice.
pub fn extra_bytes(node: &Node, b: f64, act: f64) -> (f64, f64) {
    let Op::Moe { features, top_k, expert_ffn, shared_ffn, .. } = &node.op else { return (0.0, 0.0) };
    let d = *features as f64;
    let tokens = b * node.shape.numel() as f64 / d.max(1.0);
    let per_assignment = 2.0 * d + 3.0 * *expert_ffn as f64;
    let moved = 2.0 * act * (tokens * *top_k as f64 * per_assignment + tokens * 3.0 * *shared_ffn as f64);
    (moved, 2.0 * moved)
}

/// Trained elements of the experts' tensors (`experts.*` of every mixture-of-experts node) among `nodes`: what
/// expert parallelism shards over its group.
pub fn expert_parameters(graph: &Graph, nodes: std::ops::Range<usize>) -> f64 {
    graph
        .nodes
        .get(nodes)
        .unwrap_or(&[])
        .iter()
        .flat_map(|n| tensors(n).into_iter().map(move |d| (n, d)))
        .filter(|(n, d)| d.trainable() && is_expert_tensor(n, d))
        .map(|(_, d)| d.numel() as f64)
        .sum()
}

/// Expert parallelism's all-to-alls per step on one rank holding `samples` samples (every micro-batch of the
/// step together), `passes` forward passes (micro-batches) per step, activations of `act` bytes: the bytes the
/// rank passes to them in the measured convention (its whole send buffers, its own block included). Per MoE
/// node and pass, the counts (one fp32 per expert); per assignment (`top_k` per token), the dispatched row and
/// the combined row, forward and backward: `4 x tokens x top_k x d x act`. With balanced routing, `(degree - 1)
/// / degree` of the rows cross a link. Only the nodes `held` picks count (a pipeline stage's).
pub fn all_to_all_bytes(graph: &Graph, held: &dyn Fn(usize) -> bool, samples: f64, passes: f64, act: f64) -> f64 {
    graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| held(*i))
        .map(|(_, n)| {
            let Op::Moe { features, experts, top_k, .. } = &n.op else { return 0.0 };
            let d = *features as f64;
            let tokens = samples * n.shape.numel() as f64 / d.max(1.0);
            4.0 * tokens * *top_k as f64 * d * act + passes * 4.0 * *experts as f64
        })
        .sum()
}

/// Mixture-of-experts nodes of `graph` (each runs four all-to-alls of tokens per pass under expert parallelism).
pub fn moe_layers(graph: &Graph) -> usize {
    graph.nodes.iter().filter(|n| matches!(n.op, Op::Moe { .. })).count()
}
