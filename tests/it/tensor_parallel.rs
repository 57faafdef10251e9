//! Tensor (and sequence) parallelism through MPI on CPU ranks (features `tch` and `mpi`), on the smoke decoder:
//! TP=2 with and without sequence parallelism, and DP2 x TP2 over four ranks, train what one rank trains on the
//! same global batch (losses, the whole weights' digest on every rank), hold about half the weights and
//! optimizer state per rank, send per mesh dimension what `predict` says, and a rank killed mid-step fails the
//! run naming it, leaving no process behind.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

use crate::distributed::processes_in;

/// specs/llm/smoke_gpt.toml at 10 steps of batch 4, on one rank, a tensor group of two and two of them.
const SPEC: &str = concat!(
    r#"
version = 1
name = "tp"
"#,
    smoke_gpt_model_and_training!(),
    r#"[sweep]
batch_sizes = [4]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 2, strategy = "all-reduce", tensor_parallel = 2 },
  { devices_per_node = 4, strategy = "all-reduce", tensor_parallel = 2 },
]
[topology]
backend = "tch"
device = "cpu"
overlap = false
[run]
warmup = 0
iterations = 10
timeout_s = 600
"#
);

fn run(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    std::fs::write(dir.join("tp.toml"), SPEC).unwrap();
    Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", "tp.toml", "--out", "out", "--quiet", "--no-collectors"])
        .args(extra)
        .output()
        .unwrap()
}

