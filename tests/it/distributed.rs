//! Data-parallel runs through MPI on CPU ranks (features `tch` and `mpi`): all-reduce at world sizes 2 and 4
//! and parameter servers reproduce one worker on the same global batch, and the bytes each worker sends per
//! step are the ring and parameter-server formulas. CUDA ranks go through NCCL: on a machine without a GPU (or
//! a build without the engine) their specs are refused before anything starts, and a rank asked to join an
//! NCCL group says why it cannot; `scripts/gpu_check.sh` runs them on a GPU.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

const SPEC: &str = r#"
version = 1
name = "dp"
[model]
family = "mlp"
inputs = 32
hidden = [64]
classes = 10
[training]
optimizer = { kind = "sgd", lr = 0.05, momentum = 0.9 }
[sweep]
batch_sizes = [16]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 2, strategy = "all-reduce" },
  { devices_per_node = 4, strategy = "all-reduce" },
  { devices_per_node = 2, strategy = "parameter-server", parameter_servers = 2 },
]
[topology]
backend = "tch"
device = "cpu"
[run]
warmup = 0
iterations = 12
timeout_s = 240
"#;

fn result(dir: &std::path::Path, topology: &str) -> RunResult {
    let path = dir.join(format!("out/dp/dp.b16.fp32.{topology}.r0.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn data_parallel_runs_reproduce_one_worker_and_send_what_the_formulas_say() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dp.toml"), SPEC).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", "dp.toml", "--out", "out", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let single = result(dir.path(), "1x1");
    let (first, last) = {
        let l = single.metrics.as_ref().unwrap().loss.clone().unwrap();
        (l.first.unwrap(), l.last.unwrap())
    };
    assert!(last < first, "the single worker trains: {first} -> {last}");
    let params = single.analysis.as_ref().unwrap().parameters;
    for (topology, workers, servers) in [("1x2-ar", 2u64, 0usize), ("1x4-ar", 4, 0), ("1x2-ps2", 2, 2)] {
        let r = result(dir.path(), topology);
        assert_eq!(r.outcome, RunOutcome::Completed, "{topology}");
        let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
        // Same global batch, same initial weights: the same losses up to the order of float sums.
        for (a, b) in [(l.first.unwrap(), first), (l.last.unwrap(), last)] {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{topology}: {a} vs {b} (one worker)");
        }
        if servers == 0 {
            crate::common::trains_like::assert_trains_like(&single, &r, 1e-4, topology, &[]);
        } else {
            // The servers step with the gradient: the workers never see the mean they step with.
            assert_eq!(r.metrics.as_ref().unwrap().gradient_norm, None, "{topology}");
        }
        let d = r.distributed.unwrap();
        assert_eq!((d.world_size as u64, d.parameter_servers), (workers, servers), "{topology}");
        assert_eq!(d.engine, "mpi");
        assert_eq!(d.hosts.len(), workers as usize + servers);
        let s = 4 * params;
        assert_eq!(d.gradient_bytes, s, "{topology}: fp32 gradients of every parameter");
        let expected = if servers > 0 { s } else { 2 * (workers - 1) * s / workers };
        assert_eq!(d.bytes_sent_per_step, expected, "{topology}");
        assert_eq!(d.ranks.len(), workers as usize);
        assert!(d.weights_digest.is_some(), "{topology}");
        assert_eq!(d.weights_identical, Some(true), "{topology}: every worker ends with the same weights, bit for bit");
    }
}

/// A small decoder fine-tuned with LoRA (rank 4 on q and v: 4 adapters of 4 x (32 + 32) = 1,024 trained
/// parameters beside the frozen base), one worker, and two workers under all-reduce, ZeRO-1 and ZeRO-2.
const LORA_SPEC: &str = r#"
version = 1
name = "dplora"
[model]
family = "gpt"
layers = 2
d_model = 32
heads = 4
vocab = 50
seq_len = 8
[training]
optimizer = { kind = "sgd", lr = 0.05, momentum = 0.9 }
lora = { rank = 4, alpha = 8.0, targets = ["q", "v"] }
[sweep]
batch_sizes = [8]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 2, strategy = "all-reduce" },
  { devices_per_node = 2, strategy = "zero-1" },
  { devices_per_node = 2, strategy = "zero-2" },
]
[topology]
backend = "tch"
device = "cpu"
[run]
warmup = 0
iterations = 6
timeout_s = 240
"#;

