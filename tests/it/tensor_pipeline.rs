//! Tensor x pipeline parallelism through MPI on CPU ranks (features `tch` and `mpi`): the smoke GPT on four
//! ranks as a pipeline of two stages, each a tensor group of two (TP2 x PP2), under 1F1B, GPipe, 1F1B with
//! sequence parallelism and interleaved 1F1B (2 virtual stages), trains what one rank trains on the same global batch (losses within 1e-4, relative),
//! every tensor index gathers the same whole model, each rank's coordinates are recorded, and the bytes per
//! mesh dimension and collective (the busiest stage's tensor traffic, the stage hop) are what `predict` says.
//! DP2 x TP2 x PP2 over eight ranks and a tiny ViT over TP2 x PP2 do the same; a rank killed mid-step fails the run naming it, leaving no process
//! behind.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

use crate::distributed::processes_in;

/// The smoke GPT at a global batch of 8 in 4 micro-batches, on one rank and on TP2 x PP2 (`KEYS` is replaced
/// by the schedule's keys of `[topology]`), one intra-op thread per rank.
const SPEC: &str = concat!(
    r#"
version = 1
name = "NAME"
"#,
    smoke_gpt_model_and_training!(),
    r#"[sweep]
batch_sizes = [8]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 4, strategy = "all-reduce", tensor_parallel = 2, pipeline_parallel = 2 },
]
[topology]
backend = "tch"
device = "cpu"
overlap = false
microbatches = 4
KEYS
[run]
warmup = 0
iterations = 10
timeout_s = 600
cpu_threads = 1
"#
);

/// A tiny ViT (16x16 images in 4x4 patches, 2 layers of width 32 with 4 heads and MLP 64, 10 classes) at a
/// global batch of 4 in 2 micro-batches, on one rank and on TP2 x PP2 under 1F1B.
const VIT: &str = concat!(
    r#"
version = 1
name = "NAME"
"#,
    tiny_vit_model_and_training!(),
    r#"[sweep]
batch_sizes = [4]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 4, strategy = "all-reduce", tensor_parallel = 2, pipeline_parallel = 2 },
]
[topology]
backend = "tch"
device = "cpu"
overlap = false
microbatches = 2
KEYS
[run]
warmup = 0
iterations = 10
timeout_s = 600
cpu_threads = 1
"#
);

/// Run spec `spec` as `name` (with `keys`) in `dir`; its results, the one-rank run first.
fn run(dir: &std::path::Path, spec: &str, name: &str, keys: &str) -> Vec<RunResult> {
    std::fs::write(dir.join(format!("{name}.toml")), spec.replace("NAME", name).replace("KEYS", keys)).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", &format!("{name}.toml"), "--out", "out", "--quiet", "--no-collectors"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let mut all: Vec<RunResult> = std::fs::read_dir(dir.join("out").join(name))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.ends_with("index.json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap())
        .collect();
    all.sort_by_key(|r: &RunResult| r.plan.topology.world_size());
    all
}

fn losses(r: &RunResult) -> (f64, f64) {
    let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
    (l.first.unwrap(), l.last.unwrap())
}

