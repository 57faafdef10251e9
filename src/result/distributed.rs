//! The `distributed` section of a result: how a data-parallel run was spread (world, strategy, engine,
//! launcher, hosts), each rank's phase times, and the traffic and bandwidth of its gradient exchange.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_comm::{MeshCoords, MeshDim};
use trainbench_contract::PhaseTimes;

/// A data-parallel run's distribution and communication figures (absent for single-worker runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DistributedResult {
    /// Workers (the plan's world size).
    pub world_size: usize,
    /// `all-reduce`, `parameter-server`, `zero-1`, `zero-2` or `zero-3`.
    pub strategy: String,
    /// Parameter-server ranks (0 for all-reduce).
    pub parameter_servers: usize,
    /// The engine (`mpi`) and its library version.
    pub engine: String,
    /// The engine library's version string.
    pub engine_version: String,
    /// Who started the ranks: `trainbench` (through `mpirun`), `mpirun`, `srun`, ... (from the environment).
    pub launcher: String,
    /// Host name of every rank, in rank order (workers, then servers).
    pub hosts: Vec<String>,
    /// Mean phase times of each worker over the measured steps (the step time of the run is, per step, the
    /// slowest worker's).
    pub ranks: Vec<RankPhases>,
    /// Gradient bytes each worker contributes per step (S).
    pub gradient_bytes: u64,
    /// Bytes each worker sent per step: 2 (W-1)/W x S for a ring all-reduce, S for parameter servers (plus S
    /// received).
    pub bytes_sent_per_step: u64,
    /// Bytes each worker sent per step, by collective (absent in results written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_by_kind: Option<BytesByKind>,
    /// Gradient bytes over the median exchange time (GB/s, 1e9 bytes): the algorithm bandwidth.
    pub algorithm_bandwidth_gb_s: Option<f64>,
    /// All-reduce only: algorithm bandwidth x 2 (W-1)/W, what each link carried (comparable to the link's speed).
    pub bus_bandwidth_gb_s: Option<f64>,
    /// Median share of a step spent waiting for the exchange (PAI's T_comm / T_iter): with overlap, only the
    /// part the backward pass did not hide.
    pub comm_share: Option<f64>,
    /// Whether the exchange ran during the backward pass, bucket by bucket (absent in results written before
    /// it was recorded, which never overlapped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlapped: Option<bool>,
    /// Mean seconds per step rank 0 spent inside its collectives, hidden or not (every exchanged step); beside
    /// the `comm` phase (what the step waited for) it says how much the overlap hid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_total_s: Option<f64>,
    /// Digest of the trained weights on rank 0 after the last step (absent when the backend gives none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_digest: Option<String>,
    /// Whether every worker ended with the same weights (bit for bit); absent without digests. A tensor group's
    /// or an expert-parallel rank's digest is of the whole model, its split tensors gathered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_identical: Option<bool>,
    /// A pipeline-parallel run's schedule, bubble, traffic and memory per stage (absent without a pipeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<PipelineResult>,
    /// A run over a device mesh (tensor parallelism): the bytes per step along each mesh dimension by
    /// collective, the busiest rank's (absent for plain data parallelism).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mesh_bytes: Vec<MeshBytes>,
    /// Expert parallelism's communication and memory (absent without it). With it, `gradient_bytes` and the
    /// bytes above are the non-expert tensors' exchange over the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_parallel: Option<ExpertParallelResult>,
}

/// A pipeline-parallel run: the bubble measured (each stage's time blocked waiting for a peer) beside its
/// formula, the bytes sent between stages and what each stage held, with the most any stage held as the
/// headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineResult {
    /// Pipeline ranks (stages).
    pub stages: usize,
    /// `gpipe`, `1f1b` or `interleaved-1f1b`.
    pub schedule: String,
    /// Micro-batches per step.
    pub microbatches: usize,
    /// Model chunks per stage (1 unless interleaved).
    pub virtual_stages: usize,
    /// The measured bubble: the mean over stages of the share of a step each spent idle (absent without
    /// measured steps).
    pub bubble: Option<f64>,
    /// The bubble's formula, `(p - 1) / (v m + p - 1)`: equal chunks and instant messages.
    pub bubble_formula: f64,
    /// The bubble of this run's cut: its schedule replayed with each pass as long as its chunk's FLOPs and
    /// messages instant (`trainbench_comm::schedule::replay`). The formula's figure when the chunks are equal,
    /// above it by as much as they are not (a head heavier than a block); what is left between it and the
    /// measured bubble is the links and the runtime. Absent in results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bubble_replayed: Option<f64>,
    /// The formula with its numbers.
    pub formula: String,
    /// Bytes the busiest stage sent per step on the pipeline dimension (activations and their gradients).
    pub bytes_per_step: u64,
    /// The stage that held the most (weights, gradients, optimizer state and activations at their peak).
    pub max_memory_stage: usize,
    /// What it held, bytes: the headline memory of the run.
    pub max_memory_bytes: u64,
    /// Each stage's figures, in stage order.
    pub per_stage: Vec<PipelineStage>,
}

