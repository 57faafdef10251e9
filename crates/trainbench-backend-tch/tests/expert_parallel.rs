//! Expert parallelism over in-process ranks (`ThreadComm`): a mixture-of-experts layer whose experts are
//! sharded over 2 ranks (and 2 x 2 with data parallelism) gives, on each rank's slice of the global batch, one
//! rank's outputs, loss and gradients on the whole batch (dropless and with a capacity factor, where the same
//! assignments are dropped), and its all-to-alls pass the bytes the formula says.

#![allow(clippy::unwrap_used)]

use tch::{Device, Kind, Tensor};
use trainbench_backend_tch::diff_op::Group;
use trainbench_backend_tch::expert_parallel::{ExpertParallel, install};
use trainbench_backend_tch::moe::{forward, take_aux_losses, take_routing};
use trainbench_comm::ExpertGroups;
use trainbench_comm::local::ThreadComm;
use trainbench_graph::graph::{MoeRouter, Node, Op, Shape};

const EXPERTS: usize = 4;
const D: i64 = 8;
/// Global batch: 8 samples of 6 tokens.
const BATCH: i64 = 8;

fn node(capacity_factor: Option<f32>) -> Node {
    Node {
        name: "mlp".into(),
        op: Op::Moe {
            features: D as usize,
            experts: EXPERTS,
            top_k: 2,
            expert_ffn: 16,
            shared_ffn: 0,
            router: MoeRouter::Softmax,
            capacity_factor,
            aux_loss: 0.01,
        },
        inputs: vec![0],
        shape: Shape(vec![6, D as usize]),
        part: None,
        tied_to: None,
        frozen: false,
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    let t = t.detach().to_kind(Kind::Float).contiguous().view(-1);
    let mut out = vec![0f32; t.numel()];
    t.copy_data(&mut out, t.numel());
    out
}

/// The layer's output, the loss `sum(y * w) / tokens + aux`, and every parameter's gradient, on one rank's
/// `x` with `params` (the experts this rank's shard); the assignments it dropped.
struct Pass {
    y: Vec<f32>,
    loss: f64,
    grads: Vec<Vec<f32>>,
    dropped: u64,
}

fn pass(n: &Node, x: &Tensor, w: &Tensor, params: &[Tensor]) -> Pass {
    let _ = (take_routing(), take_aux_losses());
    // The layer's input needs a gradient, as inside a model: every all-to-all has a backward.
    let x = x.detach().copy().set_requires_grad(true);
    let y = forward(n, &x, params).unwrap();
    let tokens = (x.size()[0] * x.size()[1]) as f64;
    let aux: Tensor = take_aux_losses().into_iter().fold(Tensor::zeros([], (Kind::Float, Device::Cpu)), |a, b| a + b);
    let loss = (&y * w).sum(Kind::Float) / tokens + aux;
    loss.backward();
    let dropped = take_routing().iter().map(|r| r.dropped).sum();
    Pass {
        y: values(&y),
        loss: loss.double_value(&[]),
        grads: params.iter().map(|p| values(&p.grad())).collect(),
        dropped,
    }
}

fn inputs() -> (Node, Tensor, Tensor, Vec<Tensor>) {
    tch::manual_seed(7);
    let n = node(None);
    let params: Vec<Tensor> = trainbench_graph::params::tensors(&n)
        .iter()
        .map(|d| {
            let shape: Vec<i64> = d.shape.iter().map(|&s| s as i64).collect();
            Tensor::randn(&shape, (Kind::Float, Device::Cpu)) * 0.3
        })
        .collect();
    let x = Tensor::randn([BATCH, 6, D], (Kind::Float, Device::Cpu));
    let w = Tensor::randn([BATCH, 6, D], (Kind::Float, Device::Cpu));
    (n, x, w, params)
}

fn close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs() / y.abs().max(1e-3)).fold(0f32, f32::max);
    assert!(worst < 1e-4, "{what}: relative difference {worst}");
}

