//! Tests of the mock backend: deterministic, FLOP-proportional, out-of-memory and early stop.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::backend::{NoProbe, OptimizerSpec, Probe};
use crate::model::{MlpSpec, ModelSpec};
use crate::zoo::build;

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
    assert_eq!((a.warmup_steps.len(), a.steps.len(), a.losses.len()), (3, 20, 20));
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
    let s = small.steps[0];
    let sum = s.data_s + s.forward_s + s.backward_s + s.comm_s + s.optimizer_s;
    assert!((sum - s.total_s).abs() < 1e-12);
    // Warm-up is slower than steady state (a decaying transient).
    assert!(small.warmup_steps[0].total_s > 2.0 * last(&small));
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
    let total: f64 = r.steps.iter().map(|s| s.total_s).sum();
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
    assert_eq!((r.warmup_steps.len(), r.steps.len()), (3, 4));
}
