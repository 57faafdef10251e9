//! Expanding a [`ValidatedSpec`] into the runs it stands for: the product batch size x precision x topology x
//! repeat, each a fully resolved [`RunPlan`] with a stable id (`resnet50.b32.fp32.1x1.r0`) and seed.
//!
//! A run id says what differs between two runs of one spec: the batch size, the precision, the topology and,
//! with more than one worker, the strategy and every exchange setting that is not the default (`1x2-z2`,
//! `2x4-ps2-ethernet`, `1x2-ar-bucket50mb-no-overlap`), then the step schedule. [`config_name`] is that rule;
//! the configuration's full identity is [`crate::result::identity::ConfigurationIdentity`].

use trainbench_comm::{DataParallel, Interconnect, Topology};
use trainbench_contract::{Budget, DeviceSelector, RunPlan};
use trainbench_graph::Precision;
use trainbench_graph::training::{Checkpointing, StepSchedule};

use crate::backend_registry::{self, Placement};
use crate::spec::ValidatedSpec;
use crate::spec::rules::{EffectiveTopology, effective_precisions, effective_topologies};
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
/// buckets when not 25 MiB (`-bucket50mb`, `-bucket0.01mb`), `-no-overlap` for a strategy that could overlap.
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
    if t.strategy.can_overlap() && !t.overlap {
        out.push_str("-no-overlap");
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn topo(nodes: usize, devices: usize, strategy: DataParallel, interconnect: Interconnect) -> Topology {
        Topology { nodes, devices_per_node: devices, interconnect, ..Topology::on_one_node(strategy, 1) }
    }

    fn validated(text: &str) -> ValidatedSpec {
        let v = crate::spec::SpecValidator::new().unwrap();
        let checked = v.check_bytes("t.toml", text.as_bytes(), None, &crate::spec::Overrides::none());
        checked.spec.unwrap_or_else(|| panic!("{}", crate::spec::diagnostics::render_text(&checked.diagnostics)))
    }

    const SPEC: &str = r#"
version = 1
name = "p"
[model]
family = "mlp"
inputs = 8
hidden = [8]
classes = 2
[training]
seed = 100
[sweep]
batch_sizes = [8, 16]
precisions = ["fp32", "bf16"]
[[sweep.topologies]]
devices_per_node = 1
strategy = "single"
[[sweep.topologies]]
devices_per_node = 2
strategy = "all-reduce"
[run]
warmup = 1
iterations = 3
repeats = 3
"#;

    #[test]
    fn expands_the_full_product_in_order() {
        let runs = plan(&validated(SPEC));
        assert_eq!(runs.len(), 2 * 2 * 2 * 3);
        assert_eq!(runs[0].id, "p.b8.fp32.1x1.r0");
        assert_eq!(runs[3].id, "p.b8.fp32.1x2-ar.r0");
        assert_eq!(runs[6].id, "p.b8.bf16.1x1.r0");
        assert_eq!(runs[12].id, "p.b16.fp32.1x1.r0");
        assert_eq!(runs.last().unwrap().id, "p.b16.bf16.1x2-ar.r2");
        let ids: std::collections::HashSet<_> = runs.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids.len(), runs.len());
    }

    #[test]
    fn seeds_budget_and_topology_are_resolved() {
        let runs = plan(&validated(SPEC));
        assert_eq!(runs.iter().take(3).map(|r| r.seed).collect::<Vec<_>>(), [100, 101, 102]);
        assert!(runs.iter().all(|r| r.budget == Budget::Iterations(3) && r.warmup == 1));
        assert_eq!(runs[3].topology, Topology::on_one_node(DataParallel::AllReduce, 2));
        assert_eq!(runs[0].device, DeviceSelector::Cpu);
        let timed = validated(&SPEC.replace("iterations = 3", "time_budget_s = 2.5"));
        assert!(plan(&timed).iter().all(|r| r.budget == Budget::Seconds(2.5)));
    }

    #[test]
    fn defaults_give_one_run() {
        let runs = plan(&validated("version = 1\nname = \"d\"\n[model]\nfamily = \"mlp\"\n"));
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].id, "d.b32.fp32.1x1.r0");
        assert_eq!(runs[0].seed, 42);
    }

    #[test]
    fn ids_follow_the_pattern_and_repeats_share_their_configuration() {
        assert_eq!(config_id("resnet50", 32, Precision::Fp32, "1x1"), "resnet50.b32.fp32.1x1");
        let runs = plan(&validated("version = 1\nname = \"d\"\n[model]\nfamily = \"mlp\"\n[run]\nrepeats = 2\n"));
        let ids: Vec<(&str, &str)> = runs.iter().map(|r| (r.id.as_str(), r.config.as_str())).collect();
        assert_eq!(ids, [("d.b32.fp32.1x1.r0", "d.b32.fp32.1x1"), ("d.b32.fp32.1x1.r1", "d.b32.fp32.1x1")]);
    }

    #[test]
    fn a_step_schedule_is_planned_and_named_only_when_not_plain() {
        let base = "version = 1\nname = \"g\"\n[model]\nfamily = \"gpt\"\nlayers = 2\nd_model = 32\nheads = 2\nvocab = 64\nseq_len = 8\n[training]\n";
        let runs = plan(&validated(&format!("{base}grad_accumulation = 4\n")));
        assert_eq!(runs[0].id, "g.b32.fp32.1x1.ga4.r0");
        assert_eq!(runs[0].schedule.grad_accumulation, 4);
        let runs = plan(&validated(&format!("{base}activation_checkpointing = \"full\"\n")));
        assert_eq!(runs[0].config, "g.b32.fp32.1x1.ckpt-full");
        assert_eq!(runs[0].schedule.checkpointing, Checkpointing::Full);
        let text =
            format!("{base}activation_checkpointing = \"every_n\"\ncheckpoint_every = 2\ngrad_accumulation = 2\n");
        let runs = plan(&validated(&text));
        assert_eq!(runs[0].config, "g.b32.fp32.1x1.ckpt-every2.ga2");
        assert_eq!(
            runs[0].schedule,
            StepSchedule { checkpointing: Checkpointing::EveryN { n: 2 }, grad_accumulation: 2 }
        );
        assert!(plan(&validated(&format!("{base}grad_accumulation = 1\n")))[0].schedule.is_default());
    }

    #[test]
    fn shared_shapes_get_distinct_tokens() {
        let ts = [
            topo(2, 4, DataParallel::ParameterServer { servers: 1 }, Interconnect::Ethernet),
            topo(2, 4, DataParallel::AllReduce, Interconnect::Infiniband),
            topo(1, 8, DataParallel::AllReduce, Interconnect::Nvlink),
            topo(1, 1, DataParallel::Single, Interconnect::Pcie),
            topo(1, 1, DataParallel::Single, Interconnect::Nvlink),
        ];
        assert_eq!(
            topology_tokens(&ts),
            ["2x4-ps-ethernet", "2x4-ar-infiniband", "1x8-ar-nvlink", "1x1-single-pcie", "1x1-single-nvlink"]
        );
    }

    #[test]
    fn the_strategy_and_every_exchange_setting_off_its_default_name_a_data_parallel_topology() {
        assert_eq!(topology_token(&Topology::single()), "1x1");
        let on_two = |s| Topology::on_one_node(s, 2);
        let tokens: Vec<String> = [
            DataParallel::AllReduce,
            DataParallel::Zero1,
            DataParallel::Zero2,
            DataParallel::Zero3,
            DataParallel::ParameterServer { servers: 1 },
            DataParallel::ParameterServer { servers: 2 },
        ]
        .into_iter()
        .map(|s| topology_token(&on_two(s)))
        .collect();
        assert_eq!(tokens, ["1x2-ar", "1x2-z1", "1x2-z2", "1x2-z3", "1x2-ps", "1x2-ps2"]);
        let tuned = Topology { bucket_bytes: 50 << 20, overlap: false, ..on_two(DataParallel::AllReduce) };
        assert_eq!(topology_token(&tuned), "1x2-ar-bucket50mb-no-overlap");
        let small = Topology { bucket_bytes: (0.01 * 1048576.0) as u64, ..on_two(DataParallel::Zero1) };
        assert_eq!(topology_token(&small), "1x2-z1-bucket0.01mb");
        // ZeRO-3 shards by block, not by bucket: its bucket size says nothing.
        assert_eq!(topology_token(&Topology { bucket_bytes: 50 << 20, ..on_two(DataParallel::Zero3) }), "1x2-z3");
        // A server beside one worker exchanges too.
        assert_eq!(
            topology_token(&Topology { devices_per_node: 1, ..on_two(DataParallel::ParameterServer { servers: 1 }) }),
            "1x1-ps"
        );
    }

    #[test]
    fn runs_of_one_spec_with_another_strategy_get_another_id() {
        let spec = "version = 1\nname = \"s\"\n[model]\nfamily = \"mlp\"\n[topology]\ndevices_per_node = 2\n";
        let ids: Vec<String> = ["all-reduce", "zero-1", "zero-2", "zero-3"]
            .into_iter()
            .map(|s| plan(&validated(&format!("{spec}strategy = \"{s}\"\n")))[0].id.clone())
            .collect();
        assert_eq!(
            ids,
            ["s.b32.fp32.1x2-ar.r0", "s.b32.fp32.1x2-z1.r0", "s.b32.fp32.1x2-z2.r0", "s.b32.fp32.1x2-z3.r0"]
        );
        let nvlink = plan(&validated(&format!("{spec}strategy = \"all-reduce\"\ninterconnect = \"nvlink\"\n")));
        assert_eq!(nvlink[0].id, "s.b32.fp32.1x2-ar-nvlink.r0");
        let r = &nvlink[0];
        assert_eq!(r.config, config_name("s", r.batch_size, r.precision, &r.topology, &r.schedule));
    }
}
