//! What the analysis says for today's workload figures: model FLOPs (the numerator of MFU) with their
//! convention, the recomputable blocks (what activation checkpointing recomputes and frees), and hardware
//! FLOPs (the numerator of HFU: model work plus recomputation).

use super::summary::{
    Analysis, BlockAnalysis, COUNTER_CONVENTION, DECODER_CONVENTION, LORA_DECODER_CONVENTION, MOE_DECODER_CONVENTION,
    ModelFlops,
};
use crate::graph::{Graph, Op};
use crate::training::Checkpointing;

/// Active matmul parameters of a decoder: every parameter but the lookup-only embeddings and the experts a token
/// is not routed to, as (frozen, trained).
fn matmul_parameters(graph: &Graph, a: &Analysis) -> (u64, u64) {
    let lookup = |i: usize, n: &crate::graph::Node| match n.op {
        Op::Embedding { .. } => !crate::params::has_tied_heads(graph, i),
        Op::LearnedPositions { .. } => true,
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
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
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Lora { .. }
        | Op::Moe { .. }
        | Op::Loss { .. } => false,
    };
    let (mut frozen, mut trained) = (0, 0);
    for (i, (node, layer)) in graph.nodes.iter().zip(&a.layers).enumerate() {
        if lookup(i, node) {
            continue;
        }
        let active = layer.parameters - super::rules::inactive_parameters(node);
        *(if layer.frozen { &mut frozen } else { &mut trained }) += active;
    }
    (frozen, trained)
}

/// Model FLOPs of `graph` per sample.
pub(crate) fn model_flops(graph: &Graph, a: &Analysis) -> ModelFlops {
    match graph.decoder {
        Some(d) => {
            let attention = 12 * (d.layers * d.heads * d.head_dim * d.seq_len) as u64;
            let (frozen, trained) = matmul_parameters(graph, a);
            let per_token = 4 * frozen + 6 * trained + attention;
            let convention = if frozen > 0 {
                LORA_DECODER_CONVENTION
            } else if a.active_parameters < a.parameters {
                MOE_DECODER_CONVENTION
            } else {
                DECODER_CONVENTION
            };
            ModelFlops {
                per_sample: per_token * d.seq_len as u64,
                per_token: Some(per_token),
                convention: convention.into(),
            }
        }
        None => {
            let per_sample = a.flops.train_per_sample;
            let per_token =
                (a.item_unit == "tokens" && a.items_per_sample > 0).then(|| per_sample / a.items_per_sample);
            ModelFlops { per_sample, per_token, convention: COUNTER_CONVENTION.into() }
        }
    }
}

/// Figures of each block of `graph`.
pub(crate) fn blocks(graph: &Graph, a: &Analysis) -> Vec<BlockAnalysis> {
    graph
        .blocks
        .iter()
        .map(|b| BlockAnalysis {
            name: b.name.clone(),
            forward_flops: a.layers[b.first..=b.last].iter().map(|l| l.forward_flops).sum(),
            saved_elements: a.layers[b.first..b.last].iter().map(|l| l.saved_elements).sum(),
            saved_wide_elements: a.layers[b.first..b.last].iter().map(|l| l.saved_wide_elements).sum(),
        })
        .collect()
}

impl Analysis {
    /// Forward FLOPs per sample recomputed in the backward pass under `checkpointing`.
    pub fn recomputed_flops(&self, checkpointing: Checkpointing) -> u64 {
        self.blocks.iter().enumerate().filter(|(i, _)| checkpointing.recomputes(*i)).map(|(_, b)| b.forward_flops).sum()
    }
    /// Hardware FLOPs per sample: the training FLOPs plus what `checkpointing` recomputes.
    pub fn hardware_flops(&self, checkpointing: Checkpointing) -> u64 {
        self.flops.train_per_sample + self.recomputed_flops(checkpointing)
    }
    /// Elements per sample kept for backward under `checkpointing`: the recomputed blocks' activations are
    /// freed, and the largest of them is live again while it is recomputed.
    pub fn saved_elements(&self, checkpointing: Checkpointing) -> u64 {
        let recomputed = || self.blocks.iter().enumerate().filter(|(i, _)| checkpointing.recomputes(*i));
        let freed: u64 = recomputed().map(|(_, b)| b.saved_elements).sum();
        let live_again = recomputed().map(|(_, b)| b.saved_elements).max().unwrap_or(0);
        self.activations.saved_elements_per_sample - freed + live_again
    }
    /// Of [`Analysis::saved_elements`], those a half-precision run keeps in fp32, under `checkpointing` (the
    /// same blocks freed, the largest of them live again).
    pub fn saved_wide_elements(&self, checkpointing: Checkpointing) -> u64 {
        let recomputed = || self.blocks.iter().enumerate().filter(|(i, _)| checkpointing.recomputes(*i));
        let freed: u64 = recomputed().map(|(_, b)| b.saved_wide_elements).sum();
        // The block live again is the one with the most kept elements (of those, the most kept in fp32).
        let live_again =
            recomputed().map(|(_, b)| (b.saved_elements, b.saved_wide_elements)).max().map_or(0, |(_, wide)| wide);
        self.activations.saved_wide_elements_per_sample.saturating_sub(freed) + live_again
    }
}
