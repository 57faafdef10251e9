//! What-if analysis in the style of PAI's: re-predict one configuration with one thing changed and report
//! the speed-up over the baseline. Changes tried: the strategy (PS/worker <-> all-reduce on the same link,
//! all-reduce over NVLink inside one machine when the profile has NVLink, one parameter server per worker),
//! each alternative link the profile lists for the role the exchange (or the input copy) uses, each other
//! device profile given, and each other precision the device has a peak for. Every row prices the one analysis
//! of the graph ([`AnalyzedGraph`]) with the profile's stored coefficients: nothing is analysed or fitted again
//! per row (another device is priced by its datasheet figures).

use serde::Serialize;
use trainbench_graph::Precision;

use super::terms::Terms;
use super::{AnalyzedGraph, Prediction, Setting, predict_analyzed};
use crate::hardware::wire::{HardwareFile, LinkKind};
use trainbench_comm::{DataParallel, Interconnect};

/// One row of the what-if table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    /// What changed (`strategy: all-reduce over NVLink (1 x 8)`).
    pub change: String,
    /// Predicted serial step time, seconds; `None` when the change cannot be predicted.
    pub step_time_s: Option<f64>,
    /// Baseline step time over this one (> 1: faster).
    pub speedup: Option<f64>,
    /// T_comm share of the step.
    pub comm_share: Option<f64>,
    /// Why it could not be predicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn row(change: String, base: &Prediction, p: Result<Prediction, super::error::PredictError>) -> WhatIf {
    match p {
        Ok(p) => WhatIf {
            change,
            step_time_s: Some(p.step_time_s),
            speedup: Some(base.step_time_s / p.step_time_s),
            comm_share: Some(p.shares.comm),
            error: None,
        },
        Err(e) => WhatIf { change, step_time_s: None, speedup: None, comm_share: None, error: Some(e.to_string()) },
    }
}

fn interconnect_of(kind: LinkKind) -> Interconnect {
    match kind {
        LinkKind::Pcie | LinkKind::SharedMemory => Interconnect::Pcie,
        LinkKind::Nvlink => Interconnect::Nvlink,
        LinkKind::Ethernet => Interconnect::Ethernet,
        LinkKind::Infiniband => Interconnect::Infiniband,
    }
}

/// The what-if rows for the analysed graph under `setting` on `profile` (baseline `base`), trying `devices` as
/// other devices; every row with the terms `terms` leaves on, as the baseline.
pub fn what_if(
    graph: &AnalyzedGraph<'_>,
    setting: &Setting,
    profile: &HardwareFile,
    base: &Prediction,
    devices: &[HardwareFile],
    terms: &Terms,
) -> Vec<WhatIf> {
    let predict = |graph: &AnalyzedGraph<'_>, s: &Setting, p: &HardwareFile| predict_analyzed(graph, s, p, terms);
    let mut rows = Vec::new();
    let world = setting.world();
    let with = |f: &dyn Fn(&mut Setting)| {
        let mut s = setting.clone();
        f(&mut s);
        s
    };
    // Strategy.
    if world > 1 {
        match setting.topology.strategy {
            DataParallel::ParameterServer { servers } => {
                let s = with(&|s| s.topology.strategy = DataParallel::AllReduce);
                rows.push(row("strategy: all-reduce on the same link".into(), base, predict(graph, &s, profile)));
                if servers < world {
                    let s = with(&|s| s.topology.strategy = DataParallel::ParameterServer { servers: world });
                    let change = format!("parameter servers: {world} (one per worker) instead of {servers}");
                    rows.push(row(change, base, predict(graph, &s, profile)));
                }
            }
            DataParallel::AllReduce => {
                let s = with(&|s| s.topology.strategy = DataParallel::ParameterServer { servers: 1 });
                let change =
                    format!("strategy: parameter servers (P = {}) on the same link", s.topology.strategy.servers());
                rows.push(row(change, base, predict(graph, &s, profile)));
                let s = with(&|s| s.topology.strategy = DataParallel::Zero3);
                rows.push(row("strategy: zero-3 (FSDP) on the same link".into(), base, predict(graph, &s, profile)));
            }
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => {
                let s = with(&|s| s.topology.strategy = DataParallel::AllReduce);
                rows.push(row("strategy: all-reduce on the same link".into(), base, predict(graph, &s, profile)));
            }
            DataParallel::Single => {}
        }
        let on_nvlink = setting.topology.strategy == DataParallel::AllReduce
            && setting.topology.nodes == 1
            && setting.topology.interconnect == Interconnect::Nvlink;
        if profile.intra_node.as_ref().is_some_and(|l| l.kind == LinkKind::Nvlink) && !on_nvlink {
            let s = with(&|s| {
                s.topology.strategy = DataParallel::AllReduce;
                s.topology.nodes = 1;
                s.topology.devices_per_node = world;
                s.topology.interconnect = Interconnect::Nvlink;
            });
            let change = format!("strategy: all-reduce over NVLink in one machine (1 x {world})");
            rows.push(row(change, base, predict(graph, &s, profile)));
        }
    }
    // Links: alternatives for the role the exchange uses, and for the input copy.
    if world > 1 && !setting.topology.strategy.is_single() {
        let network = matches!(setting.topology.interconnect, Interconnect::Ethernet | Interconnect::Infiniband);
        let alternatives = if network { &profile.alternatives.network } else { &profile.alternatives.intra_node };
        for alt in alternatives {
            let mut p = profile.clone();
            if network {
                p.network = Some(alt.clone());
            } else {
                p.intra_node = Some(alt.clone());
            }
            let s = with(&|s| s.topology.interconnect = interconnect_of(alt.kind));
            let change = format!(
                "{}: {} ({} GB/s)",
                if network { "network" } else { "intra-node link" },
                alt.name,
                alt.bandwidth_gbs
            );
            rows.push(row(change, base, predict(graph, &s, &p)));
        }
    }
    for alt in &profile.alternatives.host_link {
        let mut p = profile.clone();
        p.host_link = Some(alt.clone());
        let change = format!("host link: {} ({} GB/s)", alt.name, alt.bandwidth_gbs);
        rows.push(row(change, base, predict(graph, setting, &p)));
    }
    // Devices: another device's compute and memory, this machine's links.
    for d in devices.iter().filter(|d| d.device != profile.device) {
        let mut p = profile.clone();
        p.device = d.device.clone();
        p.calibration = None;
        p.fitted = None;
        let change = format!("device: {} ({})", d.device.name, d.name);
        rows.push(row(change, base, predict(graph, setting, &p)));
    }
    // Precision.
    for precision in [Precision::Fp32, Precision::Fp16, Precision::Bf16] {
        if profile.device.peak_tflops.of(precision).is_some() && precision != setting.precision {
            let s = with(&|s| s.precision = precision);
            rows.push(row(format!("precision: {}", precision.as_str()), base, predict(graph, &s, profile)));
        }
    }
    rows
}
