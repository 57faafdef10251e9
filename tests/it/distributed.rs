//! Data-parallel runs through MPI on CPU ranks (features `tch` and `mpi`): all-reduce at world sizes 2 and 4
//! and parameter servers reproduce one worker on the same global batch, and the bytes each worker sends per
//! step are the ring and parameter-server formulas.
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
    for (topology, workers, servers) in [("1x2-ar-pcie", 2u64, 0usize), ("1x4", 4, 0), ("1x2-ps-pcie", 2, 2)] {
        let r = result(dir.path(), topology);
        assert_eq!(r.outcome, RunOutcome::Completed, "{topology}");
        let l = r.metrics.as_ref().unwrap().loss.clone().unwrap();
        // Same global batch, same initial weights: the same losses up to the order of float sums.
        for (a, b) in [(l.first.unwrap(), first), (l.last.unwrap(), last)] {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{topology}: {a} vs {b} (one worker)");
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
    }
}
