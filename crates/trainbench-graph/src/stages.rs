//! Pipeline stages: a graph's recomputable blocks cut into contiguous chunks ([`cut_stages`]), balanced by the
//! analysis' training FLOPs or sized as given, each with its parameters, FLOPs and kept activations.
//!
//! The nodes before the first block (embeddings) belong to the first chunk and those after the last block
//! (final norm, head, loss) to the last, so the balance counts them where they run. With `v` virtual stages
//! per rank over `p` ranks there are `p x v` chunks, dealt round-robin: chunk `c` runs on pipeline rank
//! `c mod p` ([`Stage::rank`]).

use serde::Serialize;

use crate::analysis::Analysis;
use crate::graph::Graph;

/// One contiguous chunk of a pipeline, per sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stage {
    /// Chunk index, in model order.
    pub index: usize,
    /// Pipeline rank that runs it (`index mod pipeline degree`).
    pub rank: usize,
    /// Blocks it holds: indices into [`Graph::blocks`], `first..end`.
    pub blocks: std::ops::Range<usize>,
    /// Graph nodes it holds: `first..end`.
    pub nodes: std::ops::Range<usize>,
    /// Parameters (trained and frozen).
    pub parameters: u64,
    /// Trained parameters.
    pub trainable_parameters: u64,
    /// Forward + backward FLOPs per sample.
    pub training_flops: u64,
    /// Of them, the forward pass's.
    pub forward_flops: u64,
    /// Elements kept for backward per sample (at activation precision).
    pub saved_elements: u64,
    /// Other bytes kept for backward per sample (masks, indices, statistics).
    pub saved_other_bytes: u64,
}

/// Why a graph cannot be cut as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    /// The graph has no recomputable blocks to cut between.
    #[error("`{model}` has no blocks to cut into pipeline stages")]
    NoBlocks {
        /// Model name.
        model: String,
    },
    /// More chunks than blocks, or none.
    #[error("{chunks} pipeline chunks cannot hold {blocks} blocks (at least one block each)")]
    Chunks {
        /// Chunks asked for.
        chunks: usize,
        /// Blocks of the model.
        blocks: usize,
    },
    /// Given sizes that do not add up to the block count or leave a chunk empty.
    #[error("the given stage sizes {given:?} must be at least 1 each and add up to the model's {blocks} blocks")]
    Given {
        /// The sizes given.
        given: Vec<usize>,
        /// Blocks of the model.
        blocks: usize,
    },
    /// An analysis of another graph.
    #[error("the analysis has {layers} layers and the graph {nodes} nodes: not the same model")]
    Mismatch {
        /// Layers of the analysis.
        layers: usize,
        /// Nodes of the graph.
        nodes: usize,
    },
}

/// Cut `graph` (with its `analysis`) into `ranks x virtual_stages` chunks: of the block counts in `given` when
/// present (one per chunk), else balanced so the costliest chunk's training FLOPs are as low as they can be.
pub fn cut_stages(
    graph: &Graph,
    analysis: &Analysis,
    ranks: usize,
    virtual_stages: usize,
    given: Option<&[usize]>,
) -> Result<Vec<Stage>, StageError> {
    let (n, ranks) = (graph.blocks.len(), ranks.max(1));
    let chunks = ranks * virtual_stages.max(1);
    if analysis.layers.len() != graph.nodes.len() {
        return Err(StageError::Mismatch { layers: analysis.layers.len(), nodes: graph.nodes.len() });
    }
    if n == 0 {
        return Err(StageError::NoBlocks { model: graph.name.clone() });
    }
    if chunks > n {
        return Err(StageError::Chunks { chunks, blocks: n });
    }
    // Node ranges of each block, the leading nodes joined to the first and the trailing ones to the last.
    let mut spans: Vec<std::ops::Range<usize>> = graph.blocks.iter().map(|b| b.first..b.last + 1).collect();
    spans[0].start = 0;
    spans[n - 1].end = graph.nodes.len();
    let cost = |r: &std::ops::Range<usize>| -> u64 {
        analysis.layers[r.clone()].iter().map(|l| l.forward_flops + l.backward_flops).sum()
    };
    let costs: Vec<u64> = spans.iter().map(cost).collect();
    let sizes = match given {
        Some(g) => {
            if g.len() != chunks || g.contains(&0) || g.iter().sum::<usize>() != n {
                return Err(StageError::Given { given: g.to_vec(), blocks: n });
            }
            g.to_vec()
        }
        None => balanced(&costs, chunks),
    };
    let mut out = Vec::with_capacity(chunks);
    let mut at = 0;
    for (index, size) in sizes.into_iter().enumerate() {
        let blocks = at..at + size;
        at += size;
        let nodes = spans[blocks.start].start..spans[blocks.end - 1].end;
        let layers = &analysis.layers[nodes.clone()];
        out.push(Stage {
            index,
            rank: index % ranks,
            blocks,
            parameters: layers.iter().map(|l| l.parameters).sum(),
            trainable_parameters: layers.iter().filter(|l| !l.frozen).map(|l| l.parameters).sum(),
            training_flops: layers.iter().map(|l| l.forward_flops + l.backward_flops).sum(),
            forward_flops: layers.iter().map(|l| l.forward_flops).sum(),
            saved_elements: layers.iter().map(|l| l.saved_elements).sum(),
            saved_other_bytes: layers.iter().map(|l| l.saved_other_bytes).sum(),
            nodes,
        });
    }
    Ok(out)
}

