//! Expanding a [`ValidatedSpec`] into the runs it stands for: the product batch size x precision x topology x
//! repeat, each a fully resolved [`RunPlan`] with a stable id (`resnet50.b32.fp32.1x1.r0`) and seed.

use trainbench_comm::{DataParallel, Topology};
use trainbench_contract::{Budget, DeviceSelector, RunPlan};
use trainbench_graph::Precision;
use trainbench_graph::training::{Checkpointing, StepSchedule};

use crate::backend_registry::{self, Placement};
use crate::spec::rules::topology::{EffectiveTopology, effective_precisions, effective_topologies};
use crate::spec::validated::ValidatedSpec;
use crate::spec::wire::{BackendChoice, Strategy};

/// Choices from the command line (`--backend`, `--device`) that replace the spec's `topology.backend` and
/// `topology.device`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacementOverride {
    /// Backend instead of `topology.backend`.
    pub backend: Option<BackendChoice>,
    /// Device instead of `topology.device`.
    pub device: Option<DeviceSelector>,
}

/// Where a spec's runs go, decided once here: the backend (`auto` resolved for this build) and a device it
/// drives ([`backend_registry::place`]); every later stage reads the result from the plans.
pub fn placement(spec: &ValidatedSpec, over: PlacementOverride) -> Placement {
    let backend = over.backend.unwrap_or(spec.spec().topology.backend);
    backend_registry::place(backend, over.device.unwrap_or(spec.device()))
}

/// The runs of a spec where the spec puts them, in order: batch sizes outermost, then precisions, topologies
/// and repeats.
pub fn plan(spec: &ValidatedSpec) -> Vec<RunPlan> {
    plan_on(spec, placement(spec, PlacementOverride::default()))
}

/// The runs of a spec on a given placement, in the order of [`plan`].
pub fn plan_on(spec: &ValidatedSpec, placement: Placement) -> Vec<RunPlan> {
    let s = spec.spec();
    let topologies = effective_topologies(&s.topology, &s.sweep);
    let tokens = topology_tokens(&topologies);
    let budget = match s.run.time_budget_s {
        Some(seconds) => Budget::Seconds(seconds),
        None => Budget::Iterations(s.run.iterations),
    };
    let schedule = s.training.schedule();
    let mut out = Vec::new();
    for &batch_size in &s.sweep.batch_sizes {
        for (precision, _) in effective_precisions(&s.training, &s.sweep) {
            for (topology, token) in topologies.iter().zip(&tokens) {
                for repeat in 0..s.run.repeats {
                    let config =
                        format!("{}{}", config_id(&s.name, batch_size, precision, token), schedule_suffix(&schedule));
                    let run = RunPlan {
                        id: format!("{config}.r{repeat}"),
                        config,
                        batch_size,
                        precision,
                        device: placement.device,
                        topology: topology_of(topology, s.topology.bucket_mb, s.topology.overlap),
                        warmup: s.run.warmup,
                        budget,
                        repeat,
                        seed: s.training.seed.saturating_add(u64::from(repeat)),
                        optimizer: s.training.optimizer.clone(),
                        phase_timing: s.run.phase_timing,
                        timeout_s: s.run.timeout_s,
                        cpu_threads: s.run.cpu_threads,
                        target: s.training.target.as_ref().map(|t| t.plan()),
                        numerics: s.training.numerics(),
                        schedule,
                    };
                    out.push(run);
                }
            }
        }
    }
    out
}

/// The planned topology of a spec's effective topology: the spec's strategy with its server ranks.
fn topology_of(t: &EffectiveTopology, bucket_mb: Option<f64>, overlap: Option<bool>) -> Topology {
    let strategy = match t.strategy {
        Strategy::Single => DataParallel::Single,
        Strategy::AllReduce => DataParallel::AllReduce,
        Strategy::ParameterServer => DataParallel::ParameterServer { servers: t.parameter_servers.max(1) },
        Strategy::Zero1 => DataParallel::Zero1,
        Strategy::Zero2 => DataParallel::Zero2,
        Strategy::Zero3 | Strategy::Fsdp => DataParallel::Zero3,
    };
    Topology {
        strategy,
        nodes: t.nodes.max(1),
        devices_per_node: t.devices_per_node.max(1),
        interconnect: t.interconnect,
        bucket_bytes: bucket_mb.map_or(trainbench_comm::exchange::BUCKET_BYTES, |mb| (mb * 1024.0 * 1024.0) as u64),
        overlap: overlap.unwrap_or(true) && strategy.can_overlap(),
    }
}

/// `<name>.b<batch>.<precision>.<topology>`: the configuration, which each repeat's run id extends with
/// `.r<repeat>`.
fn config_id(name: &str, batch: usize, precision: Precision, topology: &str) -> String {
    format!("{name}.b{batch}.{}.{topology}", precision.as_str())
}

/// What a non-default step schedule adds to the configuration id: `.ckpt-full` or `.ckpt-every<n>` with
/// checkpointing, `.ga<k>` with accumulation; nothing for the plain schedule, so plain ids never change.
fn schedule_suffix(schedule: &StepSchedule) -> String {
    let mut out = String::new();
    match schedule.checkpointing {
        Checkpointing::None => {}
        Checkpointing::Full => out.push_str(".ckpt-full"),
        Checkpointing::EveryN { n } => out.push_str(&format!(".ckpt-every{n}")),
    }
    if schedule.micro_batches() > 1 {
        out.push_str(&format!(".ga{}", schedule.micro_batches()));
    }
    out
}

/// `NxM` per topology; when two topologies share a shape, their strategy and interconnect are appended
/// (`2x4-ps-ethernet`) so ids stay unique.
fn topology_tokens(topologies: &[EffectiveTopology]) -> Vec<String> {
    topologies
        .iter()
        .map(|t| {
            let shape = format!("{}x{}", t.nodes, t.devices_per_node);
            let shared =
                topologies.iter().filter(|o| o.nodes == t.nodes && o.devices_per_node == t.devices_per_node).count()
                    > 1;
            let servers = topologies
                .iter()
                .any(|o| o.strategy == Strategy::ParameterServer && o.parameter_servers != t.parameter_servers);
            if shared && t.strategy == Strategy::ParameterServer && servers {
                let (s, i) = (strategy_code(t.strategy), t.interconnect.name());
                format!("{shape}-{s}{}-{i}", t.parameter_servers)
            } else if shared {
                format!("{shape}-{}-{}", strategy_code(t.strategy), t.interconnect.name())
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
        Strategy::Zero1 => "z1",
        Strategy::Zero2 => "z2",
        Strategy::Zero3 | Strategy::Fsdp => "z3",
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
