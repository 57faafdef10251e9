//! T_comm: the gradient (and weight) exchange of one step per strategy, from the volumes of
//! `docs/distributed.md`. S = gradient bytes, W workers, P parameter servers, B link bandwidth
//! (bytes/s, per direction), alpha the link's latency.
//!
//! - Ring all-reduce: T = 2(W-1) alpha + 2(W-1)/W x S / B.
//! - Parameter servers sharded by tensor: per direction T = alpha + max(S / B_worker, W x S / (P x B_server));
//!   push and pull make two directions. Over a network a machine's link is shared by its workers
//!   (B_worker = B / devices_per_node); servers sit on machines of their own (B_server = B).
//! - ZeRO-1/2: a reduce-scatter of the gradients and an all-gather of the weights, each (W-1) alpha +
//!   (W-1)/W x S / B: what a ring all-reduce costs.
//! - ZeRO-3, unit by unit as the engine runs it (`trainbench_comm::sharded::units_by_block`): each of the n
//!   block units is gathered before its forward and again before its replay, and reduce-scattered after it, in
//!   every micro-batch; the root unit (S_root, every tensor outside the blocks) is reduce-scattered and gathered
//!   once per step: T = (3kn + 2)(W-1) alpha + (W-1)/W x (3k S_blocks + 2 S_root) / B for k micro-batches.
//! - One device (or strategy `single`): no exchange.
//! - What the step waits for of it ([`exposed`]): the engine's overlap with the computation, where it can hide
//!   anything ([`overlap_hides`]).
//!
//! Which link carries it is the spec's `topology.interconnect`, looked up in the profile: `pcie` is the
//! profile's PCIe intra-node link, else its PCIe host link (GPUs of one machine talk through the host's PCIe
//! switch), or, on a CPU machine, its shared-memory link; `nvlink` its NVLink intra-node link; `ethernet` and
//! `infiniband` its network of that kind. A profile without that link is refused, never guessed.

use serde::Serialize;

use super::error::PredictError;
use crate::hardware::wire::{HardwareFile, Link, LinkKind};
use trainbench_comm::{DataParallel, Interconnect, Topology};

/// Where and how gradients travel in one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommCost {
    /// Seconds per step of the collectives.
    pub time_s: f64,
    /// Of them, what the step waits for ([`exposed`]: all of it unless the plan overlaps the exchange with the
    /// backward pass).
    pub exposed_s: f64,
    /// Bytes each worker sends per step (and receives as much).
    pub bytes_per_worker: f64,
    /// The link used (`none` without exchange).
    pub link: String,
    /// The formula applied, for the reader.
    pub formula: String,
    /// ZeRO-3's collectives by when they run, for [`exposed`].
    #[serde(skip)]
    pub zero3: Option<Zero3Passes>,
}

/// ZeRO-3's exchange split by when the engine runs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Zero3Passes {
    /// Seconds of one pass over every block unit (one collective per block): the forward's gathers of one
    /// micro-batch; its backward makes two (the gathers for the replays and the reduce-scatters).
    pub blocks_s: f64,
    /// Seconds of one collective over the largest block unit: what the first block's gather (and the last
    /// block's reduce-scatter) leaves exposed even with prefetch.
    pub largest_block_s: f64,
    /// Seconds of the root unit's reduce-scatter and all-gather at the step's end.
    pub root_s: f64,
    /// Micro-batches per step.
    pub micro_batches: f64,
}

