//! Writes, for every fixture, the graph, its seeded initial tensors and the synthetic batches of the agreement
//! run as JSON, for `reference/torch_reference.py` to train the same model in PyTorch.
//!
//! Usage: `cargo run -p trainbench-contract --features testing --example export_reference -- <out-dir>`

use std::path::PathBuf;

use serde_json::{Value, json};
use trainbench_contract::conformance::agreement::AGREEMENT_RUN;
use trainbench_contract::conformance::fixtures;
use trainbench_graph::init::{HostTensor, initial_values, synthetic_input};
use trainbench_graph::params::node_tensors;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).ok_or("usage: export_reference <out-dir>")?);
    std::fs::create_dir_all(&dir)?;
    let run = AGREEMENT_RUN;
    for name in fixtures::NAMES {
        let graph = fixtures::build(name).ok_or("unknown fixture")??;
        let mut params = Vec::new();
        for id in 0..graph.nodes.len() {
            for decl in node_tensors(&graph, id) {
                params.push(json!({
                    "node": id,
                    "name": decl.name,
                    "local": decl.local,
                    "shape": decl.shape,
                    "trainable": decl.trainable(),
                    "values": initial_values(&decl, run.seed),
                }));
            }
        }
        let mut batches = Vec::new();
        for step in 0..run.steps {
            let data_step = step % run.pool;
            let mut inputs = serde_json::Map::new();
            for (id, node) in graph.inputs() {
                let v: Value = match synthetic_input(&graph, id, run.batch, run.seed, data_step) {
                    HostTensor::Dense(v) => json!({"kind": "dense", "values": v}),
                    HostTensor::Ids(v) => json!({"kind": "ids", "values": v}),
                };
                inputs.insert(node.name.clone(), v);
            }
            batches.push(Value::Object(inputs));
        }
        let doc = json!({
            "fixture": name,
            "batch": run.batch,
            "seed": run.seed,
            "optimizer": run.optimizer(),
            "graph": graph,
            "params": params,
            "batches": batches,
        });
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_string(&doc)?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
