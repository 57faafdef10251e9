//! Unit tests of the configuration identity: what makes two runs one configuration, what names their
//! difference, and results written before the strategy was in every run id.
#![allow(clippy::unwrap_used)]

use trainbench_comm::{DataParallel, Interconnect, Topology};
use trainbench_contract::{Budget, DeviceSelector, Tf32};
use trainbench_graph::training::{Checkpointing, StepSchedule};

use super::*;

const FIXTURE: &str = include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json");

fn fixture() -> RunResult {
    serde_json::from_str(FIXTURE).unwrap()
}

/// The fixture on two workers with `strategy`.
fn on_two(strategy: DataParallel) -> RunResult {
    let mut r = fixture();
    r.plan.topology = Topology::on_one_node(strategy, 2);
    r
}

#[test]
fn repeats_budgets_and_machines_do_not_change_the_identity() {
    let a = fixture();
    let mut b = fixture();
    b.plan.repeat = 7;
    b.plan.seed = 49;
    b.plan.id = "renamed.r7".into();
    b.plan.config = "renamed".into();
    b.run_id = "renamed.r7".into();
    b.plan.warmup = 50;
    b.plan.budget = Budget::Seconds(3.0);
    b.plan.timeout_s = Some(60.0);
    b.environment.hostname = "elsewhere".into();
    b.environment.started_at = "2030-01-01T00:00:00Z".into();
    // Another budget and sweep in the embedded spec: the same content.
    b.environment.spec_canonical = b
        .environment
        .spec_canonical
        .replace("iterations = 30", "iterations = 300")
        .replace("batch_sizes = [8, 32, 128]", "batch_sizes = [8]");
    let (ia, ib) = (ConfigurationIdentity::of(&a), ConfigurationIdentity::of(&b));
    assert_eq!(ia, ib);
    assert_eq!(ia.key(), ib.key());
    assert_eq!(ia.digest(), ib.digest());
    assert!(ia.differences(&ib).is_empty());
    // `cuda` and `cuda:0` are one device.
    let (mut c, mut d) = (fixture(), fixture());
    c.plan.device = DeviceSelector::Cuda(None);
    d.plan.device = DeviceSelector::Cuda(Some(0));
    assert_eq!(ConfigurationIdentity::of(&c), ConfigurationIdentity::of(&d));
}

#[test]
fn the_key_is_pinned() {
    let id = ConfigurationIdentity::of(&fixture());
    let content = spec_content_sha256(&fixture().environment.spec_canonical);
    assert_eq!(
        id.key(),
        format!(
            "spec=fixture-mlp;spec content={content};backend=mock;device=cpu;batch size=8;precision=fp32;\
             topology=1x1;strategy=single;optimizer={{\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-8,\"kind\":\"adam\",\
             \"lr\":0.001,\"weight_decay\":0.0}}"
        )
    );
    assert_eq!(id.name(), "fixture-mlp.b8.fp32.1x1");
    // Separators inside a value are escaped, so two keys never run together.
    let mut r = fixture();
    r.spec_name = "a;b=c".into();
    assert!(ConfigurationIdentity::of(&r).key().starts_with("spec=a\\;b\\=c;"));
}

#[test]
fn every_field_that_differs_is_named() {
    type Change = fn(&mut RunResult);
    let cases: Vec<(&str, Change, &str, &str)> = vec![
        ("spec", |r| r.spec_name = "other".into(), "fixture-mlp", "other"),
        ("backend", |r| r.backend = "tch".into(), "mock", "tch"),
        ("device", |r| r.plan.device = DeviceSelector::Cuda(Some(1)), "cpu", "cuda:1"),
        ("batch size", |r| r.plan.batch_size = 16, "8", "16"),
        ("precision", |r| r.plan.precision = trainbench_graph::Precision::Bf16, "fp32", "bf16"),
        (
            "activation checkpointing",
            |r| r.plan.schedule.checkpointing = Checkpointing::EveryN { n: 2 },
            "-",
            "every 2",
        ),
        (
            "gradient accumulation",
            |r| r.plan.schedule = StepSchedule { grad_accumulation: 4, ..r.plan.schedule },
            "-",
            "4",
        ),
        ("TF32 matmul", |r| r.plan.numerics.tf32 = Tf32 { matmul: true, cudnn: true }, "-", "yes"),
        ("TF32 cuDNN", |r| r.plan.numerics.tf32 = Tf32 { matmul: false, cudnn: false }, "-", "no"),
        ("cuDNN benchmark", |r| r.plan.numerics.cudnn_benchmark = false, "-", "no"),
        ("initial loss scale", |r| r.plan.numerics.loss_scale = 1024.0, "-", "1024.0"),
        ("phase timing", |r| r.plan.phase_timing = false, "-", "off"),
        ("CPU threads", |r| r.plan.cpu_threads = Some(4), "-", "4"),
    ];
    for (field, change, a, b) in cases {
        let mut r = fixture();
        change(&mut r);
        let d = ConfigurationIdentity::of(&fixture()).differences(&ConfigurationIdentity::of(&r));
        assert_eq!(d, [IdentityDifference { field, a: a.into(), b: b.into() }], "{field}");
    }
    // The optimizer, the target and the spec's content are named with their values.
    let mut r = fixture();
    r.plan.optimizer =
        trainbench_graph::OptimizerSpec::Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0, nesterov: false };
    let d = ConfigurationIdentity::of(&fixture()).differences(&ConfigurationIdentity::of(&r));
    assert_eq!(d.iter().map(|d| d.field).collect::<Vec<_>>(), ["optimizer"]);
    assert!(d[0].b.contains("\"kind\":\"sgd\""), "{:?}", d[0]);
    let mut r = fixture();
    r.environment.spec_canonical = r.environment.spec_canonical.replace("hidden = [512, 512]", "hidden = [512]");
    let d = ConfigurationIdentity::of(&fixture()).differences(&ConfigurationIdentity::of(&r));
    assert_eq!(d.iter().map(|d| (d.field, d.a.len(), d.b.len())).collect::<Vec<_>>(), [("spec content", 12, 12)]);
}

