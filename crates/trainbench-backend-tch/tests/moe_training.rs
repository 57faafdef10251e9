//! The mixture-of-experts layer on libtorch: its output equals a token-by-token reference (router, top-k,
//! renormalised weights, each chosen expert), the grouped and the looped experts agree, a capacity factor drops
//! and counts, the load-balancing loss joins the training loss, a small MoE decoder learns on the CPU, and a run
//! records the routing of its measured steps.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use tch::{Device, Kind, Tensor};
use trainbench_backend_tch::TchBackend;
use trainbench_backend_tch::moe::{ExpertKernel, forward, set_expert_kernel, take_aux_losses, take_routing};
use trainbench_contract::{Backend, NoProbe};
use trainbench_graph::graph::{MoeRouter, Node, Op, Shape};
use trainbench_graph::model::{GptSpec, ModelSpec};

fn node(router: MoeRouter, capacity_factor: Option<f32>, shared_ffn: usize) -> Node {
    Node {
        name: "mlp".into(),
        op: Op::Moe {
            features: 8,
            experts: 4,
            top_k: 2,
            expert_ffn: 16,
            shared_ffn,
            router,
            capacity_factor,
            aux_loss: 0.01,
        },
        inputs: vec![0],
        shape: Shape(vec![6, 8]),
        part: None,
        tied_to: None,
        frozen: false,
    }
}

fn params(n: &Node) -> Vec<Tensor> {
    tch::manual_seed(3);
    trainbench_graph::params::tensors(n)
        .iter()
        .map(|d| {
            let shape: Vec<i64> = d.shape.iter().map(|&s| s as i64).collect();
            (Tensor::randn(&shape, (Kind::Float, Device::Cpu)) * 0.3).set_requires_grad(true)
        })
        .collect()
}

/// Token by token: the router's scores, the top 2 renormalised, each chosen expert's SwiGLU output.
fn reference(x: &Tensor, p: &[Tensor], router: MoeRouter) -> Tensor {
    let flat = x.reshape([-1, 8]);
    let mut rows = Vec::new();
    for t in 0..flat.size()[0] {
        let xt = flat.get(t).unsqueeze(0);
        let logits = xt.linear(&p[0], None::<&Tensor>).squeeze_dim(0);
        let scores = match router {
            MoeRouter::Softmax => logits.softmax(-1, Kind::Float),
            MoeRouter::Sigmoid => logits.sigmoid(),
        };
        let (top, idx) = scores.topk(2, -1, true, true);
        let w = &top / top.sum(Kind::Float);
        let mut y = Tensor::zeros([1, 8], (Kind::Float, Device::Cpu));
        for j in 0..2 {
            let e = idx.int64_value(&[j]);
            let (g, u, d) = (p[1].get(e), p[2].get(e), p[3].get(e));
            let h = xt.linear(&g, None::<&Tensor>).silu() * xt.linear(&u, None::<&Tensor>);
            y += h.linear(&d, None::<&Tensor>) * w.get(j);
        }
        if p.len() == 7 {
            let h = xt.linear(&p[4], None::<&Tensor>).silu() * xt.linear(&p[5], None::<&Tensor>);
            y += h.linear(&p[6], None::<&Tensor>);
        }
        rows.push(y);
    }
    Tensor::cat(&rows, 0).reshape([2, 6, 8])
}

#[test]
fn routed_experts_equal_the_token_by_token_reference_grouped_and_looped() {
    for (router, shared) in [(MoeRouter::Softmax, 0), (MoeRouter::Sigmoid, 16)] {
        let n = node(router, None, shared);
        let p = params(&n);
        let x = Tensor::randn([2, 6, 8], (Kind::Float, Device::Cpu));
        let want = reference(&x, &p, router);
        for kernel in [ExpertKernel::Grouped, ExpertKernel::Loop] {
            set_expert_kernel(kernel);
            let _ = take_routing();
            let got = forward(&n, &x, &p).unwrap();
            let diff = (&got - &want).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "{router:?} {kernel:?}: {diff}");
            let routing = take_routing();
            assert_eq!(routing[0].tokens_per_expert.iter().sum::<u64>(), 12 * 2);
            assert_eq!(routing[0].dropped, 0);
            assert_eq!(routing[0].kernel, kernel, "libtorch took the grouped product on the CPU");
            // The load-balancing loss was recorded for the training loss (the parameters need gradients).
            assert_eq!(take_aux_losses().len(), 1);
        }
    }
}

