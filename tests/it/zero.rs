//! ZeRO through MPI on CPU ranks (features `tch` and `mpi`): at world sizes 2 and 4 every stage's losses are
//! one worker's on the same global batch, the weights gathered at the end are bit-identical on every worker,
//! the bytes sent per step and kind are the ring formulas over the padded units, and what a worker holds of
//! the optimizer state (and, for stage 3, the weights) shrinks with the world. Stage 3 runs a decoder whose
//! layers are its units (gathered ahead on a communication thread, or not), and an MLP that is one unit. What
//! all-reduce has holds for ZeRO: `mpirun` by hand, and a rank that dies mid-exchange fails its run.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

const SPEC: &str = r#"
version = 1
name = "zero"
[model]
family = "gpt"
layers = 2
d_model = 32
heads = 4
vocab = 97
seq_len = 16
max_positions = 16
[training]
activation_checkpointing = "full"
optimizer = { kind = "adamw", lr = 1e-3, weight_decay = 0.1 }
[sweep]
batch_sizes = [8]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 2, strategy = "zero-1" },
  { devices_per_node = 2, strategy = "zero-2" },
  { devices_per_node = 2, strategy = "zero-3" },
  { devices_per_node = 4, strategy = "zero-1" },
  { devices_per_node = 4, strategy = "zero-2" },
  { devices_per_node = 4, strategy = "fsdp" },
]
[topology]
backend = "tch"
device = "cpu"
bucket_mb = 0.01
[run]
warmup = 0
iterations = 5
timeout_s = 240
"#;

