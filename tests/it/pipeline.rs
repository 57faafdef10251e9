//! Pipeline-parallel runs through MPI on CPU ranks (features `tch` and `mpi`): the smoke GPT cut into 2 stages
//! under GPipe, 1F1B and interleaved 1F1B (2 virtual stages) trains what one rank trains on the same global
//! batch (losses within 1e-4, relative), ends with the weights of one rank accumulating the same micro-batches
//! (bit for bit), sends per step the bytes `predict` says, and records its bubble beside the formula and its
//! memory per stage. A rank killed mid-step fails the run naming it, with no process left. A mixture of experts
//! cut into 2 stages trains what one worker accumulating the same micro-batches trains.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

/// The smoke GPT (specs/llm/smoke_gpt.toml), a global batch of 8 in 4 micro-batches, one rank and a pipeline
/// of 2 (`PIPELINE` is replaced by the pipeline keys of `[topology]`), one intra-op thread per rank.
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
  { devices_per_node = 2, strategy = "all-reduce", pipeline_parallel = 2 },
]
[topology]
backend = "tch"
device = "cpu"
microbatches = 4
PIPELINE
[run]
warmup = 0
iterations = 10
timeout_s = 600
cpu_threads = 1
"#
);

/// Every result of spec `name` under `dir/out`.
fn results(dir: &std::path::Path, name: &str) -> Vec<RunResult> {
    let mut out: Vec<RunResult> = std::fs::read_dir(dir.join("out").join(name))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.ends_with("index.json"))
        .filter_map(|p| serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).ok())
        .collect();
    out.sort_by_key(|r: &RunResult| r.plan.topology.mesh.pipeline_parallel);
    out
}

/// Run spec `text` as `name.toml` in `dir`.
fn run(dir: &std::path::Path, name: &str, text: &str, extra: &[&str]) -> std::process::Output {
    std::fs::write(dir.join(format!("{name}.toml")), text.replace("NAME", name)).unwrap();
    Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", &format!("{name}.toml"), "--out", "out", "--quiet"])
        .args(extra)
        .output()
        .unwrap()
}

fn loss(r: &RunResult) -> (f64, f64) {
    let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
    (l.first.unwrap(), l.last.unwrap())
}

/// The pipeline bytes per step `predict` gives for the pipelined configuration of spec `name`.
fn predicted_pipeline_bytes(dir: &std::path::Path, name: &str) -> f64 {
    predicted_bytes(dir, name, "pipeline")
}

/// The mesh block `predict` gives for the pipelined configuration of spec `name`.
fn predicted_mesh(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let json = crate::common::spec_run::predict_json(dir, &format!("{name}.toml"));
    json["predictions"].as_array().unwrap().iter().find_map(|e| e.get("mesh").cloned()).unwrap()
}

/// The bytes per step along `dimension` `predict` gives for the pipelined configuration of spec `name`.
fn predicted_bytes(dir: &std::path::Path, name: &str, dimension: &str) -> f64 {
    let rows = predicted_mesh(dir, name)["bytes"].as_array().unwrap().clone();
    rows.iter().filter(|r| r["dimension"] == dimension).map(|r| r["bytes_per_rank"].as_f64().unwrap()).sum()
}