/// What a step waits for of the exchange `cost` when the engine overlaps it with the computation of one
/// micro-batch (`forward_s` and `backward_s`, the backward with its recomputation), as it does with
/// `topology.overlap`; otherwise (no overlap, parameter servers) all of it.
/// - All-reduce and ZeRO-1/2: each bucket (whole tensors up to `topology.bucket_bytes`, the last layers first)
///   is exchanged as soon as the last micro-batch's backward pass completes it, so what exceeds that backward
///   pass waits, and never less than the bucket of the first layers, which it completes last; ZeRO's step and
///   all-gather (half of its exchange) come after the backward pass.
/// - ZeRO-3: in each micro-batch, the next block's gather runs while a block computes, so the forward's
///   gathers wait for what exceeds the forward pass and never less than the first block's; the backward's
///   gathers and reduce-scatters for what exceeds the backward pass, never less than one block's (the last
///   reduce-scatter); the root unit's collectives at the step's end wait in full.
pub fn exposed(
    graph: &trainbench_graph::Graph,
    topology: &Topology,
    cost: &CommCost,
    forward_s: f64,
    backward_s: f64,
) -> f64 {
    let comm_s = cost.time_s;
    if !(topology.overlap && topology.strategy.can_overlap()) || comm_s <= 0.0 {
        return comm_s;
    }
    if let Some(z) = cost.zero3 {
        let forward = (z.blocks_s - forward_s).max(z.largest_block_s.min(z.blocks_s));
        let backward = (2.0 * z.blocks_s - backward_s).max(z.largest_block_s.min(z.blocks_s));
        return z.micro_batches * (forward + backward) + z.root_s;
    }
    let layout = trainbench_comm::Layout::of(graph);
    let buckets = trainbench_comm::sharded::units_by_size(&layout, topology.bucket_bytes, 1);
    let tail = match (buckets.first(), layout.total) {
        (Some(first), total) if total > 0 => first.len as f64 / total as f64,
        _ => 1.0,
    };
    let hideable = if topology.strategy.zero_stage().is_some() { comm_s / 2.0 } else { comm_s };
    (hideable - backward_s).max(hideable * tail) + (comm_s - hideable)
}

/// Whether overlapping the exchange with the computation can hide any of it on `profile`: not on a CPU whose
/// workers exchange through shared memory, where the collectives' copies and sums run on the cores the
/// computation uses (measured: `docs/measurements.md`, "ZeRO-3's prefetch on CPU ranks"). There the step pays
/// the whole exchange, as without overlap.
pub fn overlap_hides(profile: &HardwareFile, topology: &Topology) -> bool {
    let cpu = profile.device.kind == crate::hardware::wire::DeviceKind::Cpu;
    let shared = link(profile, topology.interconnect).is_ok_and(|l| l.kind == LinkKind::SharedMemory);
    !(cpu && shared)
}

/// The link of `profile` that `interconnect` names.
pub fn link<'p>(profile: &'p HardwareFile, interconnect: Interconnect) -> Result<&'p Link, PredictError> {
    let of = |l: &'p Option<Link>, kinds: &[LinkKind]| l.as_ref().filter(|l| kinds.contains(&l.kind));
    let found = match interconnect {
        Interconnect::Pcie => of(&profile.intra_node, &[LinkKind::Pcie, LinkKind::SharedMemory])
            .or_else(|| of(&profile.host_link, &[LinkKind::Pcie])),
        Interconnect::Nvlink => of(&profile.intra_node, &[LinkKind::Nvlink]),
        Interconnect::Ethernet => of(&profile.network, &[LinkKind::Ethernet]),
        Interconnect::Infiniband => of(&profile.network, &[LinkKind::Infiniband]),
    };
    found.ok_or_else(|| PredictError::NoLink {
        profile: profile.name.clone(),
        interconnect: format!("{interconnect:?}").to_ascii_lowercase(),
    })
}