/// Block counts of `chunks` contiguous chunks minimising the costliest chunk (linear partition by dynamic
/// programming; among equal optima the earliest cuts, so the result is deterministic).
fn balanced(costs: &[u64], chunks: usize) -> Vec<usize> {
    let n = costs.len();
    let mut prefix = vec![0u64; n + 1];
    for (i, c) in costs.iter().enumerate() {
        prefix[i + 1] = prefix[i] + c;
    }
    // best[j][i]: the lowest maximum over j chunks of the first i blocks; cut[j][i]: where the last one starts.
    let mut best = vec![vec![u64::MAX; n + 1]; chunks + 1];
    let mut cut = vec![vec![0usize; n + 1]; chunks + 1];
    best[0][0] = 0;
    for j in 1..=chunks {
        for i in j..=n {
            for c in (j - 1)..i {
                if best[j - 1][c] == u64::MAX {
                    continue;
                }
                let worst = best[j - 1][c].max(prefix[i] - prefix[c]);
                if worst < best[j][i] {
                    (best[j][i], cut[j][i]) = (worst, c);
                }
            }
        }
    }
    let mut sizes = vec![0; chunks];
    let mut end = n;
    for j in (1..=chunks).rev() {
        let start = cut[j][end];
        sizes[j - 1] = end - start;
        end = start;
    }
    sizes
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::model::GptSpec;

    fn gpt(layers: usize) -> Graph {
        let spec: GptSpec = serde_json::from_value(serde_json::json!({
            "layers": layers, "d_model": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "activation": "swiglu",
            "norm": "rmsnorm", "positions": "rotary", "vocab": 2048, "seq_len": 16, "tied_embeddings": false,
            "bias": false
        }))
        .unwrap();
        crate::zoo::build(&crate::ModelSpec::Gpt(spec)).unwrap()
    }

    #[test]
    fn balanced_cuts_minimise_the_costliest_chunk() {
        assert_eq!(balanced(&[1, 1, 1, 1], 2), [2, 2]);
        assert_eq!(balanced(&[5, 1, 1, 1, 1, 1], 2), [1, 5]);
        assert_eq!(balanced(&[1, 1, 1, 1, 1, 5], 3), [2, 3, 1]);
        assert_eq!(balanced(&[3, 3, 3], 3), [1, 1, 1]);
    }

    #[test]
    fn stages_cover_the_model_once_and_balance_by_flops() {
        let g = gpt(8);
        let a = analyze(&g);
        for (ranks, v) in [(1, 1), (2, 1), (4, 1), (2, 2), (2, 4)] {
            let stages = cut_stages(&g, &a, ranks, v, None).unwrap();
            assert_eq!(stages.len(), ranks * v);
            assert_eq!(stages.iter().map(|s| s.parameters).sum::<u64>(), a.parameters, "{ranks}x{v}");
            assert_eq!(stages.iter().map(|s| s.training_flops).sum::<u64>(), a.flops.train_per_sample, "{ranks}x{v}");
            assert_eq!(stages.iter().map(|s| s.saved_elements).sum::<u64>(), a.activations.saved_elements_per_sample);
            assert_eq!(stages.last().unwrap().nodes.end, g.nodes.len());
            for w in stages.windows(2) {
                assert_eq!(w[0].nodes.end, w[1].nodes.start);
            }
            assert!(stages.iter().enumerate().all(|(i, s)| s.rank == i % ranks));
        }
        // The head (vocabulary 2048 x 64 and the loss) is costlier than a block: over 2 stages the last holds
        // fewer blocks than the first.
        let two = cut_stages(&g, &a, 2, 1, None).unwrap();
        assert!(two[1].blocks.len() < two[0].blocks.len(), "{two:?}");
        let given = cut_stages(&g, &a, 2, 1, Some(&[4, 4])).unwrap();
        assert_eq!((given[0].blocks.clone(), given[1].blocks.clone()), (0..4, 4..8));
    }

    #[test]
    fn impossible_cuts_are_errors() {
        let g = gpt(2);
        let a = analyze(&g);
        assert_eq!(cut_stages(&g, &a, 4, 1, None), Err(StageError::Chunks { chunks: 4, blocks: 2 }));
        assert!(matches!(cut_stages(&g, &a, 2, 1, Some(&[2, 0])), Err(StageError::Given { .. })));
        let mlp =
            crate::zoo::build(&crate::ModelSpec::Mlp(serde_json::from_value(serde_json::json!({})).unwrap())).unwrap();
        let am = analyze(&mlp);
        assert!(matches!(cut_stages(&mlp, &am, 2, 1, None), Err(StageError::NoBlocks { .. })));
        assert!(matches!(cut_stages(&g, &am, 2, 1, None), Err(StageError::Mismatch { .. })));
    }
}
