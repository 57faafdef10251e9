//! Unit tests of the run plan: placements, run ids and the runs a spec expands to.
#![allow(clippy::unwrap_used)]

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
    let v = crate::spec::validate::SpecValidator::new().unwrap();
    let checked = v.check_bytes("t.toml", text.as_bytes(), None, &crate::spec::overrides::Overrides::none());
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
    let text = format!("{base}activation_checkpointing = \"every_n\"\ncheckpoint_every = 2\ngrad_accumulation = 2\n");
    let runs = plan(&validated(&text));
    assert_eq!(runs[0].config, "g.b32.fp32.1x1.ckpt-every2.ga2");
    assert_eq!(runs[0].schedule, StepSchedule { checkpointing: Checkpointing::EveryN { n: 2 }, grad_accumulation: 2 });
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
