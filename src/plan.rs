//! Expanding a [`ValidatedSpec`] into the runs it stands for: the product batch size x precision x topology x
//! repeat, each a fully resolved [`RunPlan`] with a stable id (`resnet50.b32.fp32.1x1.r0`) and seed.
//!
//! A run id says what differs between two runs of one spec: the batch size, the precision, the topology and,
//! with more than one worker, the strategy and every exchange setting that is not the default (`1x2-z2`,
//! `2x4-ps2-ethernet`, `1x2-ar-bucket50mb-no-overlap`), then the step schedule. [`config_name`] is that rule;
//! the configuration's full identity is [`crate::result::identity::ConfigurationIdentity`].

use trainbench_comm::{DataParallel, Interconnect, Topology};
use trainbench_contract::{BackendKind, Budget, DeviceSelector, RunPlan};
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
    let topologies: Vec<Topology> = effective_topologies(&s.topology, &s.sweep)
        .iter()
        .map(|t| topology_of(t, s.topology.bucket_mb, s.topology.overlap))
        .collect();
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
                        topology: *topology,
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
                        pipeline_layers: if topology.mesh.pipeline_parallel > 1 {
                            s.topology.pipeline_layers.clone().unwrap_or_default()
                        } else {
                            Vec::new()
                        },
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
        // Expert parallelism's all-to-alls run inside the backward pass: its exchange does not overlap by default
        // (and an explicit `overlap = true` is refused by the spec rules).
        overlap: overlap.unwrap_or(t.mesh.expert_parallel <= 1) && strategy.can_overlap(),
        mesh: t.mesh,
    }
}

/// `<name>.b<batch>.<precision>.<topology>`: the configuration, which each repeat's run id extends with
/// `.r<repeat>`.
fn config_id(name: &str, batch: usize, precision: Precision, topology: &str) -> String {
    format!("{name}.b{batch}.{}.{topology}", precision.as_str())
}

