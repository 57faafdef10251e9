//! Zero second moments ([`Term::ZeroMomentSqrt`]): Adam's (and AdamW's) second moment of an embedding row stays
//! exactly zero until a step looks the row up, and the optimizer's square root over it (`torch::optim`'s
//! `exp_avg_sq.sqrt()`, every step, over the whole table) costs more per zero element than per nonzero one on a
//! CPU (libtorch's vectorised square root takes a slow path on zeros: 4 ns more per element on the Intel Xeon
//! of the 2026-12-06 validation, about 7 times a nonzero element's). A large table's rows are mostly unseen in a
//! benchmark's few hundred steps, so NCF's and DLRM's optimizer steps pay it over nearly every row.
//!
//! Rows unseen after `s` steps of `n` lookups each, ids drawn uniformly from `V` rows (the synthetic data's):
//! `V exp(-n s / V)`; each of `dim` elements. A table a head is tied to gets a gradient in every row from the head,
//! and a frozen one has no moments: neither counts. `s` is the steps run before the middle of the measured ones
//! ([`super::Setting::steps_run`]); without it (a run of unknown length), none.
//!
//! [`Term::ZeroMomentSqrt`]: super::terms::Term::ZeroMomentSqrt

use trainbench_graph::OptimizerSpec;
use trainbench_graph::graph::{Graph, Op};
use trainbench_graph::params;

/// Elements of the optimizer's second moments still zero at the middle of the measured steps: the embedding
/// tables' unseen rows, for `samples` samples per step (every worker's, every micro-batch's) after `steps_run`
/// steps; 0 for an optimizer without a second moment.
pub fn zero_elements(graph: &Graph, samples: f64, optimizer: &OptimizerSpec, steps_run: Option<f64>) -> f64 {
    if matches!(optimizer, OptimizerSpec::Sgd { .. }) {
        return 0.0;
    }
    let Some(steps) = steps_run.filter(|s| *s > 0.0) else {
        return 0.0;
    };
    graph
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(id, node)| {
            let (vocab, dim) = match node.op {
                Op::Embedding { vocab, dim } | Op::EmbeddingBag { vocab, dim, .. } => (vocab as f64, dim as f64),
                // Dense weights: every moment filled by the first step (a learned position table's rows past the
                // sequence stay zero too, but they are few).
                Op::Input { .. }
                | Op::Dropout { .. }
                | Op::Conv { .. }
                | Op::BatchNorm { .. }
                | Op::LayerNorm { .. }
                | Op::RmsNorm { .. }
                | Op::Linear { .. }
                | Op::Rnn { .. }
                | Op::Rotary { .. }
                | Op::Sdpa { .. }
                | Op::Attention { .. }
                | Op::ClassToken { .. }
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
                | Op::Loss { .. } => return None,
            };
            let trained = params::tensors(node).iter().any(|d| d.local == "weight" && d.trainable());
            let tied = params::has_tied_heads(graph, id);
            let lookups = samples * graph.nodes.get(*node.inputs.first()?)?.shape.numel() as f64;
            (trained && !tied && vocab > 0.0).then(|| vocab * dim * (-lookups * steps / vocab).exp())
        })
        .sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use trainbench_graph::GraphBuilder;
    use trainbench_graph::graph::{InputKind, LossKind};

    use super::*;

    fn adam() -> OptimizerSpec {
        OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
    }

    /// tokens (4 per sample) -> embedding 10,000 x 8 -> linear 10 -> cross-entropy; `tie`: a second table of
    /// 1,000 x 8 whose head is tied to it.
    fn graph(tie: bool) -> Graph {
        let mut b = GraphBuilder::new("rows");
        let x = b.input("x", &[4], InputKind::Tokens { vocab: 10_000 }).unwrap();
        let e = b.embedding("emb", x, 10_000, 8).unwrap();
        let r = b.reshape("flat", e, &[32]).unwrap();
        let y = b.linear("head", r, 10, true).unwrap();
        let t = b.input("t", &[], InputKind::Labels { classes: 10 }).unwrap();
        b.loss("loss", LossKind::CrossEntropy, &[y, t]).unwrap();
        let mut g = b.finish(1, "samples").unwrap();
        if tie {
            let id = g.nodes.iter().position(|n| n.name == "emb").unwrap();
            let head = g.nodes.iter().position(|n| n.name == "head").unwrap();
            g.nodes[head].tied_to = Some(id);
        }
        g
    }

    #[test]
    fn an_untied_tables_unseen_rows_are_counted_by_the_lookups_so_far() {
        let g = graph(false);
        // 25 samples x 4 ids x 10 steps = 1,000 lookups of 10,000 rows: exp(-0.1) of the rows unseen.
        let zeros = zero_elements(&g, 25.0, &adam(), Some(10.0));
        assert!((zeros - 10_000.0 * 8.0 * (-0.1f64).exp()).abs() < 1e-6, "{zeros}");
        // More steps, fewer unseen rows; SGD keeps no second moment; a run of unknown length counts none.
        assert!(zero_elements(&g, 25.0, &adam(), Some(100.0)) < zeros);
        let sgd = OptimizerSpec::Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0, nesterov: false };
        assert_eq!(zero_elements(&g, 25.0, &sgd, Some(10.0)), 0.0);
        assert_eq!(zero_elements(&g, 25.0, &adam(), None), 0.0);
    }

    #[test]
    fn a_table_a_head_is_tied_to_has_a_gradient_in_every_row() {
        assert_eq!(zero_elements(&graph(true), 25.0, &adam(), Some(10.0)), 0.0);
    }
}
