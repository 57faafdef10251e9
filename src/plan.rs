//! Expanding a [`ValidatedSpec`] into the runs it stands for: the product batch size x precision x topology x
//! repeat, each a fully resolved [`RunPlan`] with a stable id (`resnet50.b32.fp32.1x1.r0`) and seed.

use serde::Serialize;
use trainbench_workload::{Budget, Precision, RunPlan};

use crate::spec::ValidatedSpec;
use crate::spec::rules::{effective_precisions, effective_topologies};
use crate::spec::wire::{BackendChoice, Interconnect, Strategy};

/// A planned run together with the topology details [`RunPlan`] does not carry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedRun {
    /// What the backend is asked to run.
    pub run: RunPlan,
    /// Machines.
    pub nodes: usize,
    /// Devices per machine.
    pub devices_per_node: usize,
    /// Parallelism strategy.
    pub strategy: Strategy,
    /// Link between devices.
    pub interconnect: Interconnect,
    /// Backend as chosen in the spec (`auto` is resolved by the runner, which knows what is built in).
    pub backend: BackendChoice,
}

/// The runs of a spec, in order: batch sizes outermost, then precisions, topologies and repeats.
pub fn plan(spec: &ValidatedSpec) -> Vec<RunPlan> {
    expand(spec).into_iter().map(|p| p.run).collect()
}

/// The runs of a spec with their topology details, in the order of [`plan`].
pub fn expand(spec: &ValidatedSpec) -> Vec<PlannedRun> {
    let s = spec.spec();
    let topologies = effective_topologies(&s.topology, &s.sweep);
    let tokens = topology_tokens(&topologies);
    let budget = match s.run.time_budget_s {
        Some(seconds) => Budget::Seconds(seconds),
        None => Budget::Iterations(s.run.iterations),
    };
    let mut out = Vec::new();
    for &batch_size in &s.sweep.batch_sizes {
        for (precision, _) in effective_precisions(&s.training, &s.sweep) {
            for (topology, token) in topologies.iter().zip(&tokens) {
                for repeat in 0..s.run.repeats {
                    let run = RunPlan {
                        id: run_id(&s.name, batch_size, precision, token, repeat),
                        batch_size,
                        precision,
                        device: s.topology.device.clone(),
                        world_size: topology.world_size().unwrap_or(1),
                        warmup: s.run.warmup,
                        budget,
                        repeat,
                        seed: s.training.seed.saturating_add(u64::from(repeat)),
                        optimizer: s.training.optimizer.clone(),
                        phase_timing: s.run.phase_timing,
                        timeout_s: s.run.timeout_s,
                    };
                    out.push(PlannedRun {
                        run,
                        nodes: topology.nodes,
                        devices_per_node: topology.devices_per_node,
                        strategy: topology.strategy,
                        interconnect: topology.interconnect,
                        backend: s.topology.backend,
                    });
                }
            }
        }
    }
    out
}

/// `<name>.b<batch>.<precision>.<topology>.r<repeat>`.
fn run_id(name: &str, batch: usize, precision: Precision, topology: &str, repeat: u32) -> String {
    format!("{name}.b{batch}.{}.{topology}.r{repeat}", precision.as_str())
}

/// `NxM` per topology; when two topologies share a shape, their strategy and interconnect are appended
/// (`2x4-ps-ethernet`) so ids stay unique.
fn topology_tokens(topologies: &[crate::spec::rules::EffectiveTopology]) -> Vec<String> {
    topologies
        .iter()
        .map(|t| {
            let shape = format!("{}x{}", t.nodes, t.devices_per_node);
            let shared =
                topologies.iter().filter(|o| o.nodes == t.nodes && o.devices_per_node == t.devices_per_node).count()
                    > 1;
            if shared {
                format!("{shape}-{}-{}", strategy_code(t.strategy), interconnect_code(t.interconnect))
            } else {
                shape
            }
        })
        .collect()
}

fn strategy_code(s: Strategy) -> &'static str {
    match s {
        Strategy::Single => "single",
        Strategy::AllReduce => "ar",
        Strategy::ParameterServer => "ps",
    }
}

fn interconnect_code(i: Interconnect) -> &'static str {
    match i {
        Interconnect::Pcie => "pcie",
        Interconnect::Nvlink => "nvlink",
        Interconnect::Ethernet => "ethernet",
        Interconnect::Infiniband => "infiniband",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::spec::path::FieldPath;
    use crate::spec::rules::EffectiveTopology;

    fn topo(nodes: usize, devices: usize, strategy: Strategy, interconnect: Interconnect) -> EffectiveTopology {
        EffectiveTopology { path: FieldPath::root(), nodes, devices_per_node: devices, strategy, interconnect }
    }

    #[test]
    fn ids_follow_the_pattern() {
        assert_eq!(run_id("resnet50", 32, Precision::Fp32, "1x1", 0), "resnet50.b32.fp32.1x1.r0");
    }

    #[test]
    fn shared_shapes_get_distinct_tokens() {
        let ts = [
            topo(2, 4, Strategy::ParameterServer, Interconnect::Ethernet),
            topo(2, 4, Strategy::AllReduce, Interconnect::Infiniband),
            topo(1, 8, Strategy::AllReduce, Interconnect::Nvlink),
        ];
        assert_eq!(topology_tokens(&ts), ["2x4-ps-ethernet", "2x4-ar-infiniband", "1x8"]);
    }
}