fn run(dir: &std::path::Path, spec: &str) {
    std::fs::write(dir.join("zero.toml"), spec).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", "zero.toml", "--out", "out", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn result(dir: &std::path::Path, topology: &str) -> RunResult {
    let path = dir.join(format!("out/zero/zero.b8.fp32.{topology}.r0.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))).unwrap()
}

#[test]
fn every_stage_reproduces_one_worker_and_sends_and_holds_what_the_formulas_say() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), SPEC);
    let single = result(dir.path(), "1x1.ckpt-full");
    let losses = |r: &RunResult| {
        let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
        vec![l.first.unwrap(), l.last.unwrap()]
    };
    let want = losses(&single);
    assert!(want[1] < want[0], "one worker trains: {want:?}");
    let params = single.analysis.as_ref().unwrap().parameters;
    let one = single.metrics.as_ref().unwrap().memory.measured.clone();
    for (topology, workers, stage) in [
        ("1x2-z1-bucket0.01mb", 2u64, 1),
        ("1x2-z2-bucket0.01mb", 2, 2),
        ("1x2-z3", 2, 3),
        ("1x4-z1-bucket0.01mb", 4, 1),
        ("1x4-z2-bucket0.01mb", 4, 2),
        ("1x4-z3", 4, 3),
    ] {
        let r = result(dir.path(), &format!("{topology}.ckpt-full"));
        assert_eq!(r.outcome, RunOutcome::Completed, "{topology}");
        for (a, b) in losses(&r).iter().zip(&want) {
            assert!((a - b).abs() <= 1e-3 * b.abs(), "{topology}: loss {a} vs one worker's {b}");
        }
        let d = r.distributed.as_ref().unwrap();
        assert_eq!(d.strategy, format!("zero-{stage}"), "fsdp is recorded as zero-3");
        assert_eq!(d.weights_identical, Some(true), "{topology}: bit-identical gathered weights");
        crate::common::trains_like::assert_trains_like(&single, &r, 1e-3, topology, &[]);
        let kind = d.bytes_by_kind.unwrap();
        assert_eq!(kind.all_reduce, 0, "{topology}");
        // Stages 1-2 cut this model's 116 kB of gradients into 10 kB units, stage 3 into a root unit and one
        // unit per layer, each padded to a multiple of W: the reduce-scatter sends (W-1)/W of the padded total
        // (the exact sums are pinned in crates/trainbench-comm/src/sharded_tests.rs).
        assert!(kind.reduce_scatter >= (workers - 1) * 4 * params / workers, "{topology}: {kind:?}");
        assert!(kind.reduce_scatter <= (workers - 1) * 4 * (params + 64 * workers) / workers, "{topology}: {kind:?}");
        // Stages 1-2 overlap the backward pass bucket by bucket, stage 3 gathers each layer while the one before
        // it computes.
        assert_eq!(d.overlapped, Some(true), "{topology}");
        assert!(d.comm_total_s.is_some_and(|t| t > 0.0), "{topology}");
        if stage < 3 {
            assert_eq!(kind.all_gather, kind.reduce_scatter, "{topology}: what a ring all-reduce moves");
        } else {
            // Blocks gathered for the forward and again for the backward, the root once: more than an
            // all-reduce, less than 1.5 times it (the root's share is not gathered twice).
            assert!(kind.all_gather > kind.reduce_scatter && kind.all_gather < 2 * kind.reduce_scatter, "{kind:?}");
        }
        assert_eq!(d.bytes_sent_per_step, kind.reduce_scatter + kind.all_gather);
        assert_eq!(d.ranks.len() as u64, workers);
        for rank in &d.ranks {
            let held = rank.memory.unwrap();
            // AdamW's two moments over this worker's shard only.
            let shard = 4 * params.div_ceil(workers);
            assert!(held.optimizer_state <= 2 * (shard + 4 * 64), "{topology}: {held:?}");
            assert!(held.optimizer_state < one.optimizer_state_bytes, "{topology}");
            if stage == 3 {
                assert!(held.weights < one.weights_bytes, "{topology}: the blocks' weights are sharded: {held:?}");
            }
        }
    }
    // ZeRO-2 drops each unit's full gradients as soon as they are staged, during the backward pass: it holds
    // fewer at once than ZeRO-1, which keeps them to the step's end.
    let grads = |t: &str| result(dir.path(), t).distributed.unwrap().ranks[0].memory.unwrap().gradients;
    assert!(grads("1x2-z2-bucket0.01mb.ckpt-full") < grads("1x2-z1-bucket0.01mb.ckpt-full"));
    // The report draws what a worker held against world size, and tabulates it.
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["report", "out", "--out", "report"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(dir.path().join("report/held-zero.svg")).unwrap();
    assert!(svg.contains("MiB held per worker") && svg.contains("optimizer state · zero-3"), "{svg}");
    let md = std::fs::read_to_string(dir.path().join("report/report.md")).unwrap();
    assert!(md.contains("held/worker (w / g / opt)"), "{md}");
}

#[test]
fn zero_3_of_a_model_without_blocks_is_one_unit_and_a_decoder_without_recomputation_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC
        .replace(
            "family = \"gpt\"\nlayers = 2\nd_model = 32\nheads = 4\nvocab = 97\nseq_len = 16\nmax_positions = 16",
            "family = \"mlp\"\ninputs = 12\nhidden = [16]\nclasses = 5",
        )
        .replace("activation_checkpointing = \"full\"\n", "");
    run(dir.path(), &spec);
    let single = result(dir.path(), "1x1");
    let z3 = result(dir.path(), "1x4-z3");
    let (a, b) = (z3.metrics.unwrap().loss.unwrap().last.unwrap(), single.metrics.unwrap().loss.unwrap().last.unwrap());
    assert!((a - b).abs() <= 1e-3 * b.abs(), "{a} vs {b}");
    let d = z3.distributed.unwrap();
    assert_eq!(d.weights_identical, Some(true));
    assert_eq!(d.overlapped, Some(false), "one unit: nothing to gather ahead");

    // A decoder whose blocks are not recomputed: refused before anything runs, with the fix.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("zero.toml"), SPEC.replace("activation_checkpointing = \"full\"\n", "")).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", "zero.toml", "--out", "out", "--quiet"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`training.activation_checkpointing = \"full\"`"), "{stderr}");
    assert!(!dir.path().join("out/zero").exists(), "nothing ran");
}

