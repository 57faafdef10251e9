//! Expanding a [`ValidatedSpec`] into the runs it stands for: the product batch size x precision x topology x
//! repeat, each a fully resolved [`RunPlan`] with a stable id (`resnet50.b32.fp32.1x1.r0`) and seed.

use trainbench_comm::{DataParallel, Topology};
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::spec::path::FieldPath;
    use crate::spec::wire::Interconnect;

    fn topo(nodes: usize, devices: usize, strategy: Strategy, interconnect: Interconnect) -> EffectiveTopology {
        EffectiveTopology {
            path: FieldPath::root(),
            nodes,
            devices_per_node: devices,
            strategy,
            parameter_servers: 1,
            interconnect,
        }
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
        assert_eq!(runs[3].id, "p.b8.fp32.1x2.r0");
        assert_eq!(runs[6].id, "p.b8.bf16.1x1.r0");
        assert_eq!(runs[12].id, "p.b16.fp32.1x1.r0");
        assert_eq!(runs.last().unwrap().id, "p.b16.bf16.1x2.r2");
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
            topo(2, 4, Strategy::ParameterServer, Interconnect::Ethernet),
            topo(2, 4, Strategy::AllReduce, Interconnect::Infiniband),
            topo(1, 8, Strategy::AllReduce, Interconnect::Nvlink),
        ];
        assert_eq!(topology_tokens(&ts), ["2x4-ps-ethernet", "2x4-ar-infiniband", "1x8"]);
    }
}