#[test]
fn pipelines_train_what_one_rank_trains_under_every_schedule() {
    let dir = tempfile::tempdir().unwrap();
    // One worker accumulating the same 4 micro-batches of 2 (the pipeline's order of sums): its weights digest
    // is the reference for the pipeline's, bit for bit.
    let accumulated = SPEC
        .replace("batch_sizes = [8]", "batch_sizes = [2]")
        .replace("seed = 0\n", "seed = 0\ngrad_accumulation = 4\n")
        .replace(
            "  { devices_per_node = 1, strategy = \"single\" },\n  { devices_per_node = 2, strategy = \"all-reduce\", pipeline_parallel = 2 },\n",
            "  { devices_per_node = 1, strategy = \"all-reduce\" },\n",
        )
        .replace("microbatches = 4\nPIPELINE\n", "");
    let out = run(dir.path(), "acc", &accumulated, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reference = results(dir.path(), "acc").remove(0);
    let digest = reference.distributed.as_ref().and_then(|d| d.weights_digest.clone());
    for (name, keys) in [
        ("gpipe", "pipeline_schedule = \"gpipe\""),
        ("onefoneb", "pipeline_schedule = \"1f1b\""),
        ("interleaved", "pipeline_schedule = \"interleaved-1f1b\"\nvirtual_stages = 2"),
        // A given cut: one of the four blocks on stage 0 (balanced by FLOPs, the head's weight puts three there).
        ("given", "pipeline_schedule = \"1f1b\"\npipeline_layers = [1, 3]"),
    ] {
        let out = run(dir.path(), name, &SPEC.replace("PIPELINE", keys), &[]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let all = results(dir.path(), name);
        let (one, pp) = (&all[0], &all[1]);
        assert_eq!(pp.outcome, RunOutcome::Completed, "{name}");
        let (a, b) = (loss(one), loss(pp));
        for (x, y) in [(a.0, b.0), (a.1, b.1)] {
            assert!((x - y).abs() <= 1e-4 * x.abs(), "{name}: loss {y} on the pipeline, {x} on one rank");
        }
        assert!(b.1 < b.0, "{name}: the pipeline trains: {} -> {}", b.0, b.1);
        let d = pp.distributed.as_ref().unwrap();
        assert_eq!(d.weights_digest, digest, "{name}: the whole model's weights after 10 steps, bit for bit");
        crate::common::trains_like::assert_trains_like(one, pp, 1e-4, name, &[]);
        let p = d.pipeline.as_ref().unwrap();
        assert_eq!(p.per_stage.len(), 2);
        let v = if name == "interleaved" { 2 } else { 1 };
        assert_eq!(p.per_stage[0].chunks.len(), v, "{name}");
        let predicted = predicted_pipeline_bytes(dir.path(), name);
        assert_eq!(p.bytes_per_step as f64, predicted, "{name}: measured bytes against predict's");
        // The cut the run recorded is the one given, and predict prices the same cut.
        let cut: Vec<[usize; 2]> = pp.analysis.as_ref().unwrap().pipeline_stages.iter().map(|s| s.blocks).collect();
        let stage0_weights = predicted_mesh(dir.path(), name)["stages"][0]["weights_bytes"].as_f64().unwrap();
        if name == "given" {
            assert_eq!(cut, vec![[0, 1], [1, 4]], "{name}");
            assert_eq!(pp.plan.pipeline_layers, vec![1, 3]);
        } else {
            let balanced =
                if name == "interleaved" { vec![[0, 1], [1, 2], [2, 3], [3, 4]] } else { vec![[0, 3], [3, 4]] };
            assert_eq!(cut, balanced, "{name}: balanced by FLOPs");
            assert!(pp.plan.pipeline_layers.is_empty());
        }
        assert_eq!(p.per_stage[0].memory.weights as f64, stage0_weights, "{name}: stage 0's weights against predict's");
        // The per-stage table: memory held (the headline is the largest) and the bubble beside its formula.
        assert!(p.per_stage.iter().all(|s| s.held_bytes <= p.max_memory_bytes && s.memory.weights > 0));
        // The run's own cut replayed: at least the formula's bubble (its chunks are not equal), each stage's share.
        let replayed = p.bubble_replayed.unwrap();
        assert!(replayed >= p.bubble_formula - 1e-9 && replayed < 1.0, "{name}: replayed {replayed}");
        assert!(p.per_stage.iter().all(|s| s.idle_replayed.is_some()), "{name}");
        println!(
            "{name}: loss {:.6} -> {:.6} (one rank {:.6} -> {:.6}); bubble measured {:.3}, formula {} = {:.3}; \
             {} bytes/step on the pipeline; held per stage {:?} (max stage {})",
            b.0,
            b.1,
            a.0,
            a.1,
            p.bubble.unwrap_or(f64::NAN),
            p.formula,
            p.bubble_formula,
            p.bytes_per_step,
            p.per_stage
                .iter()
                .map(|s| (s.memory.weights, s.memory.gradients, s.memory.optimizer_state, s.activations))
                .collect::<Vec<_>>(),
            p.max_memory_stage
        );
    }
    let left = crate::distributed::processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

#[test]
fn a_stage_that_dies_fails_its_run_naming_the_rank_without_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC
        .replace("PIPELINE", "pipeline_schedule = \"1f1b\"")
        .replace("  { devices_per_node = 1, strategy = \"single\" },\n", "")
        .replace("iterations = 10", "iterations = 20000\nrepeats = 2");
    let hooks = ["--test-hooks", r#"{"abort_rank": [0, 1, 0.5]}"#, "--set", "run.time_budget_s=3"];
    let out = run(dir.path(), "dies", &spec, &hooks);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all: Vec<RunResult> = results(dir.path(), "dies");
    let lost = all.iter().find(|r| r.plan.repeat == 0).unwrap_or_else(|| panic!("{stderr}"));
    let RunOutcome::Failed { message } = &lost.outcome else { panic!("{:?}\n{stderr}", lost.outcome) };
    assert!(message.contains("rank 1"), "the failed rank is named: {message}");
    let next = all.iter().find(|r| r.plan.repeat == 1).unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(next.outcome, RunOutcome::Completed, "the sweep goes on: {stderr}");
    let left = crate::distributed::processes_in(dir.path());
    assert!(left.is_empty(), "no rank or launcher of this test is left running: {left:?}");
}

#[test]
fn what_a_pipeline_cannot_run_is_refused_by_run_and_priced_by_predict() {
    let dir = tempfile::tempdir().unwrap();
    let spec =
        SPEC.replace("PIPELINE", "").replace("precision = \"fp32\"", "precision = \"bf16\"").replace("NAME", "no");
    std::fs::write(dir.path().join("no.toml"), spec).unwrap();
    let trainbench =
        |args: &[&str]| Command::cargo_bin("trainbench").unwrap().current_dir(dir.path()).args(args).output();
    let out = trainbench(&["run", "no.toml", "--out", "out", "--quiet"]).unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("pipeline-parallel runs do not support bf16"), "{text}");
    let out = trainbench(&["run", "no.toml", "--out", "out", "--quiet", "--backend", "mock"]).unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && text.contains("the mock backend runs no pipeline stages"), "{text}");
    let single = dir.path().join("single.toml");
    let fp32 = std::fs::read_to_string(dir.path().join("no.toml")).unwrap().replace("\"bf16\"", "\"fp32\"");
    std::fs::write(
        &single,
        fp32.replace("strategy = \"all-reduce\", pipeline_parallel", "strategy = \"single\", pipeline_parallel"),
    )
    .unwrap();
    let out = trainbench(&["run", "single.toml", "--out", "out", "--quiet"]).unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && text.contains("not `single`"), "{text}");
    assert!(!dir.path().join("out").exists(), "nothing ran");
    let out = trainbench(&["predict", "no.toml", "--hardware", "h100"]).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn two_replicas_of_a_two_stage_pipeline_train_what_one_rank_trains() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC
        .replace("PIPELINE", "pipeline_schedule = \"1f1b\"")
        .replace("microbatches = 4", "microbatches = 2")
        .replace("devices_per_node = 2, strategy", "devices_per_node = 4, strategy");
    let out = run(dir.path(), "dpp", &spec, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = results(dir.path(), "dpp");
    let (one, pp) = (&all[0], &all[1]);
    let (a, b) = (loss(one), loss(pp));
    for (x, y) in [(a.0, b.0), (a.1, b.1)] {
        assert!((x - y).abs() <= 1e-4 * x.abs(), "loss {y} on DP2 x PP2, {x} on one rank");
    }
    let d = pp.distributed.as_ref().unwrap();
    assert_eq!(d.world_size, 4);
    assert_eq!(d.weights_identical, Some(true), "both replicas end with the same whole model");
    crate::common::trains_like::assert_trains_like(one, pp, 1e-4, "DP2 x PP2", &[]);
    let p = d.pipeline.as_ref().unwrap();
    assert_eq!(p.per_stage.len(), 4, "two replicas of two stages");
    // The stages' gradient averages over their replicas are the data dimension's bytes: the busiest stage's.
    let data: u64 = d.mesh_bytes.iter().filter(|m| m.dimension.name() == "data").map(|m| m.bytes_per_rank).sum();
    let predicted = predicted_bytes(dir.path(), "dpp", "data");
    assert!(data > 0 && (data as f64 - predicted).abs() <= 1.0, "data bytes: measured {data}, predicted {predicted}");
    println!(
        "DP2 x PP2 1f1b: loss {:.6} -> {:.6} (one rank {:.6} -> {:.6}); bubble {:.3} beside {:.3}",
        b.0,
        b.1,
        a.0,
        a.1,
        p.bubble.unwrap_or(f64::NAN),
        p.bubble_formula
    );
}

/// A mixture of experts cut into 2 stages (1F1B, 4 micro-batches of 2; 8 experts, top-2, capacity 1.25, aux loss
/// 0.01) trains what one worker accumulating the same 4 micro-batches trains: the load-balancing losses of the
/// first stage's layers trained from that stage and counted in the step's loss, the same tokens dropped, and
/// every stage's layers in the routing tally.
#[test]
fn a_mixture_of_experts_pipeline_trains_what_one_worker_accumulating_its_micro_batches_trains() {
    let dir = tempfile::tempdir().unwrap();
    let moe = SPEC.replace(
        "[training]\n",
        "[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn = 256\ncapacity_factor = 1.25\naux_loss = 0.01\n[training]\n",
    );
    let accumulated = moe
        .replace("batch_sizes = [8]", "batch_sizes = [2]")
        .replace("seed = 0\n", "seed = 0\ngrad_accumulation = 4\n")
        .replace(
            "  { devices_per_node = 1, strategy = \"single\" },\n  { devices_per_node = 2, strategy = \"all-reduce\", pipeline_parallel = 2 },\n",
            "  { devices_per_node = 1, strategy = \"single\" },\n",
        )
        .replace("microbatches = 4\nPIPELINE\n", "");
    let out = run(dir.path(), "acc", &accumulated, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let one = results(dir.path(), "acc").remove(0);
    let pipelined = moe
        .replace("PIPELINE", "pipeline_schedule = \"1f1b\"")
        .replace("  { devices_per_node = 1, strategy = \"single\" },\n", "");
    let out = run(dir.path(), "moe", &pipelined, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pp = results(dir.path(), "moe").remove(0);
    assert_eq!(pp.outcome, RunOutcome::Completed);
    let (a, b) = (loss(&one), loss(&pp));
    for (x, y) in [(a.0, b.0), (a.1, b.1)] {
        assert!((x - y).abs() <= 1e-4 * x.abs(), "loss {y} on the pipeline, {x} on one worker");
    }
    assert!(b.1 < b.0, "the pipeline trains: {} -> {}", b.0, b.1);
    crate::common::trains_like::assert_trains_like(&one, &pp, 1e-4, "MoE PP2", &[]);
    let p = pp.distributed.as_ref().unwrap().pipeline.as_ref().unwrap();
    assert_eq!(
        p.bytes_per_step as f64,
        predicted_pipeline_bytes(dir.path(), "moe"),
        "measured bytes against predict's"
    );
    // Every stage's layers are tallied, with the same tokens per expert and the same drops as one worker's.
    assert_eq!(pp.metrics.as_ref().unwrap().expert_load.as_ref().map(|l| l.layers.len()), Some(4));
    crate::common::expert_load::assert_routes_like(&one, &pp, "MoE PP2");
    println!("MoE PP2 1F1B: loss {:.6} -> {:.6} (one worker {:.6} -> {:.6})", b.0, b.1, a.0, a.1);
    // Expert parallelism beside the pipeline: two replicas of the two stages, each stage's 8 experts sharded
    // over its replicas (4 each), tokens dispatched by all-to-all, the capacity the global micro-batch's.
    let sharded = pipelined
        .replace("pipeline_parallel = 2 }", "pipeline_parallel = 2, expert_parallel = 2 }")
        .replace("devices_per_node = 2, strategy", "devices_per_node = 4, strategy");
    let out = run(dir.path(), "moe-ep", &sharded, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ep = results(dir.path(), "moe-ep").remove(0);
    assert_eq!(ep.outcome, RunOutcome::Completed);
    let c = loss(&ep);
    for (x, y) in [(a.0, c.0), (a.1, c.1)] {
        assert!((x - y).abs() <= 1e-4 * x.abs(), "loss {y} with EP2 x DP2 x PP2, {x} on one worker");
    }
    crate::common::trains_like::assert_trains_like(&one, &ep, 1e-4, "MoE EP2 x DP2 x PP2", &[]);
    let d = ep.distributed.as_ref().unwrap();
    assert_eq!(d.weights_identical, Some(true), "every rank gathers the same whole model");
    let traffic = d.expert_parallel.as_ref().unwrap();
    let json = crate::common::spec_run::predict_json(dir.path(), "moe-ep.toml");
    let rows = json["predictions"][0]["mesh"]["bytes"].as_array().unwrap().clone();
    let predicted = rows.iter().find(|r| r["collective"] == "all-to-all").unwrap()["bytes_per_rank"].as_f64().unwrap();
    // `predict` prices every assignment dispatched; at capacity 1.25 a few are dropped and never sent.
    let measured = traffic.all_to_all_bytes_per_step as f64;
    assert!(
        measured <= predicted && measured >= 0.99 * predicted,
        "the busiest stage's all-to-alls: {measured}, {predicted}"
    );
    // Each stage's load is its replicas' together: the global batch's, as one worker's.
    crate::common::expert_load::assert_routes_like(&one, &ep, "MoE EP2 x DP2 x PP2");
    println!(
        "MoE EP2 x DP2 x PP2: loss {:.6} -> {:.6}; all-to-all {} B per step per rank",
        c.0, c.1, traffic.all_to_all_bytes_per_step
    );
    // And a tensor degree inside each stage (8 ranks): the MoE whole on both ranks of a tensor group, the experts
    // over the replicas of each tensor index; the norms and the digest gather the experts over both groups.
    let meshed = sharded
        .replace("expert_parallel = 2 }", "expert_parallel = 2, tensor_parallel = 2 }")
        .replace("devices_per_node = 4, strategy", "devices_per_node = 8, strategy");
    let out = run(dir.path(), "moe-eptp", &meshed, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = results(dir.path(), "moe-eptp").remove(0);
    assert_eq!(all.outcome, RunOutcome::Completed);
    let e = loss(&all);
    for (x, y) in [(a.0, e.0), (a.1, e.1)] {
        assert!((x - y).abs() <= 1e-4 * x.abs(), "loss {y} with EP2 x TP2 x PP2, {x} on one worker");
    }
    crate::common::trains_like::assert_trains_like(&one, &all, 1e-4, "MoE EP2 x TP2 x PP2", &[]);
    crate::common::expert_load::assert_routes_like(&one, &all, "MoE EP2 x TP2 x PP2");
    assert_eq!(all.distributed.as_ref().unwrap().weights_identical, Some(true));
    println!("MoE EP2 x TP2 x PP2: loss {:.6} -> {:.6}", e.0, e.1);
}
