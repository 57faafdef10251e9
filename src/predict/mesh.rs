//! `predict` for a device mesh (tensor x pipeline x data parallelism, [`trainbench_comm::Mesh`]): step time,
//! bytes per step per mesh dimension and collective kind, the pipeline bubble, and memory per pipeline stage
//! with the maximum over ranks as the headline. Built on the one-device prediction of one micro-batch and on
//! the formulas of [`super::parallel`] (states per parameter, ring exchange, tensor-parallel volume, bubble).
//!
//! - Compute: each chunk ([`trainbench_graph::stages::cut_stages`], balanced by FLOPs or as given) runs its forward and
//!   backward passes at its share of the one-device time's, divided by the tensor degree; the schedule is
//!   replayed over them with each stage-to-stage message a hop over the link
//!   ([`trainbench_comm::schedule::replay`]), which gives the step and the bubble: the formula's
//!   `(p - 1) / (v m + p - 1)` for equal chunks and instant hops, more for unequal chunks or slow links.
//! - Tensor: four ring all-reduces per layer and micro-batch of the block activations `A`
//!   ([`parallel::tensor_parallel_bytes`]); with sequence parallelism each is an all-gather plus a
//!   reduce-scatter of the same volume. The split layers outside the blocks count theirs (a decoder's
//!   vocabulary-parallel embedding and head: one more each; a ViT's classifier: its input), on the stage that
//!   holds them, with the cross-entropy's per-token values on the loss's stage and the partial gradients of
//!   each stage's tensors ([`VocabBytes`]), and the data dimension exchanges the rank's exact share (norms
//!   whole): what the runtime sends. With a pipeline each stage is priced on its own blocks and layers
//!   outside them, and the busiest stage's bytes per collective are the dimension's.
//! - Pipeline: per micro-batch each chunk boundary sends `A` forward and its gradient back (`A / t` with
//!   sequence parallelism); a rank's bytes count what it sends, and each message's time is a hop of the replay.
//! - Data: the strategy's exchange ([`parallel::exchange_bytes`]) of the rank's fp32 gradients (its stage's
//!   trained parameters over the tensor degree).
//! - Memory per rank: its parameters over the tensor degree at [`parallel::per_parameter`] bytes, the
//!   activations of the micro-batches it holds (GPipe `m`, 1F1B `min(m, p - r)`, interleaved Megatron's warm-up
//!   count), divided by the tensor degree except norms, dropout and residual sums without sequence parallelism,
//!   scaled by the share activation checkpointing keeps of the whole model's.
//! - Expert parallelism (along the data dimension): each rank holds `1 / ep` of the experts' parameters (and
//!   their gradients and optimizer state); the non-expert gradients are all-reduced over the data dimension,
//!   the experts' over the `d / ep` ranks holding the same experts; four all-to-alls per MoE layer (the busiest
//!   stage's) and micro-batch ([`moe_price::all_to_all_bytes`], in the measured convention: send buffers) of which
//!   `(ep - 1) / ep` crosses the link (inside a node when `ep` divides the devices per node), in the compute path.
//! - MFU counts each token's model FLOPs once for the whole mesh: model FLOPs per second over world x peak.

use serde::Serialize;
use trainbench_comm::{DataParallel, Mesh, MeshDim, Topology};
use trainbench_graph::analysis::{memory_estimate, memory_estimate_checkpointed};
use trainbench_graph::stages::{Stage, cut_stages};
use trainbench_graph::tensor_parallel::{Role, TensorShard};

use super::mesh_split::{RankShare, edge_elements, partial_gradient_bytes};
use super::moe_price;
use super::parallel::{self, Sharding, StateBytes, StatePart};
use super::pipeline_step::{Bubble, bubble, holds, microbatches_held, replay_chunks};
use super::{AnalyzedGraph, PredictError, Setting, Terms, comm, predict_analyzed};
use crate::hardware::wire::HardwareFile;

/// Bytes one rank sends per step along one mesh dimension by one kind of collective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimensionBytes {
    /// Mesh dimension.
    pub dimension: MeshDim,
    /// Collective (`all-reduce`, `all-gather`, `reduce-scatter`, `send-recv`).
    pub collective: &'static str,
    /// Bytes the busiest rank of that dimension sends per step.
    pub bytes_per_rank: f64,
}

