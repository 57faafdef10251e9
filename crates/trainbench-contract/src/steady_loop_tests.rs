//! Tests of the shared training loop: warm-up count, iteration and time budgets, timeout, stop requests, the
//! data-parallel end and a target, on a scripted step with a simulated clock, and through the mock backend.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::backend::{Backend, NoProbe};
use crate::mock::MockBackend;
use crate::target::{EvalEvery, TargetMetric, TargetPlan};
use trainbench_graph::model::{MlpSpec, ModelSpec};
use trainbench_graph::zoo::build;

/// A step of fixed simulated seconds that notes what the loop asked of it.
#[derive(Default)]
struct Scripted {
    seconds: f64,
    /// (index, measured, wish) of every step.
    calls: Vec<(u64, bool, EndWish)>,
    /// Steps taken when `measuring` was called.
    measuring_at: Vec<usize>,
    /// The measured step after which the workers agree to end, and whether interrupted.
    agree_at: Option<(u64, bool)>,
    /// Accuracy of each evaluation, in order.
    accuracies: Vec<u64>,
    evaluations: Vec<EvalWhen>,
}

impl SteadyStep for Scripted {
    type Error = BackendError;

    fn step(&mut self, index: u64, measured: bool, wish: EndWish) -> Result<StepOutcome, BackendError> {
        self.calls.push((index, measured, wish));
        let agreed_end = self.agree_at.filter(|(at, _)| measured && *at == index).map(|(_, i)| i);
        let phases = PhaseTimes { total_s: self.seconds, ..PhaseTimes::default() };
        Ok(StepOutcome { phases, loss: measured.then_some(1.0), agreed_end })
    }

    fn measuring(&mut self) -> Result<(), BackendError> {
        self.measuring_at.push(self.calls.len());
        Ok(())
    }

    fn evaluate(&mut self, when: EvalWhen) -> Result<(EvalTally, Option<f64>), BackendError> {
        self.evaluations.push(when);
        let correct = self.accuracies.get(self.evaluations.len() - 1).copied().unwrap_or(0);
        let mut tally = EvalTally::default();
        tally.add(100, 0.5, correct, 100);
        Ok((tally, Some(0.5)))
    }
}

fn scripted(seconds: f64) -> Scripted {
    Scripted { seconds, ..Scripted::default() }
}

fn settings(warmup: u64, budget: Budget) -> LoopSettings {
    LoopSettings { warmup, budget, timeout_s: None, distributed: false, clock: LoopClock::Simulated }
}

fn run(s: LoopSettings, step: &mut Scripted, probe: &mut dyn Probe) -> (LoopEnd, RawMeasurements) {
    let plan = RunPlan::for_tests("p", 1);
    let mut lp = SteadyLoop::new(&plan, s, false, None).unwrap();
    let mut out = RawMeasurements::default();
    let end = lp.run(step, probe, &mut out).unwrap();
    (end, out)
}

/// Stops the run once it has seen this many steps.
struct StopAfter(u64, u64);

impl Probe for StopAfter {
    fn step(&mut self, _index: u64, _measured: bool, _phases: &PhaseTimes) {
        self.1 += 1;
    }
    fn should_stop(&self) -> bool {
        self.1 >= self.0
    }
}

#[test]
fn warm_up_then_the_measured_iterations() {
    let mut step = scripted(0.25);
    let (end, out) = run(settings(3, Budget::Iterations(5)), &mut step, &mut NoProbe);
    assert_eq!(end, LoopEnd { steps: 8, measured: 5, in_warmup: false });
    assert_eq!((out.warmup_steps.len(), out.steps.seen(), out.interrupted), (3, 5, false));
    assert_eq!(step.measuring_at, vec![3], "called once, after the warm-up");
    let kinds: Vec<(u64, bool)> = step.calls.iter().map(|c| (c.0, c.1)).collect();
    assert_eq!(kinds, (0..8).map(|i| (i, i >= 3)).collect::<Vec<_>>());
    assert_eq!(out.steps.loss_values(), vec![1.0; 5]);
    assert_eq!(out.target, None);
}

#[test]
fn a_time_budget_counts_from_the_first_measured_step() {
    let mut step = scripted(0.25);
    let (end, out) = run(settings(2, Budget::Seconds(1.0)), &mut step, &mut NoProbe);
    assert_eq!((end.measured, out.warmup_steps.len(), out.interrupted), (4, 2, false));
    // At least one measured step even when the budget is spent before it.
    let (end, _) = run(settings(0, Budget::Seconds(0.0)), &mut scripted(0.25), &mut NoProbe);
    assert_eq!(end.measured, 1);
}

