//! Unit tests of the run plan: placements, run ids and the runs a spec expands to.
#![allow(clippy::unwrap_used)]

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
    let text = format!("{base}activation_checkpointing = \"every_n\"\ncheckpoint_every = 2\ngrad_accumulation = 2\n");
    let runs = plan(&validated(&text));
    assert_eq!(runs[0].config, "g.b32.fp32.1x1.ckpt-every2.ga2");
    assert_eq!(runs[0].schedule, StepSchedule { checkpointing: Checkpointing::EveryN { n: 2 }, grad_accumulation: 2 });
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
    assert_eq!(ids, ["s.b32.fp32.1x2-ar.r0", "s.b32.fp32.1x2-z1.r0", "s.b32.fp32.1x2-z2.r0", "s.b32.fp32.1x2-z3.r0"]);
    let nvlink = plan(&validated(&format!("{spec}strategy = \"all-reduce\"\ninterconnect = \"nvlink\"\n")));
    assert_eq!(nvlink[0].id, "s.b32.fp32.1x2-ar-nvlink.r0");
    let r = &nvlink[0];
    assert_eq!(r.config, config_name("s", r.batch_size, r.precision, &r.topology, &r.schedule));
}