pub(crate) fn read(dir: &std::path::Path, topology: &str) -> RunResult {
    let path = dir.join(format!("out/tp/tp.b4.fp32.{topology}.r0.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

pub(crate) fn losses(r: &RunResult) -> (f64, f64) {
    let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
    (l.first.unwrap(), l.last.unwrap())
}

/// The run's measured bytes per step along `dimension` by `collective`.
pub(crate) fn measured(r: &RunResult, dimension: &str, collective: &str) -> u64 {
    let d = r.distributed.as_ref().unwrap();
    let name = |m: &trainbench_comm::MeshDim| m.name().to_string();
    d.mesh_bytes
        .iter()
        .filter(|b| name(&b.dimension) == dimension && b.collective == collective)
        .map(|b| b.bytes_per_rank)
        .sum()
}

/// What `trainbench predict` gives for the spec's mesh run `topology` along `dimension` by `collective`.
pub(crate) fn predicted(
    dir: &std::path::Path,
    topology: &str,
    extra: &[&str],
    dimension: &str,
    collective: &str,
) -> f64 {
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["predict", "tp.toml", "--format", "json", "--hardware", "h100"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let config = format!("tp.b4.fp32.{topology}");
    let entry = json["predictions"].as_array().unwrap().iter().find(|e| e["config"] == config.as_str());
    let rows = entry.and_then(|e| e["mesh"]["bytes"].as_array()).unwrap_or_else(|| panic!("no {config} in {json}"));
    rows.iter()
        .filter(|b| b["dimension"] == dimension && b["collective"] == collective)
        .map(|b| b["bytes_per_rank"].as_f64().unwrap())
        .sum()
}

fn check_equal_to_one_rank(single: &RunResult, r: &RunResult, what: &str) {
    assert_eq!(r.outcome, RunOutcome::Completed, "{what}");
    let ((a0, a1), (b0, b1)) = (losses(single), losses(r));
    assert!(a1 < a0, "one rank trains: {a0} -> {a1}");
    for (x, y) in [(b0, a0), (b1, a1)] {
        assert!((x - y).abs() <= 1e-4 * y.abs(), "{what}: loss {x} vs {y} on one rank");
    }
    let d = r.distributed.as_ref().unwrap();
    assert_eq!(d.weights_identical, Some(true), "{what}: every rank gathers the same whole model");
    assert!(d.ranks.iter().all(|rank| rank.coords.is_some()), "{what}: each rank's coordinates are recorded");
    crate::common::trains_like::assert_trains_like(single, r, 1e-4, what, &[]);
}

#[test]
fn tensor_parallel_runs_reproduce_one_rank_and_send_what_predict_says() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let single = read(dir.path(), "1x1");
    let (tp2, dp2tp2) = (read(dir.path(), "1x2-ar-no-overlap-tp2"), read(dir.path(), "1x4-ar-no-overlap-tp2"));
    check_equal_to_one_rank(&single, &tp2, "TP=2");
    check_equal_to_one_rank(&single, &dp2tp2, "DP2 x TP2");
    let coords = dp2tp2.distributed.as_ref().unwrap().ranks.iter().map(|r| r.coords.unwrap()).collect::<Vec<_>>();
    assert_eq!((coords[1].tp, coords[1].dp, coords[2].tp, coords[2].dp), (1, 0, 0, 1), "tensor-innermost");
    // Memory per rank: the matrices halved, the norms (9 x 256 values) whole.
    let mem = |r: &RunResult| r.distributed.as_ref().unwrap().ranks[0].memory.unwrap();
    let one = single.metrics.as_ref().unwrap().memory.measured.clone();
    let norms = 4 * 9 * 256;
    let (w1, s1) = (one.weights_bytes, one.optimizer_state_bytes);
    assert_eq!(mem(&tp2).weights, (w1 - norms) / 2 + norms, "weights per rank");
    assert_eq!(mem(&tp2).optimizer_state, (s1 - 2 * norms) / 2 + 2 * norms, "AdamW's two moments per rank");
    // The headline is the most any rank held.
    assert_eq!(tp2.metrics.as_ref().unwrap().memory.measured.weights_bytes, mem(&tp2).weights);
    // Bytes per dimension: measured = predicted.
    for (r, topology) in [(&tp2, "1x2-ar-no-overlap-tp2"), (&dp2tp2, "1x4-ar-no-overlap-tp2")] {
        for (dimension, collective) in [("tensor", "all-reduce"), ("tensor", "all-gather"), ("data", "all-reduce")] {
            let m = measured(r, dimension, collective) as f64;
            let p = predicted(dir.path(), topology, &[], dimension, collective);
            assert!((m - p).abs() <= 1.0, "{topology} {dimension} {collective}: measured {m}, predicted {p}");
        }
    }
    assert!(measured(&tp2, "tensor", "all-reduce") > 0 && measured(&dp2tp2, "data", "all-reduce") > 0);
}

#[test]
fn sequence_parallel_runs_reproduce_one_rank_with_gathers_and_scatters() {
    let dir = tempfile::tempdir().unwrap();
    let sp = [
        "--set",
        "topology.sequence_parallel=true",
        "--set",
        "sweep.topologies=[{devices_per_node=1, strategy=\"single\"}, {devices_per_node=2, strategy=\"all-reduce\", tensor_parallel=2}]",
    ];
    let out = run(dir.path(), &sp);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (single, tp2) = (read(dir.path(), "1x1"), read(dir.path(), "1x2-ar-no-overlap-tp2-sp"));
    check_equal_to_one_rank(&single, &tp2, "TP=2 with sequence parallelism");
    for collective in ["all-gather", "reduce-scatter", "all-reduce"] {
        let m = measured(&tp2, "tensor", collective) as f64;
        let p = predicted(dir.path(), "1x2-ar-no-overlap-tp2-sp", &sp, "tensor", collective);
        assert!(m > 0.0 && (m - p).abs() <= 1.0, "{collective}: measured {m}, predicted {p}");
    }
}

#[test]
fn a_rank_killed_in_a_tensor_group_fails_the_run_naming_it_without_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = run(
        dir.path(),
        &[
            "--set",
            "run.iterations=20000",
            "--set",
            "sweep.topologies=[{devices_per_node=2, strategy=\"all-reduce\", tensor_parallel=2}]",
            "--test-hooks",
            r#"{"abort_rank": [0, 1, 8.0]}"#,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lost = read(dir.path(), "1x2-ar-no-overlap-tp2");
    let RunOutcome::Failed { message } = &lost.outcome else { panic!("{:?}\n{stderr}", lost.outcome) };
    assert!(message.contains("rank 1"), "the failed rank is named: {message}");
    assert!(started.elapsed().as_secs() < 120, "the run fails in seconds, not at its timeout");
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

#[test]
fn zero_3_along_the_data_dimension_of_a_tensor_parallel_mesh_reproduces_one_rank() {
    // ZeRO-3 gathers each block's weights again for its backward, so it recomputes the blocks (full
    // checkpointing): their forward sums over the tensor group run twice, and `predict` counts them.
    let dir = tempfile::tempdir().unwrap();
    let set = [
        "--set",
        "training.activation_checkpointing=full",
        "--set",
        "sweep.topologies=[{devices_per_node=1, strategy=\"single\"}, {devices_per_node=4, strategy=\"zero-3\", tensor_parallel=2}]",
    ];
    let out = run(dir.path(), &set);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (single, z3) = (read(dir.path(), "1x1.ckpt-full"), read(dir.path(), "1x4-z3-no-overlap-tp2.ckpt-full"));
    check_equal_to_one_rank(&single, &z3, "ZeRO-3 x TP2");
    // Along the data dimension each block's unit is gathered twice (forward, backward), the root unit once.
    for (dimension, collective) in
        [("tensor", "all-reduce"), ("tensor", "all-gather"), ("data", "all-gather"), ("data", "reduce-scatter")]
    {
        let m = measured(&z3, dimension, collective) as f64;
        let p = predicted(dir.path(), "1x4-z3-no-overlap-tp2.ckpt-full", &set, dimension, collective);
        assert!(m > 0.0 && (m - p).abs() <= 1.0, "{dimension} {collective}: measured {m}, predicted {p}");
    }
}
