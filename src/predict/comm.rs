//! T_comm: the gradient (and weight) exchange of one step per strategy, from the volumes of
//! `docs/distributed.md`. S = gradient bytes, W workers, P parameter servers, B link bandwidth
//! (bytes/s, per direction), alpha the link's latency.
//!
//! - Ring all-reduce: T = 2(W-1) alpha + 2(W-1)/W x S / B.
//! - Parameter servers sharded by tensor: per direction T = alpha + max(S / B_worker, W x S / (P x B_server));
//!   push and pull make two directions. Over a network a machine's link is shared by its workers
//!   (B_worker = B / devices_per_node); servers sit on machines of their own (B_server = B).
//! - ZeRO-1/2: a reduce-scatter of the gradients and an all-gather of the weights, each (W-1) alpha +
//!   (W-1)/W x S / B: what a ring all-reduce costs. ZeRO-3 all-gathers again before the backward:
//!   T = 3(W-1) alpha + 3(W-1)/W x S / B (the root unit, gathered once, is counted as a block: an upper bound).
//! - One device (or strategy `single`): no exchange.
//! - What the step waits for of it ([`exposed`]): the engine's overlap with the backward pass.
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
}

/// What a step waits for of an exchange of `comm_s` seconds when the engine overlaps it with a backward pass of
/// `backward_s` (the last micro-batch's), as it does for all-reduce and ZeRO-1/2 with `topology.overlap`:
/// each bucket (whole tensors up to `topology.bucket_bytes`, the last layers first) is exchanged as soon as the
/// backward pass completes it, so what exceeds the backward pass waits, and never less than the bucket of the
/// first layers, which the backward pass completes last; ZeRO's step and all-gather (half of its exchange)
/// come after the backward pass. Otherwise (no overlap, ZeRO-3, parameter servers) all of it.
pub fn exposed(graph: &trainbench_graph::Graph, topology: &Topology, comm_s: f64, backward_s: f64) -> f64 {
    if !(topology.overlap && topology.strategy.can_overlap()) || comm_s <= 0.0 {
        return comm_s;
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

/// The exchange of `gradient_bytes` per step on `topology` over `profile`.
pub fn comm(profile: &HardwareFile, topology: &Topology, gradient_bytes: f64) -> Result<CommCost, PredictError> {
    let w = topology.world_size() as f64;
    let none = CommCost {
        time_s: 0.0,
        exposed_s: 0.0,
        bytes_per_worker: 0.0,
        link: "none".into(),
        formula: "no exchange".into(),
    };
    if w <= 1.0 {
        return Ok(none);
    }
    let s = gradient_bytes;
    Ok(match topology.strategy {
        DataParallel::Single => none,
        DataParallel::AllReduce => {
            let l = link(profile, topology.interconnect)?;
            let (b, alpha) = (l.bandwidth_gbs * 1e9, l.latency_us * 1e-6);
            let bytes = 2.0 * (w - 1.0) / w * s;
            let t = 2.0 * (w - 1.0) * alpha + bytes / b;
            CommCost {
                time_s: t,
                exposed_s: t,
                bytes_per_worker: bytes,
                link: l.name.clone(),
                formula: format!("ring all-reduce: 2(W-1) alpha + 2(W-1)/W S / B, W = {w}"),
            }
        }
        DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => {
            let l = link(profile, topology.interconnect)?;
            let (b, alpha) = (l.bandwidth_gbs * 1e9, l.latency_us * 1e-6);
            let passes = if topology.strategy == DataParallel::Zero3 { 3.0 } else { 2.0 };
            let bytes = passes * (w - 1.0) / w * s;
            let t = passes * (w - 1.0) * alpha + bytes / b;
            CommCost {
                time_s: t,
                exposed_s: t,
                bytes_per_worker: bytes,
                link: l.name.clone(),
                formula: format!(
                    "{}: reduce-scatter + {} all-gather(s), each (W-1) alpha + (W-1)/W S / B, W = {w}",
                    topology.strategy.name(),
                    passes - 1.0
                ),
            }
        }
        DataParallel::ParameterServer { servers } => {
            let l = link(profile, topology.interconnect)?;
            let (b, alpha) = (l.bandwidth_gbs * 1e9, l.latency_us * 1e-6);
            let p = servers.max(1) as f64;
            let shared = matches!(l.kind, LinkKind::Ethernet | LinkKind::Infiniband);
            let b_worker = if shared { b / topology.devices_per_node as f64 } else { b };
            let per_direction = alpha + (s / b_worker).max(w * s / (p * b));
            CommCost {
                time_s: 2.0 * per_direction,
                exposed_s: 2.0 * per_direction,
                bytes_per_worker: 2.0 * s,
                link: l.name.clone(),
                formula: format!(
                    "parameter servers: 2 x (alpha + max(S / B_worker, W S / (P B))), W = {w}, P = {p}{}",
                    if shared { format!(", B_worker = B / {}", topology.devices_per_node) } else { String::new() }
                ),
            }
        }
    })
}