#[test]
fn the_timeout_interrupts_in_the_warm_up_or_the_measured_steps() {
    let timed = |warmup| LoopSettings { timeout_s: Some(1.0), ..settings(warmup, Budget::Iterations(100)) };
    let (end, out) = run(timed(2), &mut scripted(0.25), &mut NoProbe);
    assert_eq!(end, LoopEnd { steps: 4, measured: 2, in_warmup: false });
    assert!(out.interrupted);
    let mut step = scripted(0.25);
    let (end, out) = run(timed(10), &mut step, &mut NoProbe);
    assert_eq!(end, LoopEnd { steps: 4, measured: 0, in_warmup: true });
    assert!(out.interrupted && out.steps.is_empty());
    assert!(step.measuring_at.is_empty(), "no measured steps, no reset");
}

#[test]
fn a_stop_request_interrupts_before_the_next_step() {
    let (end, out) = run(settings(2, Budget::Iterations(10)), &mut scripted(0.1), &mut StopAfter(5, 0));
    assert_eq!((end.steps, end.measured, out.interrupted), (5, 3, true));
    let (end, out) = run(settings(2, Budget::Iterations(10)), &mut scripted(0.1), &mut StopAfter(0, 0));
    assert_eq!((end.steps, end.in_warmup, out.interrupted), (0, true, true));
}

#[test]
fn data_parallel_workers_end_on_the_agreed_step_with_their_wishes() {
    let mut step = Scripted { agree_at: Some((3, false)), ..scripted(0.1) };
    let s = LoopSettings { distributed: true, ..settings(1, Budget::Iterations(3)) };
    let (end, out) = run(s, &mut step, &mut NoProbe);
    assert_eq!((end.measured, out.interrupted), (3, false));
    let wishes: Vec<EndWish> = step.calls.iter().map(|c| c.2).collect();
    assert_eq!(wishes, vec![EndWish::Continue, EndWish::Continue, EndWish::Continue, EndWish::Finished]);
    // A stop is a wish, not an end: the step still runs, and the agreed end interrupts the run.
    let mut step = Scripted { agree_at: Some((1, true)), ..scripted(0.1) };
    let s = LoopSettings { distributed: true, ..settings(1, Budget::Iterations(10)) };
    let (end, out) = run(s, &mut step, &mut StopAfter(1, 0));
    assert_eq!((end.steps, out.interrupted), (2, true));
    assert_eq!(step.calls[1].2, EndWish::Interrupted);
}

#[test]
fn a_target_evaluates_on_its_cadence_and_ends_the_run_when_reached() {
    let mut plan = RunPlan::for_tests("p", 1);
    plan.target = Some(TargetPlan {
        metric: TargetMetric::Accuracy,
        value: 0.9,
        every: EvalEvery::Steps(2),
        max_epochs: None,
        max_steps: Some(100),
        max_seconds: None,
    });
    assert!(SteadyLoop::new(&plan, settings(1, Budget::Iterations(1)), false, None).is_err(), "no evaluation split");
    let mut lp = SteadyLoop::new(&plan, settings(1, Budget::Iterations(1)), true, None).unwrap();
    let mut step = Scripted { accuracies: vec![50, 95], ..scripted(0.25) };
    let mut out = RawMeasurements::default();
    let end = lp.run(&mut step, &mut NoProbe, &mut out).unwrap();
    let target = out.target.unwrap();
    assert!(target.reached);
    // The warm-up step counts towards the cadence: evaluations after steps 2 and 4 (1 warm-up + 3 measured).
    assert_eq!((end.measured, target.steps_to_target), (3, Some(4)));
    assert_eq!(step.evaluations, vec![EvalWhen::Due, EvalWhen::Due]);
    // Simulated clock: four steps of 0.25 s and two evaluations of 0.5 s.
    assert_eq!(target.time_to_target_s, Some(2.0));
}

#[test]
fn the_mock_backend_runs_the_shared_loop() {
    let g = build(&ModelSpec::Mlp(MlpSpec { inputs: 16, hidden: vec![8], classes: 4 })).unwrap();
    let plan = RunPlan { warmup: 2, ..RunPlan::for_tests("p", 6) };
    let raw = MockBackend::default().run(&plan, &g, &mut NoProbe).unwrap();
    assert_eq!((raw.warmup_steps.len(), raw.steps.seen(), raw.interrupted), (2, 6, false));
    let timed = RunPlan { budget: Budget::Seconds(0.05), ..plan.clone() };
    let raw = MockBackend::default().run(&timed, &g, &mut NoProbe).unwrap();
    let measured: f64 = raw.steps.phases().iter().map(|p| p.total_s).sum();
    assert!(measured > 0.049 && raw.steps.seen() > 10 && !raw.interrupted, "simulated seconds: {measured}");
    let stopped = MockBackend::default().run(&plan, &g, &mut StopAfter(4, 0)).unwrap();
    assert_eq!((stopped.warmup_steps.len(), stopped.steps.seen(), stopped.interrupted), (2, 2, true));
}
