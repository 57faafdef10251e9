//! Which allocations of a step are fresh, and what the term adds to a prediction.

use trainbench_comm::Topology;
use trainbench_graph::graph::{InputKind, LossKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec, Precision};

use super::*;
use crate::hardware::wire::{FreshMemoryPoint, HardwareFile};
use crate::predict::terms::{Term, Terms};
use crate::predict::{Setting, predict, predict_with};

const MIB: f64 = 1024.0 * 1024.0;

/// tokens (50) -> embedding 200,000 x 64 (51.2 MB) -> linear 64 -> 1,000 -> cross-entropy.
fn graph() -> Graph {
    let mut b = GraphBuilder::new("fresh");
    let x = b.input("x", &[50], InputKind::Tokens { vocab: 200_000 }).unwrap();
    let e = b.embedding("emb", x, 200_000, 64).unwrap();
    let r = b.reshape("flat", e, &[50 * 64]).unwrap();
    let y = b.linear("head", r, 1000, true).unwrap();
    let t = b.input("t", &[], InputKind::Labels { classes: 1000 }).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[y, t]).unwrap();
    b.finish(1, "samples").unwrap()
}

fn adam(weight_decay: f64) -> OptimizerSpec {
    OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay }
}

/// One device at `batch` samples, fp32, Adam.
fn setting(batch: usize) -> Setting {
    Setting {
        batch,
        precision: Precision::Fp32,
        optimizer: adam(0.0),
        topology: Topology::single(),
        schedule: Default::default(),
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    }
}

fn node(g: &Graph, name: &str) -> usize {
    g.nodes.iter().position(|n| n.name == name).unwrap()
}

#[test]
fn a_step_allocates_outputs_input_gradients_and_every_trained_tensors_gradient() {
    let g = graph();
    let a = trainbench_graph::analysis::analyze(&g);
    let (b, p) = (4.0, Precision::Fp32);
    // The embedding: its output forward; its weight's gradient backward (its input, token ids, needs none).
    let (f, bw) = node_allocations(&g, &a, node(&g, "emb"), b, p);
    assert_eq!(f, [4.0 * 50.0 * 64.0 * 4.0]);
    assert_eq!(bw, [200_000.0 * 64.0 * 4.0]);
    // A reshape is a view: nothing.
    assert_eq!(node_allocations(&g, &a, node(&g, "flat"), b, p), (Vec::new(), Vec::new()));
    // The head: its output; its input's gradient, its weight's and its bias's.
    let (f, bw) = node_allocations(&g, &a, node(&g, "head"), b, p);
    assert_eq!(f, [4.0 * 1000.0 * 4.0]);
    assert_eq!(bw, [4.0 * 3200.0 * 4.0, 3200.0 * 1000.0 * 4.0, 1000.0 * 4.0]);
    // The loss: its scalar and the log-probabilities; backward, a second logits-sized pass and the logits' gradient.
    let (f, bw) = node_allocations(&g, &a, node(&g, "loss"), b, p);
    assert_eq!(f[1..], [4.0 * 1000.0 * 4.0]);
    assert_eq!(bw, [4.0 * 1000.0 * 4.0, 4.0 * 1000.0 * 4.0]);
}

#[test]
fn a_tied_head_allocates_its_own_weight_gradient_and_the_sum_into_its_owners() {
    // tokens (8) -> embedding 1,000 x 16 -> head 16 -> 1,000 tied to it -> cross-entropy.
    let mut b = GraphBuilder::new("tied");
    let x = b.input("x", &[8], InputKind::Tokens { vocab: 1000 }).unwrap();
    let e = b.embedding("emb", x, 1000, 16).unwrap();
    let y = b.linear("head", e, 1000, false).unwrap();
    b.tie(y, e).unwrap();
    let t = b.input("t", &[8], InputKind::Labels { classes: 1000 }).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[y, t]).unwrap();
    let g = b.finish(1, "tokens").unwrap();
    let a = trainbench_graph::analysis::analyze(&g);
    let weight = 1000.0 * 16.0 * 4.0;
    // The owner allocates the weight's gradient once.
    let (_, bw) = node_allocations(&g, &a, node(&g, "emb"), 2.0, Precision::Fp32);
    assert_eq!(bw, [weight]);
    // The head: its input's gradient, then the tied weight's own gradient and the out-of-place sum of the two.
    let (_, bw) = node_allocations(&g, &a, node(&g, "head"), 2.0, Precision::Fp32);
    assert_eq!(bw, [2.0 * 8.0 * 16.0 * 4.0, weight, weight]);
}

#[test]
fn optimizers_allocate_torch_optims_temporaries() {
    assert_eq!(optimizer_temporaries(&adam(0.0)), 2.0);
    assert_eq!(optimizer_temporaries(&adam(0.01)), 3.0);
    let adamw = OptimizerSpec::Adamw { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 };
    assert_eq!(optimizer_temporaries(&adamw), 2.0);
    let sgd = |weight_decay: f64, nesterov: bool| OptimizerSpec::Sgd { lr: 0.1, momentum: 0.9, weight_decay, nesterov };
    assert_eq!(optimizer_temporaries(&sgd(0.0, false)), 0.0);
    assert_eq!(optimizer_temporaries(&sgd(1e-4, true)), 2.0);
}

