//! What one rank of a tensor group holds and sends, from the runtime's split of the model
//! ([`TensorShard`]): its parameters, trained parameters and experts ([`RankShare`]: a mixture of experts runs
//! whole on every rank), its parallel regions (each a forward and a backward sum over the group), the
//! activations outside the blocks it exchanges ([`edge_elements`]) and the gradients it sums over the group
//! ([`partial_gradient_bytes`]).

use trainbench_graph::params::graph_tensors;
use trainbench_graph::tensor_parallel::{Role, Split, TensorShard};

/// One tensor rank's share of the nodes a pipeline rank holds (all of them without a pipeline).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RankShare {
    /// Parameters it holds (trained and frozen).
    pub(super) all: f64,
    /// Trained parameters it holds.
    pub(super) trained: f64,
    /// Trained expert parameters among them.
    pub(super) experts: f64,
    /// Parallel regions inside its blocks (a row-parallel linear layer or a fused self-attention each): a
    /// decoder block has two, one whose feed-forward is a mixture of experts (whole on every rank) one.
    pub(super) regions: usize,
    /// Of them, those in blocks activation checkpointing recomputes (their forward sums run again).
    pub(super) recomputed_regions: usize,
}

impl RankShare {
    /// The share of the nodes `held` selects on rank 0 of `shard`'s group; `recomputes` says which blocks
    /// activation checkpointing recomputes.
    pub(super) fn of(
        graph: &trainbench_graph::Graph,
        shard: &TensorShard,
        held: &dyn Fn(usize) -> bool,
        recomputes: &dyn Fn(usize) -> bool,
    ) -> RankShare {
        let (mut all, mut trained, mut experts) = (0u64, 0u64, 0u64);
        for (id, d) in graph_tensors(&shard.local).iter().filter(|(id, _)| held(*id)) {
            all += d.numel();
            if d.trainable() {
                trained += d.numel();
                if trainbench_comm::layout::is_expert_tensor(&shard.local.nodes[*id], d) {
                    experts += d.numel();
                }
            }
        }
        let (mut regions, mut recomputed_regions) = (0, 0);
        for (b, block) in graph.blocks.iter().enumerate() {
            let n = (block.first..=block.last)
                .filter(|&i| held(i) && matches!(shard.roles[i], Role::Row | Role::Heads))
                .count();
            regions += n;
            if recomputes(b) {
                recomputed_regions += n;
            }
        }
        RankShare { all: all as f64, trained: trained as f64, experts: experts as f64, regions, recomputed_regions }
    }
}

/// Elements per sample of the activations outside the blocks, of the nodes `held` selects, that the tensor
/// group exchanges: `[0]` those it sums (the outputs of the vocabulary-parallel embedding and of row-parallel
/// layers there, and those entering a split layer, their gradients summed; with sequence parallelism the
/// whole ones entering a split layer apart), `[1]` with sequence parallelism the whole ones entering a split
/// layer (copied in, one all-reduce of their gradient), `[2]` sequence shards gathered whole (one all-gather).
pub(super) fn edge_elements(
    graph: &trainbench_graph::Graph,
    shard: &TensorShard,
    held: &dyn Fn(usize) -> bool,
) -> [u64; 3] {
    let in_block = |i: usize| graph.blocks.iter().any(|b| (b.first..=b.last).contains(&i));
    let summed = |i: usize| shard.enters[i] || matches!(shard.roles[i], Role::VocabEmbedding | Role::Row);
    let mut out = [0u64; 3];
    for i in (0..graph.nodes.len()).filter(|&i| held(i) && !in_block(i)) {
        let numel = graph.nodes[i].shape.numel();
        if shard.gathers[i] {
            out[2] += numel;
        } else if summed(i) {
            let copied = shard.sequence_parallel && shard.enters[i] && !shard.on_shards[i];
            out[usize::from(copied)] += numel;
        }
    }
    out
}

/// fp32 bytes of one tensor rank's trained tensors of the nodes `held` selects whose gradients are summed over
/// the group (each rank holds only its share of them).
pub(super) fn partial_gradient_bytes(
    graph: &trainbench_graph::Graph,
    shard: &TensorShard,
    held: &dyn Fn(usize) -> bool,
) -> f64 {
    let partial: u64 = graph_tensors(graph)
        .iter()
        .filter(|(id, d)| {
            held(*id) && d.trainable() && shard.split_of(graph, *id, d) == Split::Replicated { partial: true }
        })
        .map(|(_, d)| d.numel())
        .sum();
    4.0 * partial as f64
}