#[test]
fn the_topology_of_several_workers_is_named_field_by_field() {
    let ar = ConfigurationIdentity::of(&on_two(DataParallel::AllReduce));
    let names = |other: &RunResult| -> Vec<String> {
        ar.differences(&ConfigurationIdentity::of(other)).iter().map(IdentityDifference::describe).collect()
    };
    assert_eq!(names(&on_two(DataParallel::Zero2)), ["strategy all-reduce vs zero-2"]);
    assert_eq!(
        names(&on_two(DataParallel::ParameterServer { servers: 2 })),
        ["strategy all-reduce vs parameter-server ×2", "bucket size 25 MiB vs -", "overlap yes vs -"]
    );
    let mut r = on_two(DataParallel::AllReduce);
    r.plan.topology = Topology { nodes: 2, devices_per_node: 1, ..r.plan.topology };
    assert_eq!(names(&r), ["topology 1x2 vs 2x1"]);
    r.plan.topology = Topology { interconnect: Interconnect::Nvlink, ..on_two(DataParallel::AllReduce).plan.topology };
    assert_eq!(names(&r), ["interconnect pcie vs nvlink"]);
    r.plan.topology =
        Topology { bucket_bytes: 50 << 20, overlap: false, ..on_two(DataParallel::AllReduce).plan.topology };
    assert_eq!(names(&r), ["bucket size 25 MiB vs 50 MiB", "overlap yes vs no"]);
    // One worker uses no link, bucket or overlap: they do not split its configuration.
    let (mut a, mut b) = (fixture(), fixture());
    a.plan.topology.interconnect = Interconnect::Nvlink;
    b.plan.topology.bucket_bytes = 1 << 20;
    assert_eq!(ConfigurationIdentity::of(&a), ConfigurationIdentity::of(&b));
    // ZeRO-3 gathers by block: its bucket size is not part of it.
    let (mut a, b) = (on_two(DataParallel::Zero3), on_two(DataParallel::Zero3));
    a.plan.topology.bucket_bytes = 1 << 20;
    assert_eq!(ConfigurationIdentity::of(&a), ConfigurationIdentity::of(&b));
}

#[test]
fn results_written_before_the_strategy_was_in_every_id_load_with_their_plans_identity() {
    // A data-parallel result as written before: no `config`, no nodes, interconnect or overlap in the plan, and
    // a run id without the strategy.
    let old = |strategy: &str| -> RunResult {
        let mut json: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        let plan = json["plan"].as_object_mut().unwrap();
        plan.remove("config");
        plan.insert("id".into(), "fixture-mlp.b8.fp32.1x2.r0".into());
        plan.insert("world_size".into(), 2.into());
        plan.insert("strategy".into(), serde_json::json!({ "kind": strategy }));
        json["run_id"] = "fixture-mlp.b8.fp32.1x2.r0".into();
        serde_json::from_value(json).unwrap()
    };
    let (ar, z2) = (old("all-reduce"), old("zero-2"));
    assert_eq!(ar.config_id(), z2.config_id());
    let (iar, iz2) = (ConfigurationIdentity::of(&ar), ConfigurationIdentity::of(&z2));
    assert_ne!(iar, iz2);
    assert_eq!(
        iar.differences(&iz2).iter().map(IdentityDifference::describe).collect::<Vec<_>>(),
        ["strategy all-reduce vs zero-2"]
    );
    // Named as a run of that plan is named now; an old result never overlapped.
    assert_eq!(
        (iar.name(), iz2.name()),
        ("fixture-mlp.b8.fp32.1x2-ar-no-overlap".into(), "fixture-mlp.b8.fp32.1x2-z2-no-overlap".into())
    );
    assert!(iar.key().contains(";overlap=no"), "{}", iar.key());
}