/// The name of a configuration: `<spec>.b<batch>.<precision>.<topology token>` and the step schedule's suffix
/// (`llm-smoke-gpt.b4.fp32.1x2-z2.ckpt-full`); each repeat's run id adds `.r<repeat>`. Two topologies of one
/// sweep that only differ in what one worker does not use (its link) get their link appended by the planner.
pub fn config_name(
    spec: &str,
    batch: usize,
    precision: Precision,
    topology: &Topology,
    schedule: &StepSchedule,
) -> String {
    format!("{}{}", config_id(spec, batch, precision, &topology_token(topology)), schedule_suffix(schedule))
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

/// A topology in a run id: `NxM` (machines x workers); with more than one worker (or a strategy other than
/// `single`) the strategy (`-ar`, `-z2`, `-ps` with one server rank, `-ps2` with two), then whatever of the
/// exchange is not the default: the interconnect when not PCIe (`-nvlink`), the bucket size of a strategy that
/// buckets when not 25 MiB (`-bucket50mb`, `-bucket0.01mb`), `-no-overlap` for a strategy that could overlap
/// (except with expert parallelism, where not overlapping is the default);
/// last the device mesh, when there is one ([`mesh_token`]).
pub fn topology_token(t: &Topology) -> String {
    let mut out = format!("{}x{}", t.nodes, t.devices_per_node);
    if t.world_size() <= 1 && t.strategy.is_single() {
        return out;
    }
    out.push('-');
    out.push_str(&strategy_code(t.strategy));
    if t.world_size() <= 1 {
        return out;
    }
    if t.interconnect != Interconnect::Pcie {
        out.push('-');
        out.push_str(t.interconnect.name());
    }
    if matches!(t.strategy, DataParallel::AllReduce | DataParallel::Zero1 | DataParallel::Zero2)
        && t.bucket_bytes != trainbench_comm::exchange::BUCKET_BYTES
    {
        out.push_str(&format!("-bucket{}mb", mib(t.bucket_bytes)));
    }
    if t.strategy.can_overlap() && !t.overlap && t.mesh.expert_parallel <= 1 {
        out.push_str("-no-overlap");
    }
    out.push_str(&mesh_token(&t.mesh));
    out
}

/// The device mesh in a run id: nothing without one; else `-tp<t>` (and `-sp`) with tensor parallelism, and
/// `-pp<p>-<schedule>-mb<m>` (with `-v<v>` interleaved) with a pipeline (`-tp8`, `-tp2-sp-pp4-1f1b-mb8`), then
/// `-ep<e>` with expert parallelism.
pub(crate) fn mesh_token(m: &trainbench_comm::Mesh) -> String {
    let mut out = String::new();
    if m.tensor_parallel > 1 {
        out.push_str(&format!("-tp{}", m.tensor_parallel));
        if m.sequence_parallel {
            out.push_str("-sp");
        }
    }
    if m.pipeline_parallel > 1 {
        out.push_str(&format!("-pp{}-{}-mb{}", m.pipeline_parallel, m.pipeline_schedule.name(), m.microbatches));
        if m.virtual_stages > 1 {
            out.push_str(&format!("-v{}", m.virtual_stages));
        }
    }
    if m.expert_parallel > 1 {
        out.push_str(&format!("-ep{}", m.expert_parallel));
    }
    out
}

/// Bytes as MiB with at most three decimals, trailing zeros dropped (`50`, `0.01`).
fn mib(bytes: u64) -> String {
    let text = format!("{:.3}", bytes as f64 / (1u64 << 20) as f64);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The token of each planned topology ([`topology_token`]); where two of a sweep would still share one (one
/// worker on different links), each of them gets its strategy and link appended (`1x1-single-nvlink`) so ids
/// stay unique.
fn topology_tokens(topologies: &[Topology]) -> Vec<String> {
    let tokens: Vec<String> = topologies.iter().map(topology_token).collect();
    topologies
        .iter()
        .zip(&tokens)
        .map(|(t, token)| {
            if tokens.iter().filter(|o| *o == token).count() < 2 {
                return token.clone();
            }
            let strategy = if t.world_size() <= 1 && t.strategy.is_single() {
                format!("-{}", strategy_code(t.strategy))
            } else {
                String::new()
            };
            format!("{token}{strategy}-{}", t.interconnect.name())
        })
        .collect()
}

/// Why `backend` cannot train this topology's mesh: tensor parallelism trains on the tch backend only (and
/// without an overlapped data-parallel exchange beside it). `run` refuses these before anything starts rather
/// than train them as plain data parallelism; a pipeline (alone or with tensor parallelism inside its stages)
/// is checked by [`unrunnable_plan`].
pub fn unrunnable_mesh(t: &Topology, backend: BackendKind) -> Option<String> {
    let m = &t.mesh;
    if !m.splits_model() {
        return None;
    }
    if m.pipeline_parallel > 1 {
        // What the backend's pipeline runtime refuses (tensor parallelism inside the stages included) is in
        // [`unrunnable_plan`].
        return None;
    }
    if backend != BackendKind::Tch {
        return Some(format!(
            "tensor_parallel {} trains on the tch backend only; the {} backend has no tensor-parallel layers",
            m.tensor_parallel,
            backend.name()
        ));
    }
    // The tensor group communicates inside the backward pass; a data-parallel exchange on a thread beside
    // it would call the engine from two threads at once, which MPI_THREAD_SERIALIZED forbids.
    let overlapped = t.data_parallel() > 1 && t.overlap && t.strategy.can_overlap();
    overlapped.then(|| {
        format!(
            "tensor_parallel {} with {} data-parallel ranks cannot overlap the {} exchange with the backward \
             pass yet (the tensor group's collectives run in it); set `topology.overlap = false`",
            m.tensor_parallel,
            t.data_parallel(),
            t.strategy.name()
        )
    })
}

/// Why `backend` cannot train `plan` for its mesh: [`unrunnable_mesh`], then, for a pipeline, what
/// the tch backend's pipeline runtime refuses (`lowering::pipeline::pipeline_refusal`) or, on another backend,
/// that it runs no pipeline stages. `run` refuses these before anything starts.
pub fn unrunnable_plan(plan: &RunPlan, backend: BackendKind) -> Option<String> {
    if let Some(why) = unrunnable_mesh(&plan.topology, backend) {
        return Some(why);
    }
    if plan.topology.mesh.pipeline_parallel <= 1 {
        return None;
    }
    match backend {
        BackendKind::Tch => trainbench_contract::lowering::pipeline::pipeline_refusal(plan),
        BackendKind::Wgpu | BackendKind::Mock => {
            Some(format!("the {} backend runs no pipeline stages; pipelines run on the tch backend", backend.name()))
        }
    }
}

/// The strategy in a run id: `single`, `ar`, `z1`, `z2`, `z3`, `ps` (one server rank) or `ps<n>`.
fn strategy_code(s: DataParallel) -> String {
    match s {
        DataParallel::Single => "single".into(),
        DataParallel::AllReduce => "ar".into(),
        DataParallel::ParameterServer { servers: 1 } => "ps".into(),
        DataParallel::ParameterServer { servers } => format!("ps{servers}"),
        DataParallel::Zero1 => "z1".into(),
        DataParallel::Zero2 => "z2".into(),
        DataParallel::Zero3 => "z3".into(),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
