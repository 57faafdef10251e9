//! Step time and achieved FLOP/s of small models on a wgpu adapter.
//!
//! Usage: `cargo run -p trainbench-backend-wgpu --release --example step_time -- [device] [iterations]`
//!
//! FLOPs per training step are estimated as 3x the forward multiply-adds x 2 of the matrix products
//! (linear, convolution, recurrent, attention); element-wise work is not counted.

use trainbench_backend_wgpu::WgpuBackend;
use trainbench_contract::conformance::fixtures;
use trainbench_contract::{Backend, NoProbe, RunPlan};
use trainbench_graph::graph::{Activation, InputKind, LossKind, Op, RnnCell};
use trainbench_graph::{Graph, GraphBuilder, OptimizerSpec};

fn forward_flops(graph: &Graph, batch: usize) -> f64 {
    let mut f = 0.0;
    for n in &graph.nodes {
        let out: f64 = n.shape.numel() as f64;
        let b = batch as f64;
        f += match &n.op {
            Op::Linear { in_features, .. } => 2.0 * b * out * *in_features as f64,
            Op::Conv { in_channels, kernel, groups, .. } => {
                let k: usize = kernel.iter().product();
                2.0 * b * out * (in_channels / groups * k) as f64
            }
            Op::Rnn { cell, input_size, hidden, layers, bidirectional } => {
                let g = if *cell == RnnCell::Lstm { 4.0 } else { 3.0 };
                let dirs = if *bidirectional { 2.0 } else { 1.0 };
                let t = n.shape.0[0] as f64;
                let h = *hidden as f64;
                (0..*layers)
                    .map(|l| {
                        let inp = if l == 0 { *input_size as f64 } else { h * dirs };
                        2.0 * b * t * dirs * g * h * (inp + h)
                    })
                    .sum()
            }
            Op::Attention { embed_dim, kdim, vdim, .. } => {
                let (tq, e) = (n.shape.0[0] as f64, *embed_dim as f64);
                let tk = graph.nodes[n.inputs[1]].shape.0[0] as f64;
                2.0 * b * (tq * e * e + tk * e * (*kdim as f64 + *vdim as f64) + 2.0 * tq * tk * e + tq * e * e)
            }
            Op::Input { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::RmsNorm { .. }
            | Op::Embedding { .. }
            | Op::Rotary { .. }
            | Op::Sdpa { .. }
            | Op::ClassToken { .. }
            | Op::EmbeddingBag { .. }
            | Op::Pool { .. }
            | Op::AdaptivePool { .. }
            | Op::Act { .. }
            | Op::Softmax
            | Op::Dropout { .. }
            | Op::Add
            | Op::Mul
            | Op::Concat { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Mean { .. }
            | Op::MatMul { .. }
            | Op::SinusoidalPositions { .. }
            | Op::LearnedPositions { .. }
            | Op::CriticBatch
            | Op::RoiAlign { .. }
            | Op::Lora { .. }
            | Op::Moe { .. }
            | Op::Loss { .. } => 0.0,
        };
    }
    f
}

fn mlp_784() -> Graph {
    let mut b = GraphBuilder::new("mlp-784-512-512-10");
    let x = b.input("x", &[784], InputKind::Dense).expect("input");
    let y = b.input("y", &[], InputKind::Labels { classes: 10 }).expect("labels");
    let h = b.linear("fc1", x, 512, true).expect("fc1");
    let h = b.act("r1", h, Activation::Relu).expect("r1");
    let h = b.linear("fc2", h, 512, true).expect("fc2");
    let h = b.act("r2", h, Activation::Relu).expect("r2");
    let o = b.linear("fc3", h, 10, true).expect("fc3");
    b.loss("loss", LossKind::CrossEntropy, &[o, y]).expect("loss");
    b.finish(1, "samples").expect("graph")
}

fn median(v: Vec<f64>) -> f64 {
    trainbench_contract::stats::median(&v).unwrap_or(0.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device: trainbench_contract::DeviceSelector = std::env::args().nth(1).as_deref().unwrap_or("wgpu").parse()?;
    let iterations: u64 = std::env::args().nth(2).map(|s| s.parse()).transpose()?.unwrap_or(10);
    let mut models: Vec<(Graph, usize)> = vec![(mlp_784(), 64)];
    for name in fixtures::NAMES {
        models.push((fixtures::build(name).ok_or("fixture")??, 32));
    }
    let mut backend = WgpuBackend::new();
    println!("| model | batch | step ms (median) | fwd ms | bwd ms | opt ms | GFLOP/step | GFLOP/s |");
    println!("|---|---|---|---|---|---|---|---|");
    for (graph, batch) in models {
        let plan = RunPlan {
            batch_size: batch,
            device,
            warmup: 3,
            seed: 1,
            optimizer: OptimizerSpec::default(),
            timeout_s: Some(600.0),
            ..RunPlan::for_tests(&graph.name, iterations)
        };
        // A fixture of a layer this backend refuses (mixture of experts) has no step time here.
        if let Err(e) = backend.supports(&plan, &graph) {
            eprintln!("{}: skipped: {e}", graph.name);
            continue;
        }
        let out = backend.run(&plan, &graph, &mut NoProbe)?;
        let step = median(out.steps.phases().iter().map(|s| s.total_s).collect());
        let fwd = median(out.steps.phases().iter().map(|s| s.forward_s).collect());
        let bwd = median(out.steps.phases().iter().map(|s| s.backward_s).collect());
        let opt = median(out.steps.phases().iter().map(|s| s.optimizer_s).collect());
        let flops = 3.0 * forward_flops(&graph, batch);
        println!(
            "| {} | {batch} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.2} |",
            graph.name,
            step * 1e3,
            fwd * 1e3,
            bwd * 1e3,
            opt * 1e3,
            flops / 1e9,
            flops / step / 1e9
        );
        if let Some(d) = &out.device {
            eprintln!("  on {} ({}), peak {:?} B", d.name, d.selector, out.memory.peak_allocated);
        }
    }
    Ok(())
}