/// One pipeline rank's memory and work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageMemory {
    /// Pipeline rank (stage).
    pub stage: usize,
    /// Blocks it holds, one `[first, end)` per chunk.
    pub blocks: Vec<[usize; 2]>,
    /// Parameters it holds per tensor rank.
    pub parameters: f64,
    /// Weights, bytes.
    pub weights_bytes: f64,
    /// Gradients, bytes.
    pub gradients_bytes: f64,
    /// Optimizer state, bytes.
    pub optimizer_bytes: f64,
    /// Activations held at the peak (micro-batches in flight), bytes.
    pub activations_bytes: f64,
    /// Micro-batches (chunk micro-batches when interleaved) whose activations it holds at the peak.
    pub microbatches_held: usize,
    /// Everything at the peak (with the workspace), bytes.
    pub peak_bytes: f64,
    /// Forward + backward seconds of one micro-batch on it.
    pub compute_s: f64,
}

/// The prediction for a mesh.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeshPrediction {
    /// The mesh.
    pub mesh: Mesh,
    /// Data-parallel degree.
    pub data_parallel: usize,
    /// Ranks.
    pub world_size: usize,
    /// Samples per micro-batch on one data-parallel replica.
    pub microbatch_size: usize,
    /// Serial step time, seconds.
    pub step_time_s: f64,
    /// The range the serial step falls in 80% of the time: the busiest stage's computation as uncertain as one
    /// rank's micro-batch prediction, the collectives as the exchange group ([`super::uncertainty::composed`]).
    pub interval: super::uncertainty::Interval,
    /// Step time with the data-parallel exchange under the backward pass, seconds.
    pub step_time_overlapped_s: f64,
    /// The pipeline bubble (`None` without a pipeline).
    pub bubble: Option<Bubble>,
    /// Bytes per step per dimension and collective.
    pub bytes: Vec<DimensionBytes>,
    /// Memory and work per pipeline rank.
    pub stages: Vec<StageMemory>,
    /// The headline: the most memory any rank needs, bytes.
    pub max_memory_per_rank_bytes: f64,
    /// The stage that needs it.
    pub max_memory_stage: usize,
    /// Whether that fits the device.
    pub fits: bool,
    /// Items (tokens for token models) per second, whole mesh.
    pub items_per_s: f64,
    /// Model FLOPs per second over world x peak (each token counted once); `None` without a peak.
    pub mfu: Option<f64>,
}

/// The inputs of [`mesh_bytes`], per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByteInputs {
    /// Block activations of one micro-batch at a stage boundary, bytes (`A`).
    pub boundary_bytes: f64,
    /// Blocks on the busiest pipeline rank.
    pub layers_on_rank: usize,
    /// Parallel regions in those blocks, each summed over the tensor group forward and backward (two per
    /// decoder block; one where the feed-forward is a mixture of experts, whole on every rank).
    pub regions_on_rank: usize,
    /// Chunk boundaries the busiest rank sends across per micro-batch, forward and backward together.
    pub sends_per_microbatch: usize,
    /// fp32 gradient bytes of the busiest rank's trained parameters (after the tensor split).
    pub gradient_bytes: f64,
    /// Frozen weight bytes of that rank (gathered by ZeRO-3 as the trained ones are).
    pub frozen_bytes: f64,
    /// The share of that rank's weights ZeRO-3 gathers once per step rather than twice: its root unit (every
    /// tensor outside the blocks, kept from the forward pass to the backward one).
    pub gathered_once_share: f64,
    /// A tensor-parallel model's traffic outside its blocks (`None` without tensor parallelism).
    pub vocab: Option<VocabBytes>,
}

