//! Tests of the mock backend: deterministic, FLOP-proportional, out-of-memory and early stop.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::backend::{Budget, NoProbe, Probe};
use trainbench_graph::model::{MlpSpec, ModelSpec};
use trainbench_graph::training::OptimizerSpec;
use trainbench_graph::zoo::build;

fn graph(hidden: usize) -> Graph {
    build(&ModelSpec::Mlp(MlpSpec { inputs: 64, hidden: vec![hidden], classes: 10 })).unwrap()
}

fn plan(batch: usize, budget: Budget) -> RunPlan {
    RunPlan {
        batch_size: batch,
        warmup: 3,
        budget,
        seed: 5,
        optimizer: OptimizerSpec::default(),
        ..RunPlan::for_tests(&format!("mlp.b{batch}"), 1)
    }
}

#[test]
fn deterministic_and_named_as_a_mock() {
    let g = graph(128);
    let p = plan(8, Budget::Iterations(20));
    let a = MockBackend::default().run(&p, &g, &mut NoProbe).unwrap();
    let b = MockBackend::default().run(&p, &g, &mut NoProbe).unwrap();
    assert_eq!(a, b);
    assert_eq!((a.warmup_steps.len(), a.steps.seen(), a.steps.loss_values().len()), (3, 20, 20));
    assert!(a.device.as_ref().unwrap().name.contains("mock"));
    assert!(!a.interrupted);
    let other_seed = MockBackend::default().run(&RunPlan { seed: 6, ..p }, &g, &mut NoProbe).unwrap();
    assert_ne!(a.steps, other_seed.steps);
}

#[test]
fn step_time_follows_flops_and_slowdown() {
    let cfg = MockConfig { jitter: 0.0, overhead_s: 0.0, ..MockConfig::default() };
    let p = plan(8, Budget::Iterations(10));
    let small = MockBackend::new(cfg.clone()).run(&p, &graph(128), &mut NoProbe).unwrap();
    let large = MockBackend::new(cfg.clone()).run(&p, &graph(256), &mut NoProbe).unwrap();
    let last = |r: &RawMeasurements| r.steps.last().unwrap().total_s;
    // Doubling the hidden width roughly doubles the FLOPs of a 64-h-10 MLP (64h + 10h multiply-adds).
    let ratio = last(&large) / last(&small);
    assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    let slow = MockBackend::new(MockConfig { slowdown: 1.5, ..cfg }).run(&p, &graph(128), &mut NoProbe).unwrap();
    assert!((last(&slow) / last(&small) - 1.5).abs() < 1e-9);
    // Phases add up to the total.
    let s = small.steps.phases()[0];
    let sum = s.data_s + s.forward_s + s.backward_s + s.comm_s + s.optimizer_s;
    assert!((sum - s.total_s).abs() < 1e-12);
    // Warm-up is slower than steady state (a decaying transient).
    assert!(small.warmup_steps.first.unwrap().total_s > 2.0 * last(&small));
}

#[test]
fn out_of_memory_is_an_error_value() {
    let tiny = MockConfig { memory_bytes: 1 << 20, ..MockConfig::default() };
    let err = MockBackend::new(tiny).run(&plan(4096, Budget::Iterations(5)), &graph(512), &mut NoProbe);
    assert!(matches!(err, Err(BackendError::OutOfMemory { batch_size: 4096, .. })), "{err:?}");
}

#[test]
fn the_fail_hook_fails_only_its_repeat() {
    let g = graph(16);
    let mut mock = MockBackend::new(MockConfig { fail_in_repeat: Some(1), ..MockConfig::default() });
    let p = plan(8, Budget::Iterations(5));
    assert!(mock.run(&p, &g, &mut NoProbe).is_ok());
    let err = mock.run(&RunPlan { repeat: 1, ..p }, &g, &mut NoProbe).unwrap_err();
    assert!(matches!(&err, BackendError::Framework(m) if m.contains("test hook")), "{err}");
}

#[test]
fn time_budget_is_simulated_time() {
    let p = plan(8, Budget::Seconds(0.01));
    let r = MockBackend::default().run(&p, &graph(128), &mut NoProbe).unwrap();
    let total: f64 = r.steps.phases().iter().map(|s| s.total_s).sum();
    assert!(total >= 0.01 && total - r.steps.last().unwrap().total_s < 0.01);
}

struct StopAfter(u64, u64);
impl Probe for StopAfter {
    fn step(&mut self, _i: u64, _m: bool, _p: &PhaseTimes) {
        self.1 += 1;
    }
    fn should_stop(&self) -> bool {
        self.1 >= self.0
    }
}

#[test]
fn should_stop_keeps_what_was_measured() {
    let mut probe = StopAfter(7, 0);
    let r = MockBackend::default().run(&plan(8, Budget::Iterations(100)), &graph(64), &mut probe).unwrap();
    assert!(r.interrupted);
    assert_eq!((r.warmup_steps.len(), r.steps.seen()), (3, 4));
}

#[test]
fn trains_on_the_batches_given_and_evaluates_to_a_target() {
    use crate::target::{EvalEvery, TargetMetric, TargetPlan};
    use trainbench_data::memory::{constant_label_batches, synthetic_batches};
    use trainbench_data::{EvalSet, MemorySource};
    let g = graph(16);
    let target = TargetPlan {
        metric: TargetMetric::Accuracy,
        value: 1.0,
        every: EvalEvery::Epochs(1),
        max_epochs: Some(5),
        max_steps: None,
        max_seconds: None,
    };
    let p = RunPlan { target: Some(target.clone()), ..plan(8, Budget::Iterations(1)) };
    let eval = EvalSet { batches: constant_label_batches(&g, 5, 1, 2, 7), origin: "memory".into() };
    let mut source = MemorySource::new(constant_label_batches(&g, 8, 2, 4, 7));
    let mut probe = NoProbe;
    let mut ctx = RunContext { data: Some(&mut source), eval: Some(&eval), ..RunContext::new(&mut probe) };
    let out = MockBackend::default().run_in(&p, &g, &mut ctx).unwrap();
    let t = out.target.unwrap();
    // 3 warm-up steps and one measured step complete the first epoch of 4 batches; it predicts class 7.
    assert!(t.reached, "{t:?}");
    assert_eq!((t.steps_to_target, t.epochs_to_target, t.eval_samples), (Some(4), Some(1.0), 10));
    assert_eq!(out.steps.seen(), 1);
    assert!(out.steps.phases().iter().all(|s| s.stall_s == 0.0 && s.copy_s == s.data_s));
    // Random labels never reach it: the budget ends the run after 5 epochs, evaluated each epoch.
    let eval = EvalSet { batches: synthetic_batches(&g, 5, 1, 2), origin: "memory".into() };
    let mut source = MemorySource::new(synthetic_batches(&g, 8, 2, 4));
    let mut ctx = RunContext { data: Some(&mut source), eval: Some(&eval), ..RunContext::new(&mut probe) };
    let t = MockBackend::default().run_in(&p, &g, &mut ctx).unwrap().target.unwrap();
    assert!(!t.reached && t.time_to_target_s.is_none());
    assert_eq!(t.curve.len(), 5);
    assert!(t.stopped.contains("max_epochs"), "{}", t.stopped);
    // A target without an evaluation split is an error, not a run that never stops.
    let mut ctx = RunContext { data: Some(&mut source), ..RunContext::new(&mut probe) };
    assert!(matches!(MockBackend::default().run_in(&p, &g, &mut ctx), Err(BackendError::Data(_))));
}