#[test]
fn the_spec_content_leaves_out_what_the_plan_holds_and_keeps_what_is_trained() {
    let text = fixture().environment.spec_canonical;
    let base = spec_content_sha256(&text);
    for (from, to) in [
        ("iterations = 30", "iterations = 31"),
        ("precisions = [\"fp32\", \"bf16\"]", "precisions = [\"bf16\"]"),
        ("strategy = \"single\"", "strategy = \"all-reduce\""),
        ("seed = 42", "seed = 7"),
        ("description = \"Test fixture: an MLP in two precisions on the mock backend.\"", "description = \"\""),
    ] {
        assert!(text.contains(from), "{from}");
        assert_eq!(spec_content_sha256(&text.replace(from, to)), base, "{from} -> {to}");
    }
    for (from, to) in [
        ("inputs = 256", "inputs = 128"),
        ("source = \"synthetic\"", "source = \"synthetic\"\nname = \"x\""),
        ("name = \"fixture-mlp\"", "name = \"other\""),
    ] {
        assert_ne!(spec_content_sha256(&text.replace(from, to)), base, "{from} -> {to}");
    }
    // The layout and key order of the TOML do not matter; a text that is not TOML is hashed as written.
    let reordered = "[model]\nclasses = 1\nfamily = \"mlp\"\n\n[run]\nwarmup = 1\n";
    let ordered = "[model]\nfamily = \"mlp\"\nclasses = 1\n";
    assert_eq!(spec_content_sha256(reordered), spec_content_sha256(ordered));
    assert_eq!(spec_content_sha256("not = [toml"), crate::digest::sha256_hex("not = [toml"));
}

#[test]
fn distinctions_name_only_what_tells_each_row_apart() {
    let ids: Vec<ConfigurationIdentity> = [DataParallel::AllReduce, DataParallel::Zero2, DataParallel::Zero3]
        .into_iter()
        .map(|s| ConfigurationIdentity::of(&on_two(s)))
        .collect();
    let refs: Vec<&ConfigurationIdentity> = ids.iter().collect();
    // ZeRO-3 has no bucket size: that follows from its strategy and is not named.
    assert_eq!(distinctions(&refs), [["strategy all-reduce"], ["strategy zero-2"], ["strategy zero-3"]]);
    let mut full = on_two(DataParallel::AllReduce);
    full.plan.schedule.checkpointing = Checkpointing::Full;
    let pair = [ConfigurationIdentity::of(&on_two(DataParallel::AllReduce)), ConfigurationIdentity::of(&full)];
    let named = distinctions(&[&pair[0], &pair[1]]);
    assert_eq!(named, [vec![], vec!["activation checkpointing full".to_string()]]);
    assert_eq!(distinctions(&[&pair[0], &pair[0]]), [Vec::<String>::new(), Vec::new()]);
    assert!(distinctions(&[]).is_empty());
}

#[test]
fn a_mesh_is_part_of_the_identity_and_a_flat_one_leaves_the_key_unchanged() {
    let dp = on_two(DataParallel::Single);
    let mut tp = on_two(DataParallel::Single);
    tp.plan.topology.mesh = trainbench_comm::Mesh { tensor_parallel: 2, ..trainbench_comm::Mesh::flat() };
    let (a, b) = (ConfigurationIdentity::of(&dp), ConfigurationIdentity::of(&tp));
    assert_ne!(a.key(), b.key());
    assert!(b.key().contains(";mesh=tp2;"), "{}", b.key());
    assert!(!a.key().contains("mesh="), "{}", a.key());
    assert!(b.name().ends_with("1x2-single-tp2"), "{}", b.name());
    // A given pipeline cut is part of it too: the same mesh cut two ways is two configurations.
    let mut pp = on_two(DataParallel::AllReduce);
    pp.plan.topology.mesh = trainbench_comm::Mesh { pipeline_parallel: 2, ..trainbench_comm::Mesh::flat() };
    let balanced = ConfigurationIdentity::of(&pp);
    pp.plan.pipeline_layers = vec![1, 3];
    let given = ConfigurationIdentity::of(&pp);
    assert!(given.key().contains(";pipeline cut=1,3;"), "{}", given.key());
    assert!(!balanced.key().contains("pipeline cut"), "{}", balanced.key());
    assert_eq!(
        given.differences(&balanced).iter().map(|d| d.describe()).collect::<Vec<_>>(),
        ["pipeline cut 1,3 vs -"]
    );
}