/// What a tensor group sends outside its blocks, per micro-batch unless said: the sums (reduce-scatters with
/// sequence parallelism) and copies (gathers) of the activations entering and leaving the split layers there
/// ([`VocabBytes::edge_bytes`]: a decoder's vocabulary-parallel embedding and its head's input, `2 A`; a ViT's
/// classifier's input, one vector per sample); the cross-entropy's all-gather of one fp32 maximum per token and
/// its all-reduce of two fp32 values per token; and once per step the all-reduce of the gradients each rank
/// holds only its share of. Without a pipeline a rank holds all of them; a pipeline stage those of its chunks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VocabBytes {
    /// Bytes per micro-batch of the activations outside the blocks each summed (or copied in, its gradient
    /// summed) over the group once per pass: each rank sends `2 (t - 1) / t` of them.
    pub edge_bytes: f64,
    /// With sequence parallelism, bytes per micro-batch of whole activations entering a split layer (a ViT's
    /// class-token features): copied in, their gradient summed (an all-reduce).
    pub copied_edge_bytes: f64,
    /// With sequence parallelism, bytes per micro-batch of sequence shards gathered whole for an operation over
    /// the whole sequence (a ViT's final norm before its class-token slice): one all-gather, forward only.
    pub gathered_whole_bytes: f64,
    /// The rank computes the loss (the cross-entropy's collectives).
    pub head: bool,
    /// Tokens the loss reads per micro-batch.
    pub tokens: f64,
    /// fp32 bytes of the gradients summed over the tensor group after the backward pass.
    pub partial_gradient_bytes: f64,
    /// Parallel regions in the blocks activation checkpointing recomputes: their forward collectives (a sum,
    /// or a gather and a reduce-scatter with sequence parallelism) run again in the backward pass.
    pub recomputed_regions: usize,
}

/// Bytes per step per dimension and collective kind for `mesh` over `world` ranks with `strategy` along the
/// data dimension (see the module documentation).
pub fn mesh_bytes(mesh: &Mesh, world: usize, strategy: DataParallel, i: ByteInputs) -> Vec<DimensionBytes> {
    let (t, m) = (mesh.tensor_parallel.max(1), mesh.microbatches.max(1) as f64);
    let d = mesh.data_parallel(world).unwrap_or(1);
    let mut out = Vec::new();
    let mut push = |dimension, collective, bytes: f64| {
        if bytes > 0.0 {
            out.push(DimensionBytes { dimension, collective, bytes_per_rank: bytes });
        }
    };
    let r = (t as f64 - 1.0) / t as f64;
    let tensor = m * parallel::tensor_region_bytes(i.regions_on_rank, i.boundary_bytes, t);
    // The regions outside the blocks (a decoder's embedding and head: two more collectives of A).
    let recomputed = i.vocab.map_or(0.0, |v| m * 2.0 * r * i.boundary_bytes * v.recomputed_regions as f64);
    let edges = i.vocab.map_or(0.0, |v| m * 2.0 * r * v.edge_bytes) + recomputed;
    let (mut all_reduce, mut all_gather) = (0.0, 0.0);
    if let Some(v) = i.vocab {
        if v.head {
            all_gather += m * (t as f64 - 1.0) * 4.0 * v.tokens;
            all_reduce += m * 2.0 * r * 8.0 * v.tokens;
        }
        all_reduce += 2.0 * r * v.partial_gradient_bytes + m * 2.0 * r * v.copied_edge_bytes;
        all_gather += m * r * v.gathered_whole_bytes;
    }
    if mesh.sequence_parallel {
        push(MeshDim::Tensor, "all-gather", (tensor + edges) / 2.0 + all_gather);
        push(MeshDim::Tensor, "reduce-scatter", (tensor + edges) / 2.0);
        push(MeshDim::Tensor, "all-reduce", all_reduce);
    } else {
        push(MeshDim::Tensor, "all-reduce", tensor + edges + all_reduce);
        push(MeshDim::Tensor, "all-gather", all_gather);
    }
    let hop = if mesh.sequence_parallel { i.boundary_bytes / t as f64 } else { i.boundary_bytes };
    push(MeshDim::Pipeline, "send-recv", m * i.sends_per_microbatch as f64 * hop);
    let sharding = Sharding::of(strategy);
    let share = (d as f64 - 1.0) / d as f64;
    let gradients = parallel::exchange_bytes(sharding, d, i.gradient_bytes);
    // ZeRO-3 gathers each block's unit for its forward and again for its backward, the root unit once.
    let gathers = 2.0 - i.gathered_once_share.clamp(0.0, 1.0);
    let frozen = if sharding == Sharding::Zero3 { gathers * share * i.frozen_bytes } else { 0.0 };
    match sharding {
        Sharding::Replicated if strategy.is_single() => {}
        Sharding::Replicated => push(MeshDim::Data, "all-reduce", gradients),
        Sharding::Zero1 | Sharding::Zero2 => {
            push(MeshDim::Data, "reduce-scatter", gradients / 2.0);
            push(MeshDim::Data, "all-gather", gradients / 2.0);
        }
        Sharding::Zero3 => {
            push(MeshDim::Data, "reduce-scatter", gradients / 3.0);
            push(MeshDim::Data, "all-gather", gathers * gradients / 3.0 + frozen);
        }
    }
    out
}

