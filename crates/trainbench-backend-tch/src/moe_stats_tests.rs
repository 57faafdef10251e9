//! Routing figures pinned on a hand-worked routing: a router whose logits send known tokens to known experts,
//! so the counts, the coefficient of variation, the busiest share, the drops and the balance are worked out by
//! hand.

#![allow(clippy::unwrap_used)]

use tch::{Device, Kind, Tensor};
use trainbench_contract::routing::{RoutingTally, busiest_share, coefficient_of_variation};
use trainbench_graph::graph::{MoeRouter, Node, Op, Shape};

use super::{StepRouting, per_layer};
use crate::moe::{forward, take_aux_losses, take_routing};

/// A top-1 softmax MoE of width 2 over 4 experts, aux-loss coefficient 0.1.
fn node(capacity_factor: Option<f32>) -> Node {
    Node {
        name: "h0.mlp".into(),
        op: Op::Moe {
            features: 2,
            experts: 4,
            top_k: 1,
            expert_ffn: 3,
            shared_ffn: 0,
            router: MoeRouter::Softmax,
            capacity_factor,
            aux_loss: 0.1,
        },
        inputs: vec![0],
        shape: Shape(vec![8, 2]),
        part: None,
        tied_to: None,
        frozen: false,
    }
}

/// The router's rows point along +x, +y, -x, -y (logits +-10 or 0), so token `[1, 0]` goes to expert 0,
/// `[0, 1]` to 1, `[-1, 0]` to 2, `[0, -1]` to 3; the experts' weights do not matter to the routing.
fn params() -> Vec<Tensor> {
    let router = Tensor::from_slice(&[10f32, 0., 0., 10., -10., 0., 0., -10.]).reshape([4, 2]);
    let opts = (Kind::Float, Device::Cpu);
    vec![router, Tensor::ones([4, 3, 2], opts), Tensor::ones([4, 3, 2], opts), Tensor::ones([4, 2, 3], opts)]
}

/// Five tokens for expert 0, one each for experts 1, 2 and 3 (expert 0's last, so it is the one dropped first).
fn tokens() -> Tensor {
    Tensor::from_slice(&[1f32, 0., 1., 0., 0., 1., 1., 0., -1., 0., 1., 0., 0., -1., 1., 0.]).reshape([1, 8, 2])
}

fn route(capacity_factor: Option<f32>) -> Vec<trainbench_contract::routing::LayerRouting> {
    let n = node(capacity_factor);
    let _ = take_routing();
    let _ = forward(&n, &tokens(), &params()).unwrap();
    let _ = take_aux_losses();
    per_layer(take_routing(), std::slice::from_ref(&n))
}

/// Softmax over logits `[10, 0, -10, 0]`: the chosen expert's probability, an orthogonal one's, the opposite's.
fn probabilities() -> (f64, f64, f64) {
    let z = 10f64.exp() + 2.0 + (-10f64).exp();
    (10f64.exp() / z, 1.0 / z, (-10f64).exp() / z)
}

/// Switch Transformer's balance for shares `[5, 1, 1, 1] / 8`: 4 x sum_e share_e x mean_t p_te.
fn balance() -> f64 {
    let (hit, side, opposite) = probabilities();
    // Expert 0: five tokens on it, two orthogonal, one opposite; experts 1-3 alike by symmetry per token kind.
    let p0 = (5.0 * hit + 2.0 * side + opposite) / 8.0;
    let p1 = (5.0 * side + hit + 0.0 * side + opposite + side) / 8.0; // +x five, +y, -x, -y
    let p2 = (5.0 * opposite + side + hit + side) / 8.0;
    let p3 = (5.0 * side + opposite + side + hit) / 8.0;
    4.0 * (5.0 / 8.0 * p0 + (p1 + p2 + p3) / 8.0)
}

#[test]
fn dropless_routing_by_hand() {
    let step = route(None);
    assert_eq!(step.len(), 1);
    let l = &step[0];
    assert_eq!(l.layer, "h0.mlp");
    assert_eq!(l.tokens_per_expert, vec![5, 1, 1, 1]);
    assert_eq!(l.dropped, 0);
    assert_eq!(l.aux_coefficient, f64::from(0.1f32));
    // Mean 2, deviations 3, -1, -1, -1: variance 3, CV sqrt(3) / 2; busiest 5 of 8.
    let cv = coefficient_of_variation(&l.tokens_per_expert).unwrap();
    assert!((cv - 3f64.sqrt() / 2.0).abs() < 1e-12, "{cv}");
    assert_eq!(busiest_share(&l.tokens_per_expert), Some(5.0 / 8.0));
    assert!((l.balance - balance()).abs() < 1e-5, "{} against {}", l.balance, balance());
    // About 1.75: (5/8)^2 + 3 x (1/8)(1/8)... times 4 = 4 x 28 / 64.
    assert!((l.balance - 1.75).abs() < 1e-3);
}

#[test]
fn a_capacity_factor_of_one_keeps_two_per_expert_and_drops_three() {
    // Capacity ceil(1.0 x 8 x 1 / 4) = 2: expert 0 keeps two of its five.
    let l = route(Some(1.0)).remove(0);
    assert_eq!(l.tokens_per_expert, vec![2, 1, 1, 1]);
    assert_eq!(l.dropped, 3);
    // Mean 1.25, deviations 0.75, -0.25 x 3: variance 0.1875, CV 0.4330 / 1.25; busiest 2 of 5 computed.
    let cv = coefficient_of_variation(&l.tokens_per_expert).unwrap();
    assert!((cv - 0.1875f64.sqrt() / 1.25).abs() < 1e-12, "{cv}");
    assert_eq!(busiest_share(&l.tokens_per_expert), Some(0.4));
    // The balance counts the router's choices before dropping: the same as dropless.
    assert!((l.balance - balance()).abs() < 1e-5);
}

#[test]
fn a_step_sums_its_micro_batches_and_only_measured_steps_are_tallied() {
    let n = node(Some(1.0));
    let nodes = std::slice::from_ref(&n);
    let mut routing = StepRouting::default();
    let _ = take_routing();
    // An unmeasured step: collected, then cleared by the next step.
    let _ = forward(&n, &tokens(), &params()).unwrap();
    routing.collect_forward();
    routing.clear();
    // A measured step of two micro-batches.
    for _ in 0..2 {
        let _ = forward(&n, &tokens(), &params()).unwrap();
        routing.collect_forward();
    }
    routing.finish_measured(nodes);
    let _ = take_aux_losses();
    let tally: RoutingTally = routing.take_tally().unwrap();
    assert_eq!(tally.steps, 1);
    let l = &tally.layers[0];
    assert_eq!(l.tokens_per_expert, vec![4, 2, 2, 2]);
    assert_eq!(l.dropped, 6);
    assert!((l.balance_sum - balance()).abs() < 1e-5, "the balance is the micro-batches' mean");
    assert!((l.aux_loss_sum - 0.1 * balance()).abs() < 1e-5);
    assert_eq!(l.busiest_max, 0.4);
    assert_eq!(routing.take_tally(), None, "taken once");
}