#[test]
fn only_allocations_above_the_threshold_cost() {
    let fresh = FreshPages { reused_up_to_bytes: 32.0 * MIB, seconds_per_byte: 1e-10, cycled: Vec::new() };
    assert_eq!(fresh.seconds(32.0 * MIB), 0.0);
    assert_eq!(fresh.seconds(64.0 * MIB), 64.0 * MIB * 1e-10);
    let g = graph();
    let a = trainbench_graph::analysis::analyze(&g);
    // Of the whole step only the embedding's gradient (51.2 MB) is above 32 MiB; Adam's two temporaries of it too.
    let step: f64 = (0..g.nodes.len())
        .map(|i| {
            let (f, b) = node_seconds(&g, &a, i, 4.0, Precision::Fp32, &fresh);
            f + b
        })
        .sum();
    assert_eq!(step, 51.2e6 * 1e-10);
    assert_eq!(optimizer_seconds(&g, &adam(0.0), &fresh), 2.0 * 51.2e6 * 1e-10);
}

fn profile(fresh: Option<FreshMemoryPoint>) -> HardwareFile {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml")).unwrap();
    let mut p: HardwareFile = toml::from_str(&text).unwrap();
    p.fitted = None;
    p.version = 1;
    if let Some(c) = p.calibration.as_mut() {
        c.fresh_memory = fresh;
    }
    crate::hardware::load::with_fitted(p)
}

#[test]
fn a_calibrated_fresh_memory_adds_its_seconds_to_backward_and_the_optimizer_and_the_term_takes_them_away() {
    let g = graph();
    let s = setting(4);
    let point = FreshMemoryPoint { reused_up_to_bytes: 32.0 * MIB, seconds_per_byte: 2e-10, cycled: Vec::new() };
    let (without_point, with_point) = (profile(None), profile(Some(point)));
    let before = predict(&g, &s, &without_point).unwrap();
    let after = predict(&g, &s, &with_point).unwrap();
    let gradient = 51.2e6 * 2e-10;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    assert_eq!(after.phases.forward_s, before.phases.forward_s);
    assert!(close(after.phases.backward_s - before.phases.backward_s, gradient));
    assert!(close(after.phases.optimizer_s - before.phases.optimizer_s, 2.0 * gradient));
    let emb = after.layers.iter().find(|l| l.name == "emb").unwrap();
    assert_eq!(emb.backward.terms.get(&Term::FreshPages).copied(), Some(gradient));
    let off = predict_with(&g, &s, &with_point, &Terms::without(&[Term::FreshPages])).unwrap();
    assert_eq!(off.phases, before.phases);
}

const GIB: f64 = 1024.0 * MIB;

fn cycle(gib: f64, period_s: f64, extra_seconds_per_byte: f64) -> CycledFreshPoint {
    CycledFreshPoint { bytes: gib * GIB, period_s, extra_seconds_per_byte }
}

#[test]
fn the_reclaimed_cost_per_byte_reads_the_cycles_by_size_and_period() {
    let cycled = vec![cycle(4.0, 6.0, 8e-10), cycle(1.0, 1.0, 1e-10), cycle(4.0, 2.0, 4e-10), cycle(1.0, 3.0, 3e-10)];
    let fresh = FreshPages { reused_up_to_bytes: 32.0 * MIB, seconds_per_byte: 1e-10, cycled };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    // Within a size, linear in the period and clamped to its two; below the smallest size, in proportion to bytes.
    assert!(close(fresh.reclaimed_per_byte(GIB, 2.0), 2e-10));
    assert!(close(fresh.reclaimed_per_byte(GIB, 0.5), 1e-10));
    assert!(close(fresh.reclaimed_per_byte(0.5 * GIB, 2.0), 1e-10));
    // Between sizes, linear in bytes (1 GiB at 4 s: 3e-10, clamped; 4 GiB at 4 s: 6e-10); past the largest, its own.
    assert!(close(fresh.reclaimed_per_byte(2.5 * GIB, 4.0), 4.5e-10));
    assert!(close(fresh.reclaimed_per_byte(8.0 * GIB, 10.0), 8e-10));
    assert_eq!(fresh.reclaimed_per_byte(0.0, 4.0), 0.0);
    assert_eq!(FreshPages { cycled: Vec::new(), ..fresh }.reclaimed_per_byte(GIB, 2.0), 0.0);
}