/// `predict`'s bytes per step of spec `name`'s mesh run, by (dimension, collective).
fn predicted(dir: &std::path::Path, name: &str) -> Vec<(String, String, f64)> {
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["predict", &format!("{name}.toml"), "--hardware", "h100", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = json["predictions"].as_array().unwrap();
    let mesh = entries.iter().find_map(|e| e.get("mesh").filter(|m| !m.is_null())).unwrap();
    let rows = mesh["bytes"].as_array().unwrap();
    rows.iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap().to_string();
            (text("dimension"), text("collective"), r["bytes_per_rank"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn tensor_pipeline_meshes_train_what_one_rank_trains_and_send_what_predict_says() {
    let dir = tempfile::tempdir().unwrap();
    for (name, keys) in [
        ("onefoneb", "pipeline_schedule = \"1f1b\""),
        ("gpipe", "pipeline_schedule = \"gpipe\""),
        ("onefoneb_sp", "pipeline_schedule = \"1f1b\"\nsequence_parallel = true"),
        ("interleaved", "pipeline_schedule = \"interleaved-1f1b\"\nvirtual_stages = 2"),
    ] {
        let all = run(dir.path(), SPEC, name, keys);
        check_mesh(dir.path(), name, &all);
    }
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

/// DP2 x TP2 x PP2 over eight ranks: two replicas of the TP2 x PP2 pipeline, each on half the global batch (4
/// micro-batches of one sequence), their gradients all-reduced along the data dimension.
#[test]
fn a_data_parallel_tensor_pipeline_mesh_of_eight_ranks_trains_what_one_rank_trains() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC.replace(
        "{ devices_per_node = 4, strategy = \"all-reduce\", tensor_parallel = 2",
        "{ devices_per_node = 8, strategy = \"all-reduce\", tensor_parallel = 2",
    );
    let all = run(dir.path(), &spec, "dp2tp2pp2", "pipeline_schedule = \"1f1b\"");
    assert_eq!(all[1].plan.topology.data_parallel(), 2);
    check_mesh(dir.path(), "dp2tp2pp2", &all);
    let measured = |dimension: &str| {
        let d = all[1].distributed.as_ref().unwrap();
        d.mesh_bytes.iter().filter(|m| m.dimension.name() == dimension).map(|m| m.bytes_per_rank).sum::<u64>()
    };
    assert!(measured("data") > 0 && measured("tensor") > 0, "bytes along the data and tensor dimensions");
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

#[test]
fn a_vit_over_tensor_pipeline_mesh_trains_what_one_rank_trains_and_sends_what_predict_says() {
    let dir = tempfile::tempdir().unwrap();
    let all = run(dir.path(), VIT, "vit", "pipeline_schedule = \"1f1b\"");
    check_mesh(dir.path(), "vit", &all);
}

/// The TP2 x PP2 run of `all` (after the one-rank run) against the one-rank run and `predict` for spec `name`.
fn check_mesh(dir: &std::path::Path, name: &str, all: &[RunResult]) {
    let (one, mesh) = (&all[0], &all[1]);
    assert_eq!(mesh.outcome, RunOutcome::Completed, "{name}");
    let (a, b) = (losses(one), losses(mesh));
    for (x, y) in [(a.0, b.0), (a.1, b.1)] {
        assert!((x - y).abs() <= 1e-4 * x.abs(), "{name}: loss {y} on the mesh, {x} on one rank");
    }
    assert!(b.1 < b.0, "{name}: the mesh trains: {} -> {}", b.0, b.1);
    let d = mesh.distributed.as_ref().unwrap();
    assert_eq!(d.weights_identical, Some(true), "{name}: both tensor indices gather the same whole model");
    let noise_driven: &[usize] = if name == "vit" { &crate::tensor_parallel_vit::QKV_BIASES } else { &[] };
    crate::common::trains_like::assert_trains_like(one, mesh, 1e-4, name, noise_driven);
    let coords: Vec<_> = d.ranks.iter().map(|r| r.coords.unwrap()).collect();
    let world = mesh.plan.topology.world_size();
    assert_eq!(coords.len(), world, "{name}");
    // Tensor innermost, then data, then pipeline outermost: rank = (pp * dp_degree + dp) * tp_degree + tp.
    let (dp_degree, tp_degree) = (mesh.plan.topology.data_parallel(), mesh.plan.topology.mesh.tensor_parallel);
    for (rank, c) in coords.iter().enumerate() {
        assert_eq!((c.pp * dp_degree + c.dp) * tp_degree + c.tp, rank, "{name}: rank {rank} at {c:?}");
    }
    let p = d.pipeline.as_ref().unwrap();
    // Each rank reports its stage: two tensor ranks per stage in each data-parallel replica.
    assert_eq!(p.per_stage.iter().filter(|s| s.stage == 1).count(), world / 2, "{name}");
    // Bytes per dimension and collective: measured (the busiest rank's) = predicted.
    let predicted = predicted(dir, name);
    let mut measured: Vec<(String, String, f64)> = d
        .mesh_bytes
        .iter()
        .map(|m| (m.dimension.name().to_string(), m.collective.clone(), m.bytes_per_rank as f64))
        .collect();
    measured.push(("pipeline".into(), "send-recv".into(), p.bytes_per_step as f64));
    let sp = name.ends_with("_sp");
    let kinds: &[&str] = if sp { &["all-gather", "reduce-scatter"] } else { &["all-reduce", "all-gather"] };
    assert!(kinds.iter().all(|k| measured.iter().any(|m| m.0 == "tensor" && m.1 == *k && m.2 > 0.0)), "{name}");
    for (dimension, collective, bytes) in &predicted {
        let m = measured.iter().find(|m| &m.0 == dimension && &m.1 == collective).map_or(0.0, |m| m.2);
        assert!((m - bytes).abs() <= 1.0, "{name} {dimension} {collective}: measured {m}, predicted {bytes}");
    }
    assert_eq!(measured.len(), predicted.len(), "{name}: the same rows: {measured:?} against {predicted:?}");
    println!(
        "{name}: loss {:.6} -> {:.6} (one rank {:.6} -> {:.6}); bubble measured {:.3}, formula {} = {:.3}; \
         bytes per step {measured:?}",
        b.0,
        b.1,
        a.0,
        a.1,
        p.bubble.unwrap_or(f64::NAN),
        p.formula,
        p.bubble_formula,
    );
}

#[test]
fn a_rank_killed_in_a_tensor_pipeline_mesh_fails_the_run_naming_it_without_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC
        .replace("NAME", "dies")
        .replace("KEYS", "pipeline_schedule = \"1f1b\"")
        .replace("  { devices_per_node = 1, strategy = \"single\" },\n", "")
        .replace("iterations = 10", "iterations = 20000");
    std::fs::write(dir.path().join("dies.toml"), spec).unwrap();
    let started = std::time::Instant::now();
    // Rank 1: the second tensor rank of the first stage, 8 s into the run.
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", "dies.toml", "--out", "out", "--quiet", "--no-collectors"])
        .args(["--test-hooks", r#"{"abort_rank": [0, 1, 8.0]}"#])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = dir.path().join("out/dies/dies.b8.fp32.1x4-ar-no-overlap-tp2-pp2-1f1b-mb4.r0.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}\n{stderr}", path.display()));
    let lost: RunResult = serde_json::from_str(&text).unwrap();
    let RunOutcome::Failed { message } = &lost.outcome else { panic!("{:?}\n{stderr}", lost.outcome) };
    assert!(message.contains("rank 1"), "the failed rank is named: {message}");
    assert!(started.elapsed().as_secs() < 120, "the run fails in seconds, not at its timeout");
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}