/// One rank on the whole batch against `world` ranks at expert-parallel `degree`.
fn check(world: usize, degree: usize, capacity_factor: Option<f32>) {
    let (mut n, x, w, params) = inputs();
    if let Op::Moe { capacity_factor: c, .. } = &mut n.op {
        *c = capacity_factor;
    }
    let leaves: Vec<Tensor> = params.iter().map(|p| p.detach().set_requires_grad(true)).collect();
    let one = pass(&n, &x, &w, &leaves);
    let per = BATCH / world as i64;
    let handles: Vec<_> = ThreadComm::group(world)
        .into_iter()
        .enumerate()
        .map(|(rank, mut comm)| {
            let (n, x, w) = (n.clone(), x.narrow(0, rank as i64 * per, per), w.narrow(0, rank as i64 * per, per));
            let params: Vec<Tensor> = params.iter().map(|p| p.copy()).collect();
            std::thread::spawn(move || {
                let groups = ExpertGroups::split(&mut comm, degree).unwrap();
                let member = groups.experts.rank();
                let held = ExpertGroups::held(EXPERTS, degree, member);
                let replicas = Group::new(groups.replicas);
                let world_group = Group::new(groups.world);
                let experts = Group::new(groups.experts);
                let ep = ExpertParallel::new(experts.clone(), world_group.clone());
                let _installed = install(ep);
                // The router whole; the experts' shard.
                let mine: Vec<Tensor> = params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let p =
                            if i == 0 { p.copy() } else { p.narrow(0, held.start as i64, held.len() as i64).copy() };
                        p.set_requires_grad(true)
                    })
                    .collect();
                let mut out = pass(&n, &x, &w, &mine);
                // Data parallelism's exchange: the router's gradient averaged over the world; the experts' summed
                // over their replicas and divided by the world size.
                world_group.all_reduce_values(&mut out.grads[0]).unwrap();
                for g in out.grads.iter_mut().skip(1) {
                    if replicas.size() > 1 {
                        replicas.all_reduce_values(g).unwrap();
                    }
                }
                for g in &mut out.grads {
                    g.iter_mut().for_each(|v| *v /= world as f32);
                }
                (rank, member, out, experts.traffic())
            })
        })
        .collect();
    let ranks: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let y: Vec<f32> = ranks.iter().flat_map(|(_, _, p, _)| p.y.clone()).collect();
    let label = format!("world {world}, expert_parallel {degree}, capacity {capacity_factor:?}");
    close(&y, &one.y, &format!("{label}: outputs"));
    let loss = ranks.iter().map(|(_, _, p, _)| p.loss).sum::<f64>() / world as f64;
    assert!((loss - one.loss).abs() <= 1e-5 * one.loss.abs().max(1.0), "{label}: loss {loss} vs {}", one.loss);
    // Every rank records the global batch's drops (each knows every rank's counts): the same as one rank's.
    for (rank, _, p, _) in &ranks {
        assert_eq!(p.dropped, one.dropped, "{label}: rank {rank} records the same assignments dropped");
    }
    if capacity_factor.is_some() {
        assert!(one.dropped > 0, "{label}: the capacity drops some");
    }
    for (rank, member, p, _) in &ranks {
        close(&p.grads[0], &one.grads[0], &format!("{label}: rank {rank}'s router gradient"));
        let per_expert = one.grads[1].len() / EXPERTS;
        let held = ExpertGroups::held(EXPERTS, degree, *member);
        for (i, g) in p.grads.iter().enumerate().skip(1) {
            let whole = &one.grads[i][held.start * per_expert..held.end * per_expert];
            close(g, whole, &format!("{label}: rank {rank}'s expert tensor {i}"));
        }
    }
    if capacity_factor.is_none() {
        // Per rank and layer: the counts (4 values), the rows out and back, forward and backward. Summed over the
        // ranks the rows are 4 x tokens x top_k x d whatever the routing.
        let rows: u64 = ranks.iter().map(|(_, _, _, t)| t.all_to_all.1).sum();
        let tokens = (BATCH * 6) as u64;
        assert_eq!(rows, world as u64 * EXPERTS as u64 + 4 * tokens * 2 * D as u64, "{label}");
        assert!(ranks.iter().all(|(_, _, _, t)| t.all_to_all.0 == 5), "{label}: counts, 2 forward, 2 backward");
    }
}

#[test]
fn two_expert_parallel_ranks_reproduce_one_rank() {
    check(2, 2, None);
}

#[test]
fn expert_parallel_two_by_data_parallel_two_reproduce_one_rank() {
    check(4, 2, None);
}

#[test]
fn with_a_capacity_factor_the_same_assignments_are_dropped() {
    check(2, 2, Some(0.75));
    check(4, 2, Some(0.75));
}