#[test]
fn reclaimed_pages_charge_each_fresh_phase_in_proportion_and_the_term_takes_them_away() {
    let g = graph();
    let s = setting(4);
    // One size, the same at both periods: per byte, 3e-10 x the step's fresh bytes over 1 GiB.
    let cycled = vec![cycle(1.0, 0.1, 3e-10), cycle(1.0, 10.0, 3e-10)];
    let point = FreshMemoryPoint { reused_up_to_bytes: 32.0 * MIB, seconds_per_byte: 2e-10, cycled };
    let plain = profile(Some(FreshMemoryPoint { cycled: Vec::new(), ..point.clone() }));
    let (before, after) = (predict(&g, &s, &plain).unwrap(), predict(&g, &s, &profile(Some(point.clone()))).unwrap());
    // The embedding's gradient and Adam's two temporaries of it: 3 x 51.2 MB fresh.
    let ratio = 3e-10 * (3.0 * 51.2e6 / GIB) / 2e-10;
    let gradient = 51.2e6 * 2e-10;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    assert_eq!(after.phases.forward_s, before.phases.forward_s);
    assert!(close(after.phases.backward_s - before.phases.backward_s, gradient * ratio));
    assert!(close(after.phases.optimizer_s - before.phases.optimizer_s, 2.0 * gradient * ratio));
    let emb = after.layers.iter().find(|l| l.name == "emb").unwrap();
    assert!(close(emb.backward.terms[&Term::ReclaimedPages], gradient * ratio));
    let off = predict_with(&g, &s, &profile(Some(point)), &Terms::without(&[Term::ReclaimedPages])).unwrap();
    assert_eq!(off.phases, before.phases);
}

/// input [20 steps, 16] -> bidirectional `cell`, 2 layers of 2,048 (a GRU's hidden weight 3 x 2,048 x 2,048 fp32:
/// 50.3 MB) -> MSE.
fn rnn_graph(cell: trainbench_graph::graph::RnnCell) -> Graph {
    let mut b = GraphBuilder::new("gru");
    let x = b.input("x", &[20, 16], InputKind::Dense).unwrap();
    let r = b.rnn("gru", x, cell, 2048, 2, true).unwrap();
    let t = b.input("t", &[20, 4096], InputKind::Dense).unwrap();
    b.loss("loss", LossKind::Mse, &[r, t]).unwrap();
    b.finish(1, "samples").unwrap()
}

#[test]
fn a_recurrent_layer_makes_its_hidden_weights_gradient_at_every_step() {
    let g = rnn_graph(trainbench_graph::graph::RnnCell::Gru);
    let a = trainbench_graph::analysis::analyze(&g);
    let weight = 3.0 * 2048.0 * 2048.0 * 4.0;
    let gru = &g.nodes[node(&g, "gru")];
    assert_eq!(layer::rnn_weight_gradient_steps(&g, gru), Some((20.0 * 2.0 * 2.0, weight)));
    // Backward: its input's gradient, every trained tensor's gradient, then one hidden weight's gradient per step.
    let (_, bw) = node_allocations(&g, &a, node(&g, "gru"), 1.0, Precision::Fp32);
    assert_eq!(bw.iter().filter(|&&x| x == weight).count(), 80 + 4);
    // Priced: 4 passes over the weight per step at the bandwidth of the sum's two tensors, and off with its term.
    let s = setting(1);
    let p = profile(None);
    let on = predict(&g, &s, &p).unwrap();
    let layer = on.layers.iter().find(|l| l.name == "gru").unwrap();
    let device = crate::predict::coefficients(&p, Precision::Fp32).unwrap();
    let expected = 80.0 * device.memory_at_s(4.0 * weight, 2.0 * weight);
    let priced = layer.backward.terms.get(&Term::RnnWeightGradients).copied().unwrap();
    assert!((priced - expected).abs() <= 1e-9 * expected, "{priced} {expected}");
    let off = predict_with(&g, &s, &p, &Terms::without(&[Term::RnnWeightGradients])).unwrap();
    assert!((on.phases.backward_s - off.phases.backward_s - expected).abs() <= 1e-9 * expected);
    assert_eq!(on.phases.forward_s, off.phases.forward_s);
}

#[test]
fn an_lstm_makes_its_weights_gradient_once_through_onednn() {
    let g = rnn_graph(trainbench_graph::graph::RnnCell::Lstm);
    let a = trainbench_graph::analysis::analyze(&g);
    let lstm = &g.nodes[node(&g, "gru")];
    assert_eq!(layer::rnn_weight_gradient_steps(&g, lstm), None);
    // No per-step gradient among its backward allocations: of the hidden weight's size (4 x 2,048 x 2,048 fp32),
    // only the 4 hidden weights' own gradients (2 layers x 2 directions).
    let (_, bw) = node_allocations(&g, &a, node(&g, "gru"), 1.0, Precision::Fp32);
    let weight = 4.0 * 2048.0 * 2048.0 * 4.0;
    assert_eq!(bw.iter().filter(|&&x| x == weight).count(), 4, "{bw:?}");
    let on = predict(&g, &setting(1), &profile(None)).unwrap();
    let layer = on.layers.iter().find(|l| l.name == "gru").unwrap();
    assert_eq!(layer.backward.terms.get(&Term::RnnWeightGradients).copied().unwrap_or(0.0), 0.0);
}