/// Runs the spec `text` saved as `NAME.toml` in `dir` (its name is `NAME`), and reads back the first repeat of
/// its run `NAME.b8.fp32.RUN` (RUN: the topology and any checkpointing token of the run id).
fn run_lora_spec<'d>(dir: &'d std::path::Path, name: &'d str, text: &str) -> impl Fn(&str) -> RunResult + 'd {
    std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", &format!("{name}.toml"), "--out", "out", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    move |run: &str| -> RunResult {
        let path = dir.join(format!("out/{name}/{name}.b8.fp32.{run}.r0.json"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }
}

#[test]
fn data_parallel_lora_reproduces_one_worker_and_exchanges_the_adapters_only() {
    let dir = tempfile::tempdir().unwrap();
    let read = run_lora_spec(dir.path(), "dplora", LORA_SPEC);
    let (single, pair) = (read("1x1"), read("1x2-ar"));
    let loss = |r: &RunResult| r.metrics.as_ref().unwrap().loss.clone().unwrap();
    let a = loss(&single);
    // ZeRO-3 gathers the blocks' weights again for the backward, so it needs full activation checkpointing:
    // its own spec, one worker against two.
    let zero3 = LORA_SPEC
        .replace("name = \"dplora\"", "name = \"dplora3\"")
        .replace("[training]\n", "[training]\nactivation_checkpointing = \"full\"\n")
        .replace("  { devices_per_node = 2, strategy = \"all-reduce\" },\n", "")
        .replace("  { devices_per_node = 2, strategy = \"zero-1\" },\n", "")
        .replace("strategy = \"zero-2\"", "strategy = \"zero-3\"");
    let read3 = run_lora_spec(dir.path(), "dplora3", &zero3);
    let (single3, b3) = (loss(&read3("1x1.ckpt-full")), loss(&read3("1x2-z3.ckpt-full")));
    assert!((single3.last.unwrap() - b3.last.unwrap()).abs() <= 1e-4 * single3.last.unwrap().abs().max(1.0));
    // All-reduce and ZeRO-1/2 (which shard the adapters' gradients and optimizer state only) train what one
    // worker trains.
    for (id, other) in [("1x2-ar", &pair), ("1x2-z1", &read("1x2-z1")), ("1x2-z2", &read("1x2-z2"))] {
        let b = loss(other);
        for (x, y) in [(a.first.unwrap(), b.first.unwrap()), (a.last.unwrap(), b.last.unwrap())] {
            assert!((x - y).abs() <= 1e-4 * x.abs().max(1.0), "{x} vs {y} ({id} against one worker)");
        }
    }
    let d = pair.distributed.unwrap();
    assert_eq!(d.gradient_bytes, 4 * 1024, "fp32 gradients of the adapters, none of the frozen base");
    assert_eq!(d.bytes_sent_per_step, 4 * 1024, "a ring of two sends 2 (W-1)/W of them");
    assert!(single.analysis.unwrap().parameters > 20 * 1024, "the frozen base is counted as parameters");
}

/// [`SPEC`] with only its two-worker all-reduce topology, at `batch_sizes` (a TOML array).
fn pair_spec(batch_sizes: &str) -> String {
    SPEC.replace("batch_sizes = [16]", &format!("batch_sizes = {batch_sizes}"))
        .replace("topologies = [\n  { devices_per_node = 1, strategy = \"single\" },\n", "topologies = [\n")
        .replace("  { devices_per_node = 4, strategy = \"all-reduce\" },\n", "")
        .replace("  { devices_per_node = 2, strategy = \"parameter-server\", parameter_servers = 2 },\n", "")
}

#[test]
fn a_rank_that_dies_fails_its_run_and_the_sweep_goes_on_without_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let spec = pair_spec("[8]").replace("iterations = 12", "iterations = 20000\nrepeats = 2");
    std::fs::write(dir.path().join("dp.toml"), spec).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", "dp.toml", "--out", "out", "--quiet", "--set", "run.iterations=300"])
        .args(["--test-hooks", r#"{"abort_rank": [0, 1, 0.5]}"#])
        .args(["--set", "run.time_budget_s=3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lost: RunResult =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/dp/dp.b8.fp32.1x2-ar.r0.json")).unwrap())
            .unwrap();
    let RunOutcome::Failed { message } = &lost.outcome else { panic!("{:?}\n{stderr}", lost.outcome) };
    assert!(message.contains("rank 1"), "the failed rank is named: {message}");
    let next: RunResult =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/dp/dp.b8.fp32.1x2-ar.r1.json")).unwrap())
            .unwrap();
    assert_eq!(next.outcome, RunOutcome::Completed, "the sweep goes on: {stderr}");
    // The lost run still records the device it was placed on, as the completed one does.
    let (placed, used) = (lost.environment.device.as_ref(), next.environment.device.as_ref());
    assert!(placed.is_some(), "the lost run records its device: {stderr}");
    assert_eq!(placed.map(|d| (&d.selector, &d.name)), used.map(|d| (&d.selector, &d.name)));
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

#[test]
fn another_ranks_out_of_memory_makes_the_run_out_of_memory_and_skips_larger_batches() {
    let dir = tempfile::tempdir().unwrap();
    let spec = pair_spec("[8, 16]");
    std::fs::write(dir.path().join("dp.toml"), spec).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", "dp.toml", "--out", "out", "--quiet"])
        .args(["--test-hooks", r#"{"oom_rank": [0, 1]}"#])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let read = |batch: usize| -> RunResult {
        let path = dir.path().join(format!("out/dp/dp.b{batch}.fp32.1x2-ar.r0.json"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}\n{stderr}"))).unwrap()
    };
    // Rank 1 ran out of memory and said so in a typed line; rank 0 never finished: the run is out of memory.
    let oom = read(8);
    let RunOutcome::OutOfMemory { batch_size, message } = &oom.outcome else { panic!("{:?}\n{stderr}", oom.outcome) };
    assert_eq!(*batch_size, 8);
    assert!(message.starts_with("trainbench rank 1: run `dp.b8."), "{message}");
    assert!(message.contains("out of memory on rank 1 (test hook)"), "{message}");
    // The larger batch of the same family is skipped, as after one worker's out of memory.
    let larger = read(16);
    assert!(matches!(larger.outcome, RunOutcome::Skipped { .. }), "{:?}\n{stderr}", larger.outcome);
    assert!(stderr.contains("trainbench rank 1: run `dp.b8."), "the line for people stays: {stderr}");
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

/// Processes whose working folder is `dir` (the ranks and the launcher a test started there).
pub(crate) fn processes_in(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == dir))
        .map(|e| std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default().replace('\0', " "))
        .collect()
}

/// `mpirun` with the options a container and a root user need, as a user would type it on one node.
pub(crate) fn mpirun(ranks: usize, dir: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new("mpirun");
    c.current_dir(dir).args(["-n", &ranks.to_string(), "--oversubscribe", "--bind-to", "none"]);
    c.args(["--mca", "btl_vader_single_copy_mechanism", "none", "--allow-run-as-root"]);
    c.arg(assert_cmd::cargo::cargo_bin("trainbench"));
    c
}

#[test]
fn mpirun_by_hand_runs_the_spec_on_every_rank_and_refuses_a_world_of_another_size() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC
        .replace("  { devices_per_node = 1, strategy = \"single\" },\n", "")
        .replace("  { devices_per_node = 4, strategy = \"all-reduce\" },\n", "")
        .replace("  { devices_per_node = 2, strategy = \"parameter-server\", parameter_servers = 2 },\n", "");
    std::fs::write(dir.path().join("dp.toml"), spec).unwrap();
    let out = mpirun(2, dir.path()).args(["run", "dp.toml", "--out", "out", "--quiet"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result(dir.path(), "1x2-ar");
    assert_eq!(r.outcome, RunOutcome::Completed);
    let d = r.distributed.unwrap();
    assert_eq!((d.world_size, d.launcher.as_str()), (2, "mpirun (Open MPI)"));
    assert_eq!(d.weights_identical, Some(true));

    let out = mpirun(3, dir.path()).args(["run", "dp.toml", "--out", "out3", "--quiet"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a world of 3 for a run of 2 workers is refused");
    assert!(stderr.contains("started 3 ranks") && stderr.contains("needs 2"), "{stderr}");
    assert!(!dir.path().join("out3/dp").exists(), "nothing ran");
}

/// The spec's data-parallel runs on CUDA, with `workers` workers.
fn cuda_spec(workers: usize) -> String {
    SPEC.replace("device = \"cpu\"", "device = \"cuda\"")
        .replace("  { devices_per_node = 1, strategy = \"single\" },\n", "")
        .replace("  { devices_per_node = 4, strategy = \"all-reduce\" },\n", "")
        .replace("  { devices_per_node = 2, strategy = \"parameter-server\", parameter_servers = 2 },\n", "")
        .replace(
            "devices_per_node = 2, strategy = \"all-reduce\"",
            &format!("devices_per_node = {workers}, strategy = \"all-reduce\""),
        )
}

#[test]
fn cuda_ranks_without_a_gpu_are_refused_before_anything_starts_exit_2() {
    let Some(why) = trainbench_backend_tch::nccl::refusal() else {
        return; // A GPU machine with the engine runs them (scripts/gpu_check.sh).
    };
    let dir = tempfile::tempdir().unwrap();
    // World size 2, and world size 1 with all-reduce (NCCL with one rank).
    for workers in [2, 1] {
        let spec = cuda_spec(workers);
        assert!(spec.contains(&format!("devices_per_node = {workers}, strategy = \"all-reduce\"")), "{spec}");
        assert!(spec.contains("device = \"cuda\""), "{spec}");
        std::fs::write(dir.path().join("dpc.toml"), spec).unwrap();
        for args in [vec!["plan", "dpc.toml"], vec!["run", "dpc.toml", "--out", "out", "--quiet"]] {
            let out = Command::cargo_bin("trainbench").unwrap().current_dir(dir.path()).args(&args).output().unwrap();
            // `plan` prints its diagnostics on stdout, `run` on stderr.
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(2), "{args:?} with {workers} worker(s): {text}");
            assert!(text.contains("NCCL engine") && text.contains(&why), "{args:?}: {text}");
        }
        assert!(!dir.path().join("out").exists(), "nothing ran");
    }
    // `torchrun --nproc-per-node 2 trainbench run` on this machine: every rank refuses the same way.
    std::fs::write(dir.path().join("dpc.toml"), cuda_spec(2)).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", "1")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", "29500")
        .args(["run", "dpc.toml", "--out", "out", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn cuda_meshes_without_a_gpu_are_refused_for_the_gpu_not_for_the_layout() {
    // Tensor and expert parallelism on CUDA ranks split NCCL groups; without a GPU the refusal is the engine's
    // (the same as a data-parallel CUDA run's), never the layout's.
    let Some(why) = trainbench_backend_tch::nccl::refusal() else {
        return; // A GPU machine with two GPUs runs them (scripts/gpu_check.sh's `mesh` step).
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let cuda = ["topology.device=\"cuda\"", "topology.devices_per_node=2", "topology.strategy=\"all-reduce\""];
    for (spec, layout) in [
        ("specs/llm/smoke_gpt.toml", "topology.tensor_parallel=2"),
        ("specs/llm/smoke_moe.toml", "topology.expert_parallel=2"),
    ] {
        let mut args = vec!["run".to_string(), root.join(spec).display().to_string(), "--out".into(), "out".into()];
        for set in cuda.iter().chain([&layout]) {
            args.extend(["--set".to_string(), set.to_string()]);
        }
        args.push("--quiet".into());
        let out = Command::cargo_bin("trainbench").unwrap().current_dir(dir.path()).args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec} {layout}: {text}");
        assert!(text.contains("NCCL engine") && text.contains(&why), "{spec} {layout}: {text}");
        assert!(!text.contains("per-dimension") && !text.contains("cannot split"), "{spec} {layout}: {text}");
        assert!(!dir.path().join("out").exists(), "nothing ran");
    }
}

#[test]
fn a_rank_asked_to_join_an_nccl_group_without_a_gpu_says_why_and_exits() {
    if trainbench_backend_tch::nccl::refusal().is_none() {
        return; // The rank would join for real.
    }
    let dir = tempfile::tempdir().unwrap();
    let rank = |env: &[(&str, &str)]| {
        let mut c = Command::cargo_bin("trainbench").unwrap();
        c.current_dir(dir.path()).args(["worker", "--ranks", "--transport", "nccl", "--comm-timeout-s", "5"]);
        c.env_remove("MASTER_PORT");
        for (k, v) in env {
            c.env(k, v);
        }
        c.write_stdin("").output().unwrap()
    };
    let torchrun = [("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")];
    let out = rank(&[torchrun.as_slice(), &[("MASTER_PORT", "29500")]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "an error, not a crash: {stderr}");
    assert!(
        stderr.contains("nccl") && (stderr.contains("no CUDA device") || stderr.contains("no NCCL engine")),
        "{stderr}"
    );
    let out = rank(&torchrun);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("MASTER_PORT"), "the missing rendezvous variable is named: {stderr}");

    // trainbench's own launcher (what `trainbench run` starts for CUDA ranks): both ranks fail to join, the
    // launcher names the rank that ended, fails, and leaves nothing running.
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .args(["worker", "--launch", "2", "--transport", "nccl", "--comm-timeout-s", "5"])
        .write_stdin("")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("trainbench rank ") && stderr.contains("the process ended"), "{stderr}");
    assert!(stderr.contains("(trainbench run): nccl:"), "each rank knows its launcher and engine: {stderr}");
    let left = processes_in(dir.path());
    assert!(left.is_empty(), "no rank is left running: {left:?}");
}
