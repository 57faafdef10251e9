//! Every model family of the zoo, at a small size, trains on the CPU through the tch backend, and the tensors
//! it allocates agree with the static analysis (parameters + buffers).

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::json;
use tch::Device;
use trainbench_backend_tch::TchBackend;
use trainbench_backend_tch::lower::DataPool;
use trainbench_contract::{Backend, NoProbe};
use trainbench_graph::analysis::analyze;
use trainbench_graph::model::ModelSpec;
use trainbench_graph::zoo;

fn small_models() -> Vec<serde_json::Value> {
    vec![
        json!({"family": "resnet", "depth": 18, "width": 8, "classes": 10, "image_size": 32, "stem": "cifar"}),
        json!({"family": "resnet", "depth": 50, "width": 4, "classes": 10, "image_size": 64}),
        json!({"family": "inception-v3", "classes": 10, "aux_logits": true, "image_size": 299}),
        json!({"family": "seq2seq", "src_vocab": 50, "tgt_vocab": 40, "hidden": 16, "layers": 2, "seq_len": 6,
               "dropout": 0.1}),
        json!({"family": "transformer", "vocab": 60, "encoder_layers": 1, "decoder_layers": 1, "d_model": 16,
               "heads": 2, "ffn": 32, "seq_len": 6, "dropout": 0.1, "shared_embeddings": true}),
        json!({"family": "deep-speech2", "frames": 40, "freq_bins": 32, "rnn_layers": 2, "rnn_hidden": 16,
               "characters": 10, "label_len": 5}),
        json!({"family": "faster-rcnn", "backbone_depth": 50, "classes": 5, "image_size": 128, "proposals": 8,
               "anchors": 3}),
        json!({"family": "wgan-gp", "image_size": 16, "latent": 8, "width": 4, "gp_weight": 10.0}),
        json!({"family": "a3c", "actions": 4, "frames": 4, "image_size": 84}),
        json!({"family": "ncf", "users": 100, "items": 200, "factors": 8, "mlp_layers": [32, 16, 8]}),
        json!({"family": "bert", "vocab": 100, "layers": 1, "hidden": 16, "heads": 2, "ffn": 32, "seq_len": 8,
               "max_positions": 16}),
        json!({"family": "mlp", "inputs": 8, "hidden": [16], "classes": 3}),
    ]
}

#[test]
fn every_zoo_family_trains_and_allocates_what_the_analysis_counts() {
    let mut failures = Vec::new();
    for spec in small_models() {
        let family = spec["family"].as_str().unwrap().to_string();
        let model: ModelSpec = serde_json::from_value(spec).unwrap();
        let graph = zoo::build(&model).unwrap_or_else(|e| panic!("{family}: {e}"));
        let plan = common::plan(2, 2, common::adam(1e-3));
        let mut be = TchBackend::new();
        match be.check(&plan, &graph).and_then(|()| be.run(&plan, &graph, &mut NoProbe)) {
            Ok(raw) => {
                let a = analyze(&graph);
                if !raw.steps.loss_values().iter().all(|l| l.is_finite()) {
                    failures.push(format!("{family}: losses {:?}", raw.steps.loss_values()));
                }
                if raw.memory.weights != (a.parameters + a.buffers) * 4 {
                    failures.push(format!(
                        "{family}: {} weight bytes allocated, the analysis counts {} parameters + {} buffers",
                        raw.memory.weights, a.parameters, a.buffers
                    ));
                }
            }
            Err(e) => failures.push(format!("{family}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_data_pool_is_sized_from_the_input_shapes_as_it_is_generated() {
    // Dense images, token ids, labels, clicks: the bytes read from the graph are the bytes the pool holds, for
    // one worker and for a worker's slice of 2 micro-batches over 3 workers.
    for spec in small_models() {
        let family = spec["family"].as_str().unwrap().to_string();
        let graph = zoo::build(&serde_json::from_value(spec).unwrap()).unwrap();
        for (batch, micro, worker, workers) in [(4, 1, 0, 1), (6, 2, 1, 3)] {
            let pool = DataPool::new_micro(&graph, batch, micro, (worker, workers), 7, 1, Device::Cpu).unwrap();
            let from_shapes = DataPool::step_bytes(&graph, batch, micro, workers);
            assert_eq!(from_shapes, pool.batch_bytes(), "{family} at batch {batch}, {micro} micro-batches");
        }
    }
}
