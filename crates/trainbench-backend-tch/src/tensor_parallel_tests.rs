//! A decoder trained over an in-process tensor group of two ranks against one rank on the same batches, with
//! and without sequence parallelism: the same losses, the same whole gradients at every step, and the same
//! whole weights after the steps.

use tch::{Device, Kind, Tensor};
use trainbench_comm::local::ThreadComm;
use trainbench_graph::ModelSpec;

use super::*;
use crate::lower::{DataPool, EvalOpts, Lowered};

const STEPS: u64 = 4;
const LR: f64 = 0.05;

fn gpt(extra: &str) -> Graph {
    let mut json: serde_json::Value = serde_json::json!({
        "family": "gpt", "layers": 2, "d_model": 32, "heads": 4, "kv_heads": 2, "ffn": 48, "vocab": 64,
        "seq_len": 8, "activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "bias": false
    });
    let over: serde_json::Value =
        serde_json::from_str(&format!("{{{}}}", extra.trim_start_matches(','))).expect("model");
    for (k, v) in over.as_object().expect("object") {
        json[k] = v.clone();
    }
    let spec: ModelSpec = serde_json::from_value(json).expect("model");
    trainbench_graph::zoo::build(&spec).expect("graph")
}

fn values(t: &Tensor) -> Vec<f32> {
    let t = t.to_kind(Kind::Float).contiguous().view(-1);
    let mut out = vec![0f32; t.numel()];
    t.copy_data(&mut out, t.numel());
    out
}

/// Per step: the loss and every whole gradient; then the whole weights.
type Trace = (Vec<f64>, Vec<Vec<Vec<f32>>>, Vec<Vec<f32>>);

/// `STEPS` plain SGD steps of `model` (on its graph `graph`) from the batches of `full`; `whole` turns the
/// rank's tensors into the whole model's. With a tensor group, also the traffic of the training alone (the
/// gathers of `whole` left out).
fn train(
    full: &Graph,
    graph: &Graph,
    model: &Lowered,
    whole: &dyn Fn(&[Tensor]) -> Vec<Tensor>,
) -> (Trace, GroupTraffic) {
    let traffic = || model.tensor_parallel().map(TensorParallel::traffic).unwrap_or_default();
    let mut gathered = GroupTraffic::default();
    let mut whole_counted = |ts: &[Tensor]| {
        let before = traffic();
        let out = whole(ts);
        let after = traffic();
        gathered.all_gather.0 += after.all_gather.0 - before.all_gather.0;
        gathered.all_gather.1 += after.all_gather.1 - before.all_gather.1;
        out
    };
    let pool = DataPool::new(full, 4, 3, STEPS as usize, Device::Cpu).expect("pool");
    let params = model.parameters(graph, |_| true);
    let (mut losses, mut grads) = (Vec::new(), Vec::new());
    for step in 0..STEPS {
        let mut env: Vec<Option<Tensor>> = (0..graph.nodes.len()).map(|_| None).collect();
        pool.load(step, 0, Device::Cpu, &mut env).expect("batch");
        model.eval(graph, &mut env, &graph.losses, &EvalOpts::plain()).expect("forward");
        let loss = env[graph.losses[0]].take().expect("loss");
        loss.backward();
        if let Some(tp) = model.tensor_parallel() {
            tp.reduce_partial_grads(&params).expect("partial gradients");
        }
        losses.push(loss.double_value(&[]));
        let g: Vec<Tensor> = params.iter().map(Tensor::grad).collect();
        grads.push(whole_counted(&g).iter().map(values).collect());
        tch::no_grad(|| {
            for p in &params {
                let mut p = p.shallow_clone();
                let _ = p.f_sub_(&p.grad().f_mul_scalar(LR).expect("update")).expect("update");
                let _ = p.grad().zero_();
            }
        });
    }
    let weights = whole_counted(&params).iter().map(values).collect();
    let mut trained = traffic();
    trained.all_gather.0 -= gathered.all_gather.0;
    trained.all_gather.1 -= gathered.all_gather.1;
    ((losses, grads, weights), trained)
}

fn one_rank(g: &Graph) -> Trace {
    let model = Lowered::new(g, Device::Cpu, 11).expect("lowered");
    train(g, g, &model, &|ts| ts.iter().map(Tensor::shallow_clone).collect()).0
}