#[test]
fn a_capacity_factor_drops_the_assignments_over_capacity_and_counts_them() {
    let n = node(MoeRouter::Softmax, Some(0.5), 0);
    let p = params(&n);
    let x = Tensor::randn([2, 6, 8], (Kind::Float, Device::Cpu));
    let _ = take_routing();
    let y = forward(&n, &x, &p).unwrap();
    let r = take_routing().remove(0);
    // 24 assignments over 4 experts at capacity factor 0.5: at most 3 each.
    assert!(r.tokens_per_expert.iter().all(|&c| c <= 3), "{:?}", r.tokens_per_expert);
    assert_eq!(r.tokens_per_expert.iter().sum::<u64>() + r.dropped, 24);
    assert!(r.dropped > 0);
    assert!(y.isfinite().all().int64_value(&[]) == 1);
    let _ = take_aux_losses();
}

#[test]
fn a_small_moe_decoder_learns_on_the_cpu() {
    let spec: GptSpec = serde_json::from_str(
        r#"{"layers": 2, "d_model": 32, "heads": 4, "kv_heads": 2, "vocab": 64, "seq_len": 16, "activation": "swiglu",
        "norm": "rmsnorm", "positions": "rotary", "bias": false, "tied_embeddings": false, "qk_norm": true,
        "moe": {"experts": 8, "top_k": 2, "expert_ffn": 32, "capacity_factor": 1.25, "aux_loss": 0.01}}"#,
    )
    .unwrap();
    let g = trainbench_graph::zoo::build(&ModelSpec::Gpt(spec)).unwrap();
    let raw = TchBackend::new().run(&plan(8, 20, adam(1e-2)), &g, &mut NoProbe).unwrap();
    let losses = raw.steps.loss_values();
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    let (first, last) = (losses[..4].iter().sum::<f64>(), losses[16..].iter().sum::<f64>());
    assert!(last < 0.97 * first, "{losses:?}");
}

#[test]
fn a_run_records_the_routing_of_its_measured_steps_only() {
    let g = trainbench_contract::conformance::fixtures::moe().unwrap();
    // Two warm-up steps, three measured, two micro-batches of 4 sequences of 10 tokens each per step.
    let mut p = plan(8, 3, adam(1e-3));
    p.warmup = 2;
    p.schedule.grad_accumulation = 2;
    let raw = TchBackend::new().run(&p, &g, &mut NoProbe).unwrap();
    let routing = raw.routing.expect("an MoE run records its routing");
    assert_eq!(routing.steps, 3, "measured steps only");
    assert_eq!(routing.layers.len(), 1);
    let l = &routing.layers[0];
    assert_eq!(l.layer, "moe");
    assert_eq!(l.tokens_per_expert.len(), 4);
    // Every step routes 16 samples x 10 tokens to 2 experts each: computed plus dropped.
    assert_eq!(l.tokens_per_expert.iter().sum::<u64>() + l.dropped, 3 * 16 * 10 * 2);
    // At most the capacity per micro-batch, ceil(1.0 x 80 x 2 / 4) = 40, twice per step; this router drops.
    assert!(l.tokens_per_expert.iter().all(|&c| c <= 3 * 80), "{l:?}");
    assert!(l.dropped > 0, "{l:?}");
    eprintln!("moe fixture: {:?} computed, {} dropped over 3 steps", l.tokens_per_expert, l.dropped);
    assert!(l.balance_sum > 0.0 && (l.aux_loss_sum - 0.01 * l.balance_sum).abs() < 1e-6);
    assert_eq!(routing.all.tokens_per_expert, l.tokens_per_expert, "one layer: all is that layer");
    // A model without MoE layers records none.
    let dense = TchBackend::new().run(&plan(4, 2, adam(1e-3)), &mlp(), &mut NoProbe).unwrap();
    assert_eq!(dense.routing, None);
}