/// The tensors ZeRO shards: every trained one, or beside expert parallelism (`experts_apart`) all but the
/// experts'.
fn sharded_layout(graph: &trainbench_graph::Graph, experts_apart: bool) -> trainbench_comm::Layout {
    if experts_apart { trainbench_comm::Layout::without_experts(graph) } else { trainbench_comm::Layout::of(graph) }
}

/// The share of `graph`'s sharded elements ZeRO-3 over `workers` keeps in its root unit (outside the blocks):
/// all of them for a model whose blocks the runtime does not cut into units.
fn root_share(graph: &trainbench_graph::Graph, workers: usize, experts_apart: bool) -> f64 {
    let layout = sharded_layout(graph, experts_apart);
    let units = trainbench_comm::sharded::units_by_block(graph, &layout, workers).unwrap_or_default();
    let blocks: usize = units.iter().filter(|u| u.graph_block.is_some()).map(|u| u.len).sum();
    1.0 - blocks as f64 / layout.total.max(1) as f64
}

/// Elements of the buffers ZeRO-3 over `workers` exchanges for `graph` (each unit padded to a multiple of
/// `workers`), and those of its root unit; the unpadded total for a model whose blocks it does not cut.
fn padded_units(graph: &trainbench_graph::Graph, workers: usize, experts_apart: bool) -> (f64, f64) {
    let layout = sharded_layout(graph, experts_apart);
    match trainbench_comm::sharded::units_by_block(graph, &layout, workers) {
        Ok(units) => {
            let root: usize = units.iter().filter(|u| u.graph_block.is_none()).map(|u| u.padded(workers)).sum();
            (units.iter().map(|u| u.padded(workers)).sum::<usize>() as f64, root as f64)
        }
        Err(_) => (layout.total as f64, layout.total as f64),
    }
}

/// Whether a layer's kept activations are replicated across a tensor group without sequence parallelism, by its
/// kind (for a model the runtime's split does not cover).
fn replicated_without_sp(op: &str) -> bool {
    matches!(op, "rms_norm" | "layer_norm" | "dropout" | "add")
}