fn two_ranks(g: &Graph, sequence_parallel: bool) -> Vec<(Trace, GroupTraffic)> {
    let handles: Vec<_> = ThreadComm::group(2)
        .into_iter()
        .map(|comm| {
            let g = g.clone();
            std::thread::spawn(move || {
                let tp = TensorParallel::new(&g, Group::new(Box::new(comm)), sequence_parallel).expect("split");
                let local = tp.local().clone();
                let model = Lowered::with_tensor_parallel(&local, Device::Cpu, 11, Some(tp)).expect("lowered");
                let tp = model.tensor_parallel().expect("split");
                train(&g, &local, &model, &|ts| tp.gather_weights(ts).expect("gather"))
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank")).collect()
}

fn close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-4 * y.abs().max(1e-2), "{what}[{i}]: {x} vs {y}");
    }
}

fn check_equivalent(g: &Graph, sequence_parallel: bool) -> GroupTraffic {
    let (losses, grads, weights) = one_rank(g);
    // Random images and labels: a ViT's loss on each new batch need not fall within four steps, but it moves; nor
    // need a head tied to its token table, which starts at N(0, 0.02) and so at near-uniform logits (ln vocab).
    let image = g.nodes.iter().any(|n| matches!(n.op, trainbench_graph::graph::Op::Conv { .. }));
    let tied = g.nodes.iter().any(|n| n.tied_to.is_some());
    assert!(
        losses[STEPS as usize - 1] < losses[0] || ((image || tied) && losses.windows(2).all(|w| w[0] != w[1])),
        "the model trains: {losses:?}"
    );
    let ranks = two_ranks(g, sequence_parallel);
    for ((l, gr, w), _) in &ranks {
        for (a, b) in l.iter().zip(&losses) {
            assert!((a - b).abs() <= 1e-5 * b.abs(), "loss {a} vs {b} (one rank)");
        }
        for (s, (mine, one)) in gr.iter().zip(&grads).enumerate() {
            for (k, (x, y)) in mine.iter().zip(one).enumerate() {
                close(x, y, &format!("step {s} gradient {k}"));
            }
        }
        for (k, (x, y)) in w.iter().zip(&weights).enumerate() {
            close(x, y, &format!("weight {k}"));
        }
    }
    ranks[0].1
}

#[test]
fn two_ranks_train_what_one_rank_trains() {
    let g = gpt("");
    let traffic = check_equivalent(&g, false);
    // Per step and layer: two sums forward, two copies' gradients backward, of [4, 8, 32] each; the embedding
    // and the head's input once each; the loss's one all-reduce of two values per token.
    let a = 4 * 8 * 32;
    assert_eq!(traffic.all_reduce, (STEPS * (4 * 2 + 2 + 1), STEPS * ((4 * 2 + 2) * a + 2 * 32)));
    assert_eq!(traffic.all_gather, (STEPS, STEPS * 32), "the loss's maxima");
    assert_eq!(traffic.reduce_scatter, (0, 0));
}

#[test]
fn sequence_parallelism_trains_what_one_rank_trains_with_gathers_and_scatters() {
    let g = gpt("");
    let traffic = check_equivalent(&g, true);
    // Per step and layer: two gathers entering the regions (their gradients reduce-scattered) and two
    // reduce-scatters leaving them (their gradients gathered), of [4, 8, 32] (a rank's block half of it); the
    // embedding's scatter and the head's gather; the loss's all-reduce and the five norms' partial gradients.
    let a = 4 * 8 * 32;
    assert_eq!(traffic.reduce_scatter, (STEPS * 10, STEPS * 10 * a));
    assert_eq!(traffic.all_gather, (STEPS * 11, STEPS * (10 * a / 2 + 32)));
    assert_eq!(traffic.all_reduce, (STEPS * 2, STEPS * (2 * 32 + 5 * 32)));
}

#[test]
fn biases_learned_positions_tied_heads_and_per_head_norms_split_too() {
    let g = gpt(r#", "tied_embeddings": true, "qk_norm": true, "positions": "learned", "norm": "layernorm",
            "bias": true, "activation": "gelu""#);
    check_equivalent(&g, false);
    check_equivalent(&g, true);
}

#[test]
fn a_vit_trains_on_two_ranks_what_one_rank_trains() {
    let spec: ModelSpec = serde_json::from_value(serde_json::json!({
        "family": "vit", "image_size": 16, "patch_size": 4, "layers": 2, "hidden": 32, "heads": 4,
        "mlp_dim": 64, "classes": 10
    }))
    .expect("model");
    let g = trainbench_graph::zoo::build(&spec).expect("graph");
    let traffic = check_equivalent(&g, false);
    // Per step and layer: the attention's and the MLP's sums forward and their inputs' gradients backward, of
    // [4, 17, 32] each; the classifier's input [4, 32] backward; the loss's two values per sample.
    let a = 4 * 17 * 32;
    assert_eq!(traffic.all_reduce, (STEPS * (4 * 2 + 1 + 1), STEPS * (4 * 2 * a + 4 * 32 + 2 * 4)));
    assert_eq!(traffic.all_gather, (STEPS, STEPS * 4), "the loss's maxima, one per sample");
}
