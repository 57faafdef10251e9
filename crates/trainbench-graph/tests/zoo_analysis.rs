//! Golden snapshots (golden/analysis/) of the static analysis of every zoo family at its default settings,
//! with memory estimates at the TBD paper's batch sizes. The numbers are exact and deterministic: a change
//! here is a change of the model or of the counting conventions, and must be reviewed as such.

#![allow(clippy::unwrap_used)]

use serde::Serialize;
use serde_json::json;
use trainbench_graph::analysis::{Analysis, MemoryEstimate, analyze, memory_estimate};
use trainbench_graph::{ModelSpec, OptimizerSpec, Precision, zoo};

#[derive(Serialize)]
struct Golden {
    analysis: Analysis,
    memory: Vec<MemoryEstimate>,
}

fn sgd(momentum: f64) -> OptimizerSpec {
    OptimizerSpec::Sgd { lr: 0.01, momentum, weight_decay: 0.0, nesterov: false }
}

fn adam() -> OptimizerSpec {
    OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
}

/// insta settings for snapshots in the workspace's `golden/<subdir>/`, named without the module prefix (the
/// root crate's integration tests have the same helper in `tests/it/common/mod.rs`).
fn golden_settings(subdir: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../golden").join(subdir));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

fn check(name: &str, model: serde_json::Value, batch: usize, optimizer: OptimizerSpec) {
    let spec: ModelSpec = serde_json::from_value(model).expect("model spec");
    let graph = zoo::build(&spec).expect("zoo model builds");
    let mut analysis = analyze(&graph);
    let memory = [Precision::Fp32, Precision::Fp16]
        .into_iter()
        .map(|p| memory_estimate(&analysis, batch, p, &optimizer))
        .collect();
    analysis.layers.clear();
    golden_settings("analysis").bind(|| insta::assert_json_snapshot!(name, Golden { analysis, memory }));
}

#[test]
fn resnet50() {
    check("resnet50", json!({"family": "resnet"}), 32, sgd(0.9));
}

#[test]
fn resnet18_cifar() {
    check(
        "resnet18-cifar",
        json!({"family": "resnet", "depth": 18, "stem": "cifar", "image_size": 32, "classes": 10}),
        128,
        sgd(0.9),
    );
}

#[test]
fn inception_v3() {
    check("inception-v3", json!({"family": "inception-v3"}), 32, sgd(0.9));
}

#[test]
fn seq2seq() {
    check("seq2seq", json!({"family": "seq2seq"}), 128, sgd(0.0));
}

#[test]
fn transformer() {
    check("transformer", json!({"family": "transformer"}), 32, adam());
}

#[test]
fn deep_speech2() {
    check("deep-speech2", json!({"family": "deep-speech2"}), 8, sgd(0.9));
}

#[test]
fn faster_rcnn() {
    check("faster-rcnn", json!({"family": "faster-rcnn"}), 1, sgd(0.9));
}

#[test]
fn wgan_gp() {
    check("wgan-gp", json!({"family": "wgan-gp"}), 64, adam());
}

#[test]
fn a3c() {
    check("a3c", json!({"family": "a3c"}), 32, sgd(0.9));
}

#[test]
fn ncf() {
    check("ncf", json!({"family": "ncf"}), 2048, adam());
}

#[test]
fn bert() {
    check("bert", json!({"family": "bert"}), 32, adam());
}

#[test]
fn mlp() {
    check("mlp", json!({"family": "mlp"}), 64, sgd(0.9));
}

#[test]
fn custom() {
    let model = json!({
        "family": "custom",
        "input": [3, 32, 32],
        "layers": [
            {"type": "conv2d", "out_channels": 32, "kernel": 3, "padding": 1, "bias": false, "name": "c1"},
            {"type": "batch_norm"},
            {"type": "relu", "name": "r1"},
            {"type": "conv2d", "out_channels": 32, "kernel": 3, "padding": 1, "bias": false},
            {"type": "batch_norm"},
            {"type": "residual", "from": "r1"},
            {"type": "relu"},
            {"type": "max_pool", "kernel": 2},
            {"type": "global_avg_pool"},
            {"type": "dropout", "p": 0.1},
            {"type": "linear", "in_features": 32, "out_features": 10}
        ]
    });
    check("custom-cnn", model, 64, sgd(0.9));
}

#[test]
fn gpt2_small() {
    check("gpt2-small", json!({"family": "gpt"}), 8, adam());
}

#[test]
fn llama3_2_1b() {
    let llama = json!({
        "family": "gpt", "layers": 16, "d_model": 2048, "heads": 32, "kv_heads": 8, "ffn": 8192,
        "activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "rope_theta": 500000.0,
        "vocab": 128256, "seq_len": 2048, "tied_embeddings": true, "bias": false
    });
    check("llama3.2-1b", llama, 1, adam());
}

#[test]
fn vit_b_16() {
    check("vit-b-16", json!({"family": "vit"}), 32, adam());
}

#[test]
fn dlrm_dcnv2() {
    check("dlrm-dcnv2", json!({"family": "dlrm"}), 1024, adam());
}