/// One pipeline stage's figures, means over the measured steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineStage {
    /// Its rank.
    pub rank: usize,
    /// Its stage.
    pub stage: usize,
    /// The model chunks it ran, in model order.
    pub chunks: Vec<usize>,
    /// Seconds per step blocked waiting for a peer.
    pub idle_s: f64,
    /// The share of a step this stage idles in the replay of [`PipelineResult::bubble_replayed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_replayed: Option<f64>,
    /// Seconds per step.
    pub step_s: f64,
    /// Bytes it sent per step.
    pub bytes_sent_per_step: u64,
    /// Micro-batches (chunk micro-batches when interleaved) whose activations it held at once, at most.
    pub microbatches_held: usize,
    /// Weights, gradients and optimizer state it held.
    pub memory: RankMemory,
    /// Activations it held at the peak of a step, bytes (absent where not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations: Option<u64>,
    /// Weights, gradients, optimizer state and activations, bytes.
    pub held_bytes: u64,
}

/// Bytes one rank sent per step along one mesh dimension by one kind of collective (ring accounting, as
/// [`BytesByKind`]), the busiest rank's; `predict` gives the same rows for the same mesh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeshBytes {
    /// Mesh dimension.
    pub dimension: MeshDim,
    /// `all-reduce`, `all-gather` or `reduce-scatter`.
    pub collective: String,
    /// Bytes per step.
    pub bytes_per_rank: u64,
}

/// An expert-parallel run's figures: its all-to-alls (the dispatch and the combine, forward and backward, and
/// the counts before them), the experts' gradient all-reduce over their replicas, and memory per rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpertParallelResult {
    /// Ranks each expert-parallel group shards the experts over.
    pub degree: usize,
    /// Bytes a rank passed to its all-to-alls per step, the mean over ranks (each rank's whole send buffers,
    /// fp32, its own block included; with balanced routing (degree - 1) / degree of it crosses a link). Without
    /// dropping, 4 x tokens per rank x top-k x d_model x 4 bytes per MoE layer, plus the counts.
    pub all_to_all_bytes_per_step: u64,
    /// Seconds per step inside all-to-all calls, the slowest rank's (waiting for peers included).
    pub all_to_all_s_per_step: f64,
    /// All-to-all calls per step per rank.
    pub all_to_all_calls_per_step: u64,
    /// Bytes of expert gradients a rank all-reduced per step over the ranks holding the same experts.
    pub expert_gradient_bytes_per_step: u64,
    /// The largest weights + gradients + optimizer state any rank held (bytes).
    pub max_rank_state_bytes: u64,
}

/// One worker's mean phase times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankPhases {
    /// Rank.
    pub rank: usize,
    /// Mean seconds per phase over the measured steps.
    pub mean: PhaseTimes,
    /// What the worker held (absent in results written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<RankMemory>,
    /// Where the rank sat in the device mesh (absent for plain data parallelism).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coords: Option<MeshCoords>,
}

/// Bytes a worker sent per step, by collective (ring accounting: an all-reduce sends 2 (W-1)/W of its buffer,
/// a reduce-scatter or an all-gather (W-1)/W).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BytesByKind {
    /// All-reduce (the all-reduce strategy's gradients).
    pub all_reduce: u64,
    /// Reduce-scatter (ZeRO's gradients).
    pub reduce_scatter: u64,
    /// All-gather (ZeRO's weights).
    pub all_gather: u64,
}

/// Bytes of the model state one worker held, measured as the bytes of the tensors and buffers it kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankMemory {
    /// Weights: the trained tensors resident between steps, and a sharded strategy's master shard.
    pub weights: u64,
    /// Gradients: the most held at once (a sharded strategy's gradient shard included).
    pub gradients: u64,
    /// Optimizer state (momentum, moments): all of it, or a sharded strategy's shard.
    pub optimizer_state: u64,
    /// CUDA: the caching allocator's peak over the measured steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_allocated: Option<u64>,
}
