//! Expert parallelism over MPI on CPU ranks (features `tch` and `mpi`): the smoke MoE decoder
//! (specs/llm/smoke_moe.toml) trained by one rank, by 2 ranks at expert_parallel 2, and by 4 ranks at
//! expert_parallel 2 x data parallel 2 gives the same losses on the same global batch (relative 1e-4), dropless
//! and with the spec's capacity factor (where the same assignments must be dropped for the losses to agree);
//! every rank ends with the same whole model; the all-to-all bytes per step are what `predict` prices.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

/// smoke_moe.toml with a global batch of 8, ten measured steps, and the three topologies.
fn spec(name: &str, dropless: bool) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/llm/smoke_moe.toml")).unwrap();
    let mut text = text
        .replace("name = \"llm-smoke-moe\"", &format!("name = \"{name}\""))
        .replace(
            "batch_sizes = [4]",
            "batch_sizes = [8]\ntopologies = [\n  { devices_per_node = 1, strategy = \"single\" },\n  \
             { devices_per_node = 2, strategy = \"all-reduce\", expert_parallel = 2 },\n  \
             { devices_per_node = 4, strategy = \"all-reduce\", expert_parallel = 2 },\n]",
        )
        .replace("warmup = 3\niterations = 10", "warmup = 0\niterations = 10\ntimeout_s = 300");
    if dropless {
        text = text.replace("capacity_factor = 1.25\n", "");
    }
    assert!(text.contains("expert_parallel = 2") && text.contains("iterations = 10\ntimeout_s"), "{text}");
    text
}

fn run<'d>(dir: &'d std::path::Path, name: &'d str, dropless: bool) -> impl Fn(&str) -> RunResult + 'd {
    std::fs::write(dir.join(format!("{name}.toml")), spec(name, dropless)).unwrap();
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", &format!("{name}.toml"), "--out", "out", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let name = name.to_string();
    move |topology: &str| -> RunResult {
        let path = dir.join(format!("out/{name}/{name}.b8.fp32.{topology}.r0.json"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }
}

fn losses(r: &RunResult) -> (f64, f64) {
    let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
    (l.first.unwrap(), l.last.unwrap())
}

fn check(dropless: bool) {
    let dir = tempfile::tempdir().unwrap();
    let name = if dropless { "epdropless" } else { "epcapacity" };
    let read = run(dir.path(), name, dropless);
    let (first, last) = losses(&read("1x1"));
    assert!(last < first, "one rank trains: {first} -> {last}");
    for (topology, world) in [("1x2-ar-ep2", 2usize), ("1x4-ar-ep2", 4)] {
        let r = read(topology);
        assert_eq!(r.outcome, RunOutcome::Completed, "{topology}");
        let (a, b) = losses(&r);
        for (got, want) in [(a, first), (b, last)] {
            assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "{topology}: {got} vs {want} (one rank)");
        }
        crate::common::trains_like::assert_trains_like(&read("1x1"), &r, 1e-4, topology, &[]);
        let d = r.distributed.unwrap();
        assert_eq!((d.world_size, d.engine.as_str()), (world, "mpi"), "{topology}");
        assert_eq!(d.weights_identical, Some(true), "{topology}: every rank digests the same whole model");
        let ep = d.expert_parallel.unwrap();
        assert_eq!(ep.degree, 2);
        if dropless {
            // 4 MoE layers; per rank and step: 8 / world samples of 128 tokens, top-2, d_model 256, fp32, four
            // passes, and 8 counts per layer.
            let tokens = 8 / world as u64 * 128;
            assert_eq!(ep.all_to_all_bytes_per_step, 4 * (4 * tokens * 2 * 256 * 4 + 8 * 4), "{topology}");
            assert_eq!(ep.all_to_all_calls_per_step, 4 * 5, "{topology}");
            assert_eq!(predicted_all_to_all(dir.path(), name, topology), ep.all_to_all_bytes_per_step as f64);
        }
        // Each rank holds half the experts: 4 layers x 3 tensors x 8 x 256 x 256 expert weights, half of them
        // away, fp32, weights + gradients + Adam's two moments.
        let ranks = d.ranks.iter().filter_map(|r| r.memory).collect::<Vec<_>>();
        assert_eq!(ranks.len(), world);
        let away = 4 * 3 * 4 * 256 * 256 * 4;
        let one = read("1x1").metrics.unwrap().memory.measured.weights_bytes;
        assert_eq!(ranks[0].weights + away, one, "{topology}: a rank's weights are one rank's minus half the experts");
        assert_eq!(
            ep.max_rank_state_bytes,
            ranks.iter().map(|m| m.weights + m.gradients + m.optimizer_state).max().unwrap()
        );
    }
}

/// The all-to-all bytes per rank and step `trainbench predict` prices for the spec's configuration `topology`.
fn predicted_all_to_all(dir: &std::path::Path, name: &str, topology: &str) -> f64 {
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["predict", &format!("{name}.toml"), "--hardware", "h100", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let config = format!("{name}.b8.fp32.{topology}");
    let entry = report["predictions"].as_array().unwrap().iter().find(|e| e["config"] == config.as_str()).unwrap();
    let bytes = entry["mesh"]["bytes"].as_array().unwrap();
    bytes.iter().find(|b| b["collective"] == "all-to-all").unwrap()["bytes_per_rank"].as_f64().unwrap()
}

#[test]
fn expert_parallel_runs_reproduce_one_rank_dropless() {
    check(true);
}

#[test]
fn expert_parallel_runs_reproduce_one_rank_with_a_capacity_factor() {
    check(false);
}