/// Predict `setting` (whose topology carries the mesh) on `profile`.
pub fn predict_mesh(
    analyzed: &AnalyzedGraph<'_>,
    setting: &Setting,
    profile: &HardwareFile,
    terms: &Terms,
) -> Result<MeshPrediction, PredictError> {
    let (graph, a) = (analyzed.graph, &analyzed.analysis);
    let topology = setting.topology;
    let mesh = topology.mesh;
    let world = topology.world_size().max(1);
    let (t, p) = (mesh.tensor_parallel.max(1), mesh.pipeline_parallel.max(1));
    let d = topology.data_parallel();
    let m = if p > 1 { mesh.microbatches.max(1) } else { 1 };
    if setting.batch % (d * m) != 0 {
        return Err(PredictError::Batch { batch: setting.batch, world: d * m });
    }
    let mb = setting.batch / (d * m);
    let one = Setting { batch: mb, topology: Topology::single(), ..setting.clone() };
    let base = predict_analyzed(analyzed, &one, profile, terms)?;
    let uncertainty = super::coefficients(profile, setting.precision)?.under(terms).uncertainty;
    let fb_s = base.phases.forward_s + base.phases.backward_s;
    let act_bytes = setting.precision.activation_bytes() as f64;
    let mem = memory_estimate(a, mb, setting.precision, &setting.optimizer);
    // Activation checkpointing keeps the share of the kept activations the whole-model estimate keeps.
    let checkpointed =
        memory_estimate_checkpointed(a, mb, setting.precision, &setting.optimizer, setting.schedule.checkpointing);
    let kept_share = if mem.activations > 0 { checkpointed.activations as f64 / mem.activations as f64 } else { 1.0 };
    let params = a.parameters.max(1) as f64;
    let states = StateBytes {
        weights: mem.weights as f64 / params,
        gradients: mem.gradients as f64 / a.trainable_parameters.max(1) as f64,
        optimizer: mem.optimizer_state as f64 / a.trainable_parameters.max(1) as f64,
    };
    let sharding = Sharding::of(topology.strategy);
    // Chunks: the pipeline's (balanced by FLOPs), or the whole model as one.
    let chunks: Vec<Stage> = if p > 1 {
        cut_stages(graph, a, p, mesh.virtual_stages, setting.given_cut())
            .map_err(|e| PredictError::Mesh { why: e.to_string() })?
    } else {
        let all = cut_stages(graph, a, 1, 1, None).ok();
        all.unwrap_or_else(|| {
            vec![Stage {
                index: 0,
                rank: 0,
                blocks: 0..graph.blocks.len(),
                nodes: 0..graph.nodes.len(),
                parameters: a.parameters,
                trainable_parameters: a.trainable_parameters,
                training_flops: a.flops.train_per_sample,
                forward_flops: a.flops.forward_per_sample,
                saved_elements: a.activations.saved_elements_per_sample,
                saved_other_bytes: a.activations.saved_other_bytes_per_sample,
            }]
        })
    };
    let total_flops = a.flops.train_per_sample.max(1) as f64;
    let boundary =
        graph.blocks.first().map_or(0.0, |b| graph.nodes[b.input].shape.numel() as f64) * mb as f64 * act_bytes;
    // The runtime's split of the model over a tensor group (`None` for a model it cannot split: priced by kind).
    // Per node: whether every rank keeps its output whole (a replicated node not on sequence shards).
    let split = (t > 1).then(|| TensorShard::new(graph, t, 0, mesh.sequence_parallel).ok()).flatten();
    let whole_on_rank = split.as_ref().map(|s| {
        s.roles.iter().zip(&s.on_shards).map(|(r, shards)| *r == Role::Replicated && !shards).collect::<Vec<_>>()
    });
    let recomputes = |b: usize| setting.schedule.checkpointing.recomputes(b);
    // Training FLOPs per sample one tensor rank computes of a chunk: its share, except a mixture of experts,
    // which every rank computes whole.
    let rank_flops = |c: &Stage| -> f64 {
        let whole = |i: usize| whole_on_rank.as_ref().is_some_and(|w| w.get(i).copied().unwrap_or(false));
        a.layers[c.nodes.clone()]
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let f = (l.forward_flops + l.backward_flops) as f64;
                if l.op == "moe" && whole(c.nodes.start + k) { f } else { f / t as f64 }
            })
            .sum()
    };
    let tensor_shares: Vec<f64> = chunks.iter().map(|c| rank_flops(c) / (c.training_flops.max(1) as f64)).collect();
    // Each pipeline rank's tensor share: the split's exact counts (norms and a mixture of experts whole).
    let shares: Vec<Option<RankShare>> =
        (0..p).map(|r| split.as_ref().map(|s| RankShare::of(graph, s, &holds(&chunks, p, r), &recomputes))).collect();
    let mut stages = Vec::with_capacity(p);
    let (mut busiest_layers, mut busiest_sends, mut busiest_grads, mut busiest_frozen) =
        (0usize, 0usize, 0.0f64, 0.0f64);
    let mut busiest_regions = 0usize;
    // Expert parallelism: each rank holds 1 / ep of the experts (their gradients summed over its replicas).
    let ep = mesh.expert_parallel.max(1);
    let mut busiest_expert_grads = 0.0f64;
    let last_chunk = chunks.len().saturating_sub(1);
    for (r, &share) in shares.iter().enumerate() {
        let mine: Vec<&Stage> = chunks.iter().filter(|c| c.rank == r).collect();
        let flops: f64 = mine.iter().map(|c| rank_flops(c)).sum();
        // One tensor rank's share (`share`), or without a split the model's over the degree.
        let per_rank = |x: f64| x / t as f64;
        let experts = share.map_or_else(
            || per_rank(mine.iter().map(|c| moe_price::expert_parameters(graph, c.nodes.clone())).sum()),
            |s| s.experts,
        );
        let sharded_off = experts * (ep - 1) as f64 / ep as f64;
        let trained = share
            .map_or_else(|| per_rank(mine.iter().map(|c| c.trainable_parameters as f64).sum()), |s| s.trained)
            - sharded_off;
        let all =
            share.map_or_else(|| per_rank(mine.iter().map(|c| c.parameters as f64).sum()), |s| s.all) - sharded_off;
        let frozen = all - trained;
        let layers: usize = mine.iter().map(|c| c.blocks.len()).sum();
        let sends: usize = mine.iter().map(|c| usize::from(c.index < last_chunk) + usize::from(c.index > 0)).sum();
        // Kept activations per sample: split over the tensor group except what every rank computes whole (the
        // split's replicated nodes: norms, adds, dropout and a ViT's stem; with SP the stem only).
        let mut per_sample = 0.0;
        for c in &mine {
            for (i, l) in a.layers.iter().enumerate().take(c.nodes.end).skip(c.nodes.start) {
                // A half-precision run keeps some of them in fp32 (the analysis's autocast policy): 2 bytes more.
                let bytes = l.saved_elements as f64 * act_bytes
                    + (l.saved_wide_elements * setting.precision.kept_fp32_extra_bytes()) as f64
                    + l.saved_other_bytes as f64;
                let whole = whole_on_rank.as_ref().map_or_else(
                    || !mesh.sequence_parallel && replicated_without_sp(&l.op),
                    |w| w.get(i).copied().unwrap_or(false),
                );
                per_sample += if whole { bytes } else { bytes / t as f64 };
            }
        }
        let held = microbatches_held(&mesh, r);
        let v = if p > 1 { mesh.chunks_per_rank() } else { 1 };
        let activations = kept_share * per_sample * mb as f64 * held as f64 / v as f64;
        // ZeRO shards what every replica holds; expert parallelism's shard of the experts stays whole per rank.
        let expert_held = if ep > 1 { experts / ep as f64 } else { 0.0 };
        let state = |n: f64, bytes: f64, part| parallel::held_bytes(n, expert_held, bytes, sharding, d, part);
        let weights = state(all, states.weights, StatePart::Weights);
        let gradients = state(trained, states.gradients, StatePart::Gradients);
        let optimizer = state(trained, states.optimizer, StatePart::Optimizer);
        let workspace = mem.workspace as f64 / t as f64;
        stages.push(StageMemory {
            stage: r,
            blocks: mine.iter().map(|c| [c.blocks.start, c.blocks.end]).collect(),
            parameters: all,
            weights_bytes: weights,
            gradients_bytes: gradients,
            optimizer_bytes: optimizer,
            activations_bytes: activations,
            microbatches_held: held,
            peak_bytes: weights + gradients + optimizer + activations + workspace,
            compute_s: fb_s * flops / total_flops,
        });
        // The busiest rank of each kind of traffic (fp32 gradients; frozen weights gathered by ZeRO-3).
        busiest_layers = busiest_layers.max(layers);
        busiest_regions = busiest_regions.max(share.map_or(2 * layers, |s| s.regions));
        busiest_grads = busiest_grads.max((trained - expert_held) * 4.0);
        busiest_expert_grads = busiest_expert_grads.max(expert_held * 4.0);
        busiest_frozen = busiest_frozen.max(frozen * 4.0);
        busiest_sends = busiest_sends.max(sends);
    }
    let mut inputs = ByteInputs {
        boundary_bytes: boundary,
        layers_on_rank: busiest_layers,
        regions_on_rank: busiest_regions,
        sends_per_microbatch: busiest_sends,
        gradient_bytes: busiest_grads,
        frozen_bytes: busiest_frozen,
        gathered_once_share: 0.0,
        vocab: None,
    };
    if p == 1 && topology.strategy == DataParallel::Zero3 {
        // The units the runtime cuts this rank's share of the model into (its tensor shard's local graph).
        inputs.gathered_once_share = root_share(split.as_ref().map_or(graph, |s| &s.local), d, ep > 1);
    }
    let mut stage_tensor: Option<Vec<DimensionBytes>> = None;
    if t > 1 {
        // The split the runtime makes: its exact local gradients (norms stay whole) and its traffic outside
        // the blocks, on each pipeline stage for its own chunks.
        if let Some(shard) = &split {
            let tokens = graph.losses.first().and_then(|&l| graph.nodes[l].inputs.first()).map_or(0.0, |&x| {
                let shape = &graph.nodes[x].shape;
                (shape.numel() / shape.last().max(1) as u64) as f64 * mb as f64
            });
            let mut most: Vec<DimensionBytes> = Vec::new();
            let mut gradient_bytes = 0.0f64;
            for (r, share) in shares.iter().enumerate() {
                let mine: Vec<&Stage> = chunks.iter().filter(|c| c.rank == r).collect();
                let held = holds(&chunks, p, r);
                let partial = partial_gradient_bytes(graph, shard, &held);
                let edges = edge_elements(graph, shard, &held);
                let Some(share) = share else { continue };
                // fp32 gradients; beside expert parallelism the data dimension exchanges the non-expert ones only.
                let experts = if ep > 1 { share.experts } else { 0.0 };
                gradient_bytes = gradient_bytes.max(4.0 * (share.trained - experts));
                let vocab = VocabBytes {
                    edge_bytes: edges[0] as f64 * mb as f64 * act_bytes,
                    copied_edge_bytes: edges[1] as f64 * mb as f64 * act_bytes,
                    gathered_whole_bytes: edges[2] as f64 * mb as f64 * act_bytes,
                    head: graph.losses.iter().any(|&l| held(l)),
                    tokens,
                    partial_gradient_bytes: partial,
                    recomputed_regions: share.recomputed_regions,
                };
                let layers = if p == 1 { busiest_layers } else { mine.iter().map(|c| c.blocks.len()).sum() };
                let stage =
                    ByteInputs { layers_on_rank: layers, regions_on_rank: share.regions, vocab: Some(vocab), ..inputs };
                for row in mesh_bytes(&mesh, world, DataParallel::Single, stage) {
                    match most.iter_mut().find(|m| m.dimension == row.dimension && m.collective == row.collective) {
                        Some(m) => m.bytes_per_rank = m.bytes_per_rank.max(row.bytes_per_rank),
                        None => most.push(row),
                    }
                }
            }
            inputs.gradient_bytes = gradient_bytes;
            if p == 1 && topology.strategy == DataParallel::Zero3 {
                // ZeRO-3 without a pipeline exchanges each unit's buffer of the whole tensor shard, padded to a
                // multiple of the data-parallel degree (in a pipeline, the busiest stage's gradients above).
                let (padded, root) = padded_units(&shard.local, d, ep > 1);
                inputs.gradient_bytes = 4.0 * padded;
                inputs.gathered_once_share = root / padded.max(1.0);
            }
            stage_tensor = Some(most.into_iter().filter(|b| b.dimension == MeshDim::Tensor).collect());
        }
    }
    let mut bytes = mesh_bytes(&mesh, world, topology.strategy, inputs);
    if let Some(tensor) = stage_tensor {
        // The tensor dimension's busiest stage, per collective.
        let rest = bytes.split_off(bytes.iter().position(|b| b.dimension != MeshDim::Tensor).unwrap_or(bytes.len()));
        bytes = tensor.into_iter().chain(rest).collect();
    }
    let passes = (m * setting.schedule.micro_batches().max(1) as usize) as f64;
    // The busiest pipeline stage's MoE layers (every layer without a pipeline).
    let stage_all_to_all =
        |r: usize| moe_price::all_to_all_bytes(graph, &holds(&chunks, p, r), mb as f64 * passes, passes, act_bytes);
    let all_to_all = if ep > 1 { (0..p).map(stage_all_to_all).fold(0.0, f64::max) } else { 0.0 };
    let replicas = (d / ep).max(1);
    let expert_reduce = parallel::exchange_bytes(Sharding::Replicated, replicas, busiest_expert_grads);
    if ep > 1 {
        bytes.push(DimensionBytes { dimension: MeshDim::Data, collective: "all-to-all", bytes_per_rank: all_to_all });
        if replicas > 1 {
            bytes.push(DimensionBytes {
                dimension: MeshDim::Data,
                collective: "expert all-reduce",
                bytes_per_rank: expert_reduce,
            });
        }
    }
    // Links: the tensor group inside a node; the pipeline and data dimensions over the topology's link.
    let intra = if profile.intra_node.as_ref().is_some_and(|l| l.kind == crate::hardware::wire::LinkKind::Nvlink) {
        trainbench_comm::Interconnect::Nvlink
    } else {
        trainbench_comm::Interconnect::Pcie
    };
    let tensor_link = comm::link(profile, intra)?;
    let outer_link = comm::link(profile, topology.interconnect)?;
    let seconds = |dim: MeshDim| -> f64 {
        let link = if dim == MeshDim::Tensor { tensor_link } else { outer_link };
        let sent: f64 = bytes.iter().filter(|b| b.dimension == dim).map(|b| b.bytes_per_rank).sum();
        if sent > 0.0 { sent / (link.bandwidth_gbs * 1e9) } else { 0.0 }
    };
    let latency = |dim: MeshDim, count: f64| {
        let link = if dim == MeshDim::Tensor { tensor_link } else { outer_link };
        count * link.latency_us * 1e-6
    };
    let ring = |n: usize| (n as f64 - 1.0).max(0.0);
    let tensor_s =
        seconds(MeshDim::Tensor) + latency(MeshDim::Tensor, 2.0 * busiest_regions as f64 * m as f64 * 2.0 * ring(t));
    let collectives = if sharding == Sharding::Zero3 { 3.0 } else { 2.0 };
    // Expert parallelism's all-to-alls: the share that crosses a link (balanced routing), inside a node when the
    // group fits in one; in the computation's path (each MoE layer waits for its tokens).
    let ep_link = if topology.devices_per_node % ep == 0 { tensor_link } else { outer_link };
    let ep_s = if ep > 1 {
        all_to_all * ring(ep) / ep as f64 / (ep_link.bandwidth_gbs * 1e9)
            + 4.0 * (moe_price::moe_layers(graph) as f64 * passes + 1.0) * ring(ep) * ep_link.latency_us * 1e-6
    } else {
        0.0
    };
    let data_s = if d > 1 {
        let sent: f64 = bytes
            .iter()
            .filter(|b| b.dimension == MeshDim::Data && b.collective != "all-to-all")
            .map(|b| b.bytes_per_rank)
            .sum();
        sent / (outer_link.bandwidth_gbs * 1e9) + latency(MeshDim::Data, collectives * ring(d))
    } else {
        0.0
    };
    let slot = stages.iter().map(|s| s.compute_s).fold(0.0, f64::max);
    let optimizer_s = base.phases.optimizer_s / (t * p) as f64;
    // A pipeline: its schedule replayed over the chunks' passes, each message a hop over the link (its bytes and
    // latency), so unequal chunks and slow hops lengthen the step as they do a run's.
    let hop_s = boundary / if mesh.sequence_parallel { t as f64 } else { 1.0 } / (outer_link.bandwidth_gbs * 1e9)
        + outer_link.latency_us * 1e-6;
    let replayed =
        replay_chunks(&mesh, &chunks, (base.phases.forward_s, base.phases.backward_s), a, &tensor_shares, hop_s)?;
    let span = replayed.as_ref().map_or(m as f64 * slot, |r| r.makespan_s);
    let compute = span + tensor_s + optimizer_s + ep_s;
    // Of it, the busiest stage's computation (priced as one rank's micro-batches); the rest is collectives.
    let stage_s = span + optimizer_s;
    let step = compute + data_s;
    let backward_share = base.phases.backward_s / fb_s.max(f64::MIN_POSITIVE);
    let overlapped = compute + (data_s - backward_share * m as f64 * slot).max(0.0);
    let capacity = profile.device.memory_gib * (1u64 << 30) as f64;
    let (max_stage, max_memory) =
        stages.iter().map(|s| (s.stage, s.peak_bytes)).fold((0, 0.0), |best, s| if s.1 > best.1 { s } else { best });
    let samples_per_s = if step > 0.0 { setting.batch as f64 / step } else { 0.0 };
    let peak = super::product_rates::mfu_peak(profile, setting.precision, &setting.numerics)
        .map(|(x, _)| x * 1e12)
        .filter(|x| *x > 0.0);
    Ok(MeshPrediction {
        mesh,
        data_parallel: d,
        world_size: world,
        microbatch_size: mb,
        step_time_s: step,
        interval: super::uncertainty::composed(step, &base.interval, stage_s, step - stage_s, &uncertainty),
        step_time_overlapped_s: overlapped,
        bubble: bubble(&mesh).map(|b| Bubble { fraction: replayed.as_ref().map_or(b.fraction, |r| r.bubble()), ..b }),
        bytes,
        stages,
        max_memory_per_rank_bytes: max_memory,
        max_memory_stage: max_stage,
        fits: max_memory <= capacity,
        items_per_s: samples_per_s * a.items_per_sample as f64,
        mfu: peak.map(|peak| mesh_mfu(a.model_flops.per_sample as f64, samples_per_s, world, peak)),
    })
}

/// MFU of a whole mesh: each sample's model FLOPs once, over every rank's peak.
pub fn mesh_mfu(model_flops_per_sample: f64, samples_per_s: f64, world: usize, peak_flop_s: f64) -> f64 {
    model_flops_per_sample * samples_per_s / (world.max(1) as f64 * peak_flop_s)
}

#[cfg(test)]
#[path = "mesh_tests.rs"]
mod tests;
