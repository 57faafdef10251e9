//! Times a mixture-of-experts layer's forward and backward with the experts as one grouped product per
//! projection against a loop over experts, interleaved rounds on the CPU: `cargo run --release --example
//! moe_kernels -p trainbench-backend-tch [-- tokens d_model experts top_k expert_ffn]` (default: the smoke MoE
//! spec's layer at batch 4, 512 tokens, 256, 8 experts, top-2, 256).

use std::time::Instant;

use tch::{Device, Kind, Tensor};
use trainbench_backend_tch::moe::{ExpertKernel, forward, set_expert_kernel, take_aux_losses, take_routing};
use trainbench_graph::graph::{MoeRouter, Node, Op, Shape};

fn main() -> Result<(), tch::TchError> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let get = |i: usize, d: usize| args.get(i).copied().unwrap_or(d);
    let (tokens, d, experts, top_k, ffn) = (get(0, 512), get(1, 256), get(2, 8), get(3, 2), get(4, 256));
    let op = Op::Moe {
        features: d,
        experts,
        top_k,
        expert_ffn: ffn,
        shared_ffn: 0,
        router: MoeRouter::Softmax,
        capacity_factor: None,
        aux_loss: 0.0,
    };
    let node = Node {
        name: "mlp".into(),
        op,
        inputs: vec![0],
        shape: Shape(vec![tokens, d]),
        part: None,
        tied_to: None,
        frozen: false,
    };
    let params: Vec<Tensor> = trainbench_graph::params::tensors(&node)
        .iter()
        .map(|p| {
            let shape: Vec<i64> = p.shape.iter().map(|&s| s as i64).collect();
            (Tensor::randn(&shape, (Kind::Float, Device::Cpu)) * 0.05).set_requires_grad(true)
        })
        .collect();
    let x = Tensor::randn([1, tokens as i64, d as i64], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..12 {
        for (slot, kernel) in [ExpertKernel::Grouped, ExpertKernel::Loop].into_iter().enumerate() {
            set_expert_kernel(kernel);
            let start = Instant::now();
            forward(&node, &x, &params)?.f_sum(Kind::Float)?.f_backward()?;
            let ran = take_routing().first().map(|r| r.kernel);
            let _ = take_aux_losses();
            if round >= 2 {
                times[slot].push(start.elapsed().as_secs_f64());
            }
            if ran != Some(kernel) {
                println!("{kernel:?} did not run as asked: {ran:?}");
            }
        }
    }
    for (name, t) in ["grouped", "loop"].iter().zip(&mut times) {
        t.sort_by(f64::total_cmp);
        println!("{name:8} median {:.3} ms (forward + backward, {} rounds)", t[t.len() / 2] * 1e3, t.len());
    }
    Ok(())
}
