//! The terms of a prediction: every phase's breakdown adds up to its time, and a term switched off takes exactly
//! its own seconds away, on the committed calibrated profile.

use trainbench_graph::graph::{InputKind, LossKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec, Precision};

use super::*;
use trainbench_comm::Topology;

fn calibrated() -> HardwareFile {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml")).unwrap();
    crate::hardware::load::with_fitted(toml::from_str(&text).unwrap())
}

/// tokens -> embedding -> linear (tied to the embedding) -> relu read twice (a gradient sum) -> cross-entropy.
fn graph() -> Graph {
    let mut b = GraphBuilder::new("terms");
    let x = b.input("x", &[8], InputKind::Tokens { vocab: 100 }).unwrap();
    let e = b.embedding("emb", x, 100, 32).unwrap();
    let h = b.linear("fc", e, 32, true).unwrap();
    let r = b.act("relu", h, trainbench_graph::graph::Activation::Relu).unwrap();
    let s = b.add_nodes("sum", &[r, h]).unwrap();
    let y = b.linear("proj", s, 100, false).unwrap();
    b.tie(y, e).unwrap();
    let t = b.input("t", &[8], InputKind::Labels { classes: 100 }).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[y, t]).unwrap();
    b.finish(1, "samples").unwrap()
}

fn setting() -> Setting {
    Setting {
        batch: 4,
        precision: Precision::Fp32,
        optimizer: OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        topology: Topology::single(),
        schedule: Default::default(),
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-15)
}

#[test]
fn every_phase_breaks_down_into_its_terms() {
    let p = predict(&graph(), &setting(), &calibrated()).unwrap();
    assert!(p.terms_off.is_empty());
    for l in &p.layers {
        for phase in [&l.forward, &l.backward] {
            let sum: f64 = phase.terms.values().sum();
            assert!(close(sum, phase.time_s), "{}: {sum} against {}: {:?}", l.name, phase.time_s, phase.terms);
        }
    }
    let on = |t: Term| p.layers.iter().any(|l| l.forward.terms.contains_key(&t) || l.backward.terms.contains_key(&t));
    for t in [Term::PerOpOverhead, Term::GradientSums, Term::TiedWeights, Term::FirstNodeColdStart, Term::StepFixed] {
        assert!(on(t), "{t:?} priced somewhere");
    }
}

#[test]
fn a_term_switched_off_takes_its_seconds_away() {
    let (g, s, prof) = (graph(), setting(), calibrated());
    let full = predict(&g, &s, &prof).unwrap();
    for t in [Term::FirstNodeColdStart, Term::StepFixed, Term::PerOpOverhead] {
        let without = predict_with(&g, &s, &prof, &Terms::without(&[t])).unwrap();
        assert_eq!(without.terms_off, [t]);
        let own: f64 = full.layers.iter().flat_map(|l| [&l.forward, &l.backward]).filter_map(|p| p.terms.get(&t)).sum();
        let compute = |p: &Prediction| p.phases.forward_s + p.phases.backward_s;
        assert!(own > 0.0 && close(compute(&full) - compute(&without), own), "{t:?}: {own}");
    }
    // Without the exchange and the optimizer, their phases are zero; the other phases are as they were (but for
    // the cold starts, which count the optimizer's bytes among what the step moves).
    let cold = Term::FirstNodeColdStart;
    let base = predict_with(&g, &s, &prof, &Terms::without(&[cold])).unwrap();
    let without = predict_with(&g, &s, &prof, &Terms::without(&[Term::Optimizer, Term::Exchange, cold])).unwrap();
    assert_eq!((without.phases.optimizer_s, without.phases.comm_s), (0.0, 0.0));
    assert!(base.phases.optimizer_s > 0.0 && close(without.phases.forward_s, base.phases.forward_s));
}