#[test]
fn zero_3_without_overlap_gathers_between_the_layers_and_trains_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC
        .replace("bucket_mb = 0.01", "overlap = false")
        .replace(
            r#"  { devices_per_node = 2, strategy = "zero-1" },
  { devices_per_node = 2, strategy = "zero-2" },
"#,
            "",
        )
        .replace(
            r#"  { devices_per_node = 4, strategy = "zero-1" },
  { devices_per_node = 4, strategy = "zero-2" },
  { devices_per_node = 4, strategy = "fsdp" },
"#,
            "",
        );
    run(dir.path(), &spec);
    let (single, z3) = (result(dir.path(), "1x1.ckpt-full"), result(dir.path(), "1x2-z3-no-overlap.ckpt-full"));
    let (a, b) = (z3.metrics.unwrap().loss.unwrap().last.unwrap(), single.metrics.unwrap().loss.unwrap().last.unwrap());
    assert!((a - b).abs() <= 1e-3 * b.abs(), "{a} vs {b}");
    let d = z3.distributed.unwrap();
    assert_eq!((d.overlapped, d.weights_identical), (Some(false), Some(true)));
}

/// The spec's decoder at world size 2 with `strategy` only.
fn pair(strategy: &str) -> String {
    let start = SPEC.find("topologies = [").unwrap();
    let end = start + SPEC[start..].find("]\n").unwrap() + 2;
    format!("{}topologies = [{{ devices_per_node = 2, strategy = \"{strategy}\" }}]\n{}", &SPEC[..start], &SPEC[end..])
        .replace("bucket_mb = 0.01\n", "")
}

#[test]
fn zero_runs_under_mpirun_by_hand_as_all_reduce_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("zero.toml"), pair("zero-3")).unwrap();
    let out = crate::distributed::mpirun(2, dir.path()).args(["run", "zero.toml", "--out", "out", "--quiet"]).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result(dir.path(), "1x2-z3.ckpt-full");
    assert_eq!(r.outcome, RunOutcome::Completed);
    let d = r.distributed.unwrap();
    assert_eq!((d.world_size, d.launcher.as_str(), d.strategy.as_str()), (2, "mpirun (Open MPI)", "zero-3"));
    assert_eq!((d.weights_identical, d.overlapped), (Some(true), Some(true)));
}

#[test]
fn a_rank_that_dies_while_the_layers_are_gathered_ahead_fails_its_run_without_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let spec = pair("zero-3").replace("iterations = 5", "iterations = 20000\nrepeats = 2");
    std::fs::write(dir.path().join("zero.toml"), spec).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", "zero.toml", "--out", "out", "--quiet", "--set", "run.iterations=300"])
        .args(["--test-hooks", r#"{"abort_rank": [0, 1, 0.5]}"#])
        .args(["--set", "run.time_budget_s=3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let read = |repeat: u32| -> RunResult {
        let path = dir.path().join(format!("out/zero/zero.b8.fp32.1x2-z3.ckpt-full.r{repeat}.json"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}\n{stderr}"))).unwrap()
    };
    let RunOutcome::Failed { message } = &read(0).outcome else { panic!("{:?}\n{stderr}", read(0).outcome) };
    assert!(message.contains("rank 1"), "the failed rank is named: {message}");
    assert_eq!(read(1).outcome, RunOutcome::Completed, "the sweep goes on: {stderr}");
    let left = crate::distributed::processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

#[test]
fn a_zero_run_past_its_timeout_is_interrupted_on_every_rank_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let spec = pair("zero-3").replace("iterations = 5\ntimeout_s = 240", "iterations = 100000\ntimeout_s = 4");
    assert!(spec.contains("timeout_s = 4"), "{spec}");
    run(dir.path(), &spec);
    let r = result(dir.path(), "1x2-z3.ckpt-full");
    let RunOutcome::Interrupted { reason } = &r.outcome else { panic!("{:?}", r.outcome) };
    assert!(reason.contains("timeout"), "{reason}");
    assert!(r.metrics.is_some(), "the steps measured before the timeout are kept");
    let left = crate::distributed::processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}
