//! Tensor parallelism of a tiny ViT through MPI on CPU ranks (features `tch` and `mpi`): TP=2, DP2 x TP2 and
//! TP=2 with sequence parallelism train what one rank trains on the same global batch, hold about half the
//! weights per rank (the stem, the norms and the biases added after the sums whole), and send per mesh dimension
//! what `predict` says.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

use crate::tensor_parallel::{losses, measured, predicted, read};

/// 16x16 images in 4x4 patches (16 + the class token), 2 layers of width 32 with 4 heads and MLP 64, 10
/// classes; 10 steps of batch 4 on one rank, a tensor group of two and two of them.
const SPEC: &str = concat!(
    r#"
version = 1
name = "tp"
"#,
    tiny_vit_model_and_training!(),
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

/// The tiny ViT's two fused query/key/value projection biases (tensors 7 and 19: patch weight and bias, class
/// token, positions, then twelve per block), whose key third has a zero gradient in exact arithmetic.
pub(crate) const QKV_BIASES: [usize; 2] = [7, 19];

/// `trainbench run tp.toml` in `dir` with the `extra` arguments (`--set`s), results under `out/`; panics naming
/// what the run printed when it fails.
fn run_spec(dir: &std::path::Path, extra: &[&str]) {
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["run", "tp.toml", "--out", "out", "--quiet", "--no-collectors"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn check_equal_to_one_rank(single: &RunResult, r: &RunResult, what: &str) {
    assert_eq!(r.outcome, RunOutcome::Completed, "{what}");
    let ((a0, a1), (b0, b1)) = (losses(single), losses(r));
    assert!(a1 != a0, "one rank trains: {a0} -> {a1}");
    for (x, y) in [(b0, a0), (b1, a1)] {
        assert!((x - y).abs() <= 1e-4 * y.abs(), "{what}: loss {x} vs {y} on one rank");
    }
    let d = r.distributed.as_ref().unwrap();
    assert_eq!(d.weights_identical, Some(true), "{what}: every rank gathers the same whole model");
    crate::common::trains_like::assert_trains_like(single, r, 1e-4, what, &QKV_BIASES);
}

#[test]
fn tensor_parallel_vit_runs_reproduce_one_rank_and_send_what_predict_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tp.toml"), SPEC).unwrap();
    run_spec(dir.path(), &[]);
    let single = read(dir.path(), "1x1");
    let (tp2, dp2tp2) = (read(dir.path(), "1x2-ar-no-overlap-tp2"), read(dir.path(), "1x4-ar-no-overlap-tp2"));
    check_equal_to_one_rank(&single, &tp2, "ViT TP=2");
    check_equal_to_one_rank(&single, &dp2tp2, "ViT DP2 x TP2");
    // Weights per rank: halved but for the patch convolution (3x4x4x32 + 32), the class token (32), the 17 x 32
    // positions, the 5 LayerNorms (2 x 32) and per layer out_proj's and mlp.3's biases (32 each).
    let replicated = 4 * ((3 * 16 * 32 + 32) + 32 + 17 * 32 + 5 * 64 + 2 * 2 * 32);
    let w1 = single.metrics.as_ref().unwrap().memory.measured.weights_bytes;
    let w2 = tp2.distributed.as_ref().unwrap().ranks[0].memory.unwrap().weights;
    assert_eq!(w2, (w1 - replicated) / 2 + replicated, "weights per rank");
    // Bytes per dimension: measured = predicted.
    for (r, topology) in [(&tp2, "1x2-ar-no-overlap-tp2"), (&dp2tp2, "1x4-ar-no-overlap-tp2")] {
        for (dimension, collective) in [("tensor", "all-reduce"), ("tensor", "all-gather"), ("data", "all-reduce")] {
            let m = measured(r, dimension, collective) as f64;
            let p = predicted(dir.path(), topology, &[], dimension, collective);
            assert!((m - p).abs() <= 1.0, "{topology} {dimension} {collective}: measured {m}, predicted {p}");
        }
    }
    // TP=2 per step, each all-reduce sending half its fp32 values: per layer four of the block activations
    // [4, 17, 32], the classifier's input [4, 32] once and the loss's two values per sample.
    let half = |values: u64| 2 * values * 4 / 2;
    assert_eq!(measured(&tp2, "tensor", "all-reduce"), half(2 * 4 * 4 * 17 * 32 + 4 * 32 + 2 * 4));
    assert!(measured(&dp2tp2, "data", "all-reduce") > 0);
}

#[test]
fn zero_3_along_the_data_dimension_of_a_tensor_parallel_vit_reproduces_one_rank() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tp.toml"), SPEC).unwrap();
    let set = [
        "--set",
        "training.activation_checkpointing=full",
        "--set",
        "sweep.topologies=[{devices_per_node=1, strategy=\"single\"}, {devices_per_node=4, strategy=\"zero-3\", tensor_parallel=2}]",
    ];
    run_spec(dir.path(), &set);
    let (single, z3) = (read(dir.path(), "1x1.ckpt-full"), read(dir.path(), "1x4-z3-no-overlap-tp2.ckpt-full"));
    check_equal_to_one_rank(&single, &z3, "ViT ZeRO-3 x TP2");
    for (dimension, collective) in
        [("tensor", "all-reduce"), ("tensor", "all-gather"), ("data", "all-gather"), ("data", "reduce-scatter")]
    {
        let m = measured(&z3, dimension, collective) as f64;
        let p = predicted(dir.path(), "1x4-z3-no-overlap-tp2.ckpt-full", &set, dimension, collective);
        assert!(m > 0.0 && (m - p).abs() <= 1.0, "{dimension} {collective}: measured {m}, predicted {p}");
    }
}

#[test]
fn sequence_parallel_vit_keeps_its_stem_whole_reproduces_one_rank_alone_and_in_a_pipeline() {
    // 12x12 images: 9 patches + the class token = 10 positions, 5 on each rank of the pair.
    let spec = SPEC
        .replace("image_size = 16", "image_size = 12")
        .replace("  { devices_per_node = 4, strategy = \"all-reduce\", tensor_parallel = 2 },\n", "");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tp.toml"), spec).unwrap();
    let sp_on = [
        "--set",
        "sweep.topologies=[{devices_per_node=2, strategy=\"all-reduce\", tensor_parallel=2}]",
        "--set",
        "topology.sequence_parallel=true",
    ];
    run_spec(dir.path(), &[]);
    run_spec(dir.path(), &sp_on);
    let single = read(dir.path(), "1x1");
    let (tp2, tp2_sp) = (read(dir.path(), "1x2-ar-no-overlap-tp2"), read(dir.path(), "1x2-ar-no-overlap-tp2-sp"));
    check_equal_to_one_rank(&single, &tp2, "ViT TP=2 (10 positions)");
    check_equal_to_one_rank(&single, &tp2_sp, "ViT TP=2 + SP");
    // Per step: per layer two reduce-scatters forward and two backward (the gathers') of [4, 10, 32]; the
    // final norm's shards gathered whole once more before the class-token slice.
    let half = |values: u64| values * 4 / 2;
    assert_eq!(measured(&tp2_sp, "tensor", "reduce-scatter"), half(2 * 4 * 4 * 10 * 32));
    assert_eq!(measured(&tp2_sp, "tensor", "all-gather"), half(2 * 4 * 4 * 10 * 32 + 4 * 10 * 32) + 4 * 4);
    for collective in ["all-gather", "reduce-scatter", "all-reduce"] {
        let m = measured(&tp2_sp, "tensor", collective) as f64;
        let p = predicted(dir.path(), "1x2-ar-no-overlap-tp2-sp", &sp_on, "tensor", collective);
        assert!(m > 0.0 && (m - p).abs() <= 1.0, "SP {collective}: measured {m}, predicted {p}");
    }
    // The same inside a pipeline: TP 2 x PP 2 with SP, one block per stage, 2 micro-batches.
    let mesh = [
        "--set",
        "sweep.topologies=[{devices_per_node=4, strategy=\"all-reduce\", tensor_parallel=2, pipeline_parallel=2}]",
        "--set",
        "topology.sequence_parallel=true",
        "--set",
        "topology.microbatches=2",
    ];
    run_spec(dir.path(), &mesh);
    let tp_pp = read(dir.path(), "1x4-ar-no-overlap-tp2-sp-pp2-1f1b-mb2");
    check_equal_to_one_rank(&single, &tp_pp, "ViT TP2 x PP2 + SP");
    for collective in ["all-gather", "reduce-scatter", "all-reduce"] {
        let m = measured(&tp_pp, "tensor", collective) as f64;
        let p = predicted(dir.path(), "1x4-ar-no-overlap-tp2-sp-pp2-1f1b-mb2", &mesh, "tensor", collective);
        assert!(m > 0.0 && (m - p).abs() <= 1.0, "TP x PP + SP {collective}: measured {m}, predicted {p}");
    }
    let activations = |r: &RunResult| r.metrics.as_ref().unwrap().memory.measured.activations_bytes.unwrap();
    let (a1, a2, a2_sp) = (activations(&single), activations(&tp2), activations(&tp2_sp));
    assert!(a2_sp < a2 && a2 < a1, "activations: one rank {a1}, TP2 {a2}, TP2 + SP {a2_sp}");
}