/// The exchange of `gradient_bytes` per step of `micro_batches` on `topology` over `profile` (`graph`'s units
/// for ZeRO-3).
pub fn comm(
    profile: &HardwareFile,
    topology: &Topology,
    graph: &trainbench_graph::Graph,
    gradient_bytes: f64,
    micro_batches: f64,
) -> Result<CommCost, PredictError> {
    let w = topology.world_size() as f64;
    let none = CommCost {
        time_s: 0.0,
        exposed_s: 0.0,
        bytes_per_worker: 0.0,
        link: "none".into(),
        formula: "no exchange".into(),
        zero3: None,
    };
    // One worker, or `single`, exchanges nothing (and needs no link).
    if w <= 1.0 || topology.strategy == DataParallel::Single {
        return Ok(none);
    }
    let s = gradient_bytes;
    let l = link(profile, topology.interconnect)?;
    let (b, alpha) = (l.bandwidth_gbs * 1e9, l.latency_us * 1e-6);
    let (time_s, bytes, formula, zero3) = match topology.strategy {
        DataParallel::Single => return Ok(none),
        // ZeRO-1/2's reduce-scatter and all-gather move, and cost, what a ring all-reduce does.
        DataParallel::AllReduce | DataParallel::Zero1 | DataParallel::Zero2 => {
            let bytes = 2.0 * (w - 1.0) / w * s;
            let formula = if topology.strategy == DataParallel::AllReduce {
                format!("ring all-reduce: 2(W-1) alpha + 2(W-1)/W S / B, W = {w}")
            } else {
                format!(
                    "{}: reduce-scatter + all-gather, each (W-1) alpha + (W-1)/W S / B, W = {w}",
                    topology.strategy.name()
                )
            };
            (2.0 * (w - 1.0) * alpha + bytes / b, bytes, formula, None)
        }
        DataParallel::Zero3 => {
            let split = BlockSplit::of(graph, w as usize);
            let (s_blocks, s_root) = (s * split.blocks_share, s * (1.0 - split.blocks_share));
            let pass = |collectives: f64, bytes: f64| collectives * (w - 1.0) * alpha + (w - 1.0) / w * bytes / b;
            let k = micro_batches.max(1.0);
            let passes = Zero3Passes {
                blocks_s: pass(split.blocks as f64, s_blocks),
                largest_block_s: pass(1.0, s * split.largest_share),
                root_s: pass(2.0, 2.0 * s_root),
                micro_batches: k,
            };
            let formula = format!(
                "zero-3: (3kn + 2)(W-1) alpha + (W-1)/W (3k S_blocks + 2 S_root) / B, W = {w}, n = {} blocks, k = {k}",
                split.blocks
            );
            let bytes = (w - 1.0) / w * (3.0 * k * s_blocks + 2.0 * s_root);
            (3.0 * k * passes.blocks_s + passes.root_s, bytes, formula, Some(passes))
        }
        DataParallel::ParameterServer { servers } => {
            let p = servers.max(1) as f64;
            let shared = matches!(l.kind, LinkKind::Ethernet | LinkKind::Infiniband);
            let b_worker = if shared { b / topology.devices_per_node as f64 } else { b };
            let per_direction = alpha + (s / b_worker).max(w * s / (p * b));
            let formula = format!(
                "parameter servers: 2 x (alpha + max(S / B_worker, W S / (P B))), W = {w}, P = {p}{}",
                if shared { format!(", B_worker = B / {}", topology.devices_per_node) } else { String::new() }
            );
            (2.0 * per_direction, 2.0 * s, formula, None)
        }
    };
    Ok(CommCost { time_s, exposed_s: time_s, bytes_per_worker: bytes, link: l.name.clone(), formula, zero3 })
}

/// How ZeRO-3 cuts a model: its block units' share of the trained elements, and the largest one's.
struct BlockSplit {
    blocks: usize,
    blocks_share: f64,
    largest_share: f64,
}

impl BlockSplit {
    /// `graph`'s units over `workers` (a model the engine would refuse, or without blocks, is all root).
    fn of(graph: &trainbench_graph::Graph, workers: usize) -> Self {
        let layout = trainbench_comm::Layout::of(graph);
        let units = trainbench_comm::sharded::units_by_block(graph, &layout, workers).unwrap_or_default();
        let total = layout.total.max(1) as f64;
        let blocks: Vec<f64> = units.iter().filter(|u| u.graph_block.is_some()).map(|u| u.len as f64).collect();
        BlockSplit {
            blocks: blocks.len(),
            blocks_share: blocks.iter().sum::<f64>() / total,
            largest_share: blocks.iter().copied().fold(0.0, f64::max) / total,
        }
    }
}
