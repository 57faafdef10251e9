//! The training loop every backend shares ([`SteadyLoop`]): the plan's warm-up steps, then measured steps until
//! the budget (iterations, or seconds from the first measured step) or the target ([`TargetTracker`]) ends
//! them; the run's timeout and the stop request (the probe) checked before every step; each step reported to
//! the probe and recorded in the run's [`StepLog`](crate::steplog::StepLog) (warm-up steps apart); with a target,
//! the evaluation split evaluated when due and once more at the end. A backend drives it with its own step
//! ([`SteadyStep`]), which owns everything the backend times and synchronises; the loop times nothing of a step.
//!
//! Two clocks: the wall clock ([`LoopClock::Wall`], from [`SteadyLoop::new`]) for real backends, and a
//! simulated one ([`LoopClock::Simulated`]) advanced by each step's reported total and each evaluation's
//! reported seconds, for the mock backend, which sleeps nowhere.
//!
//! Data-parallel workers ([`LoopSettings::distributed`]) stop together: they never stop on their own before a
//! step, but tell the step their wish ([`EndWish`]) for the exchange to agree on, and the loop ends after the
//! step in which the workers agreed ([`StepOutcome::agreed_end`]).

use std::time::Instant;

use crate::backend::Probe;
use crate::error::BackendError;
use crate::measured::RawMeasurements;
use crate::phases::PhaseTimes;
use crate::plan::{Budget, RunPlan};
use crate::target::{EvalTally, TargetOutcome, TargetTracker};

/// Which clock the loop reads for the time budget, the timeout and the target's elapsed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoopClock {
    /// Wall-clock time since [`SteadyLoop::new`].
    #[default]
    Wall,
    /// Simulated seconds: the sum of the steps' `total_s` and of the evaluations' reported seconds.
    Simulated,
}

/// How the loop runs: the plan's warm-up, budget and timeout, and the backend's choices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopSettings {
    /// Warm-up steps before the measured ones.
    pub warmup: u64,
    /// What ends the measured steps when the plan has no target.
    pub budget: Budget,
    /// Seconds after which the run stops, interrupted (checked before every step); `None`: no timeout.
    pub timeout_s: Option<f64>,
    /// The run is one worker of a data-parallel group (see the module docs).
    pub distributed: bool,
    /// The clock the budget, the timeout and the target read.
    pub clock: LoopClock,
}

impl LoopSettings {
    /// `plan`'s warm-up, budget and timeout, on the wall clock, for a single worker.
    pub fn of(plan: &RunPlan) -> Self {
        LoopSettings {
            warmup: plan.warmup,
            budget: plan.budget,
            timeout_s: plan.timeout_s,
            distributed: false,
            clock: LoopClock::Wall,
        }
    }
}

/// What this worker wishes, before a step, for the end of a data-parallel run (the exchange agrees on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndWish {
    /// Train on.
    #[default]
    Continue,
    /// This worker's budget ends with this step.
    Finished,
    /// This worker was stopped (a stop request, the timeout).
    Interrupted,
}

/// What one step reports to the loop.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepOutcome {
    /// The step's phase times (`total_s` is what the budget, the target and a simulated clock count).
    pub phases: PhaseTimes,
    /// The step's loss, when the step read it.
    pub loss: Option<f64>,
    /// Data-parallel: the workers agreed in this step's exchange that it was the last, and whether the run is
    /// then interrupted (some worker was stopped); `None` otherwise.
    pub agreed_end: Option<bool>,
}

/// Why the loop asks for an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalWhen {
    /// The target's cadence says one is due after this step.
    Due,
    /// The run ended on its budget with steps not yet evaluated.
    Final,
}

/// A backend's training step, which the loop drives.
pub trait SteadyStep {
    /// The backend's error; the loop's own errors (a target it cannot track) are [`BackendError`]s.
    type Error: From<BackendError>;

    /// Train step `index` (counted from 0 over warm-up and measured steps); `measured` says which kind it is,
    /// `wish` what this worker wishes for the end of a data-parallel run.
    fn step(&mut self, index: u64, measured: bool, wish: EndWish) -> Result<StepOutcome, Self::Error>;

    /// Called once between the last warm-up step and the first measured one (e.g. to reset memory peaks).
    fn measuring(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Evaluate the evaluation split (a run with a target): the tally and, on a simulated clock, the seconds it
    /// took (`None`: the loop times the call on the wall clock).
    fn evaluate(&mut self, when: EvalWhen) -> Result<(EvalTally, Option<f64>), Self::Error> {
        let _ = when;
        Err(BackendError::Data("the run has a target but no evaluation split".into()).into())
    }
}

/// How the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopEnd {
    /// Steps taken, warm-up included: the index the next step would have.
    pub steps: u64,
    /// Measured steps taken.
    pub measured: u64,
    /// The run stopped during its warm-up: nothing was measured, [`SteadyStep::measuring`] was not called and
    /// no target outcome was recorded (see [`SteadyLoop::into_target`]).
    pub in_warmup: bool,
}

/// The shared training loop (see the module docs).
#[derive(Debug)]
pub struct SteadyLoop {
    settings: LoopSettings,
    tracker: Option<TargetTracker>,
    started: Instant,
    simulated_s: f64,
}

impl SteadyLoop {
    /// The loop of `plan` as `settings` say; its wall clock starts now. With a target, `has_eval` must say the
    /// run has an evaluation split, and `epoch_batches` is the training split's batches per epoch when known
    /// (a step with gradient accumulation takes one batch per micro-batch, so an epoch is fewer steps).
    pub fn new(
        plan: &RunPlan,
        settings: LoopSettings,
        has_eval: bool,
        epoch_batches: Option<u64>,
    ) -> Result<Self, BackendError> {
        let tracker = match &plan.target {
            None => None,
            Some(_) if !has_eval => {
                return Err(BackendError::Data("the run has a target but no evaluation split".into()));
            }
            Some(t) => {
                let epoch_steps = epoch_batches.map(|b| (b / plan.schedule.micro_batches()).max(1));
                Some(TargetTracker::new(t, epoch_steps).map_err(|e| BackendError::Data(e.to_string()))?)
            }
        };
        Ok(SteadyLoop { settings, tracker, started: Instant::now(), simulated_s: 0.0 })
    }

    /// Seconds on the loop's clock.
    pub fn elapsed_s(&self) -> f64 {
        match self.settings.clock {
            LoopClock::Wall => self.started.elapsed().as_secs_f64(),
            LoopClock::Simulated => self.simulated_s,
        }
    }

    /// Whether the run's timeout has passed.
    pub fn timed_out(&self) -> bool {
        self.settings.timeout_s.is_some_and(|s| self.elapsed_s() >= s)
    }

    fn advance(&mut self, seconds: f64) {
        if self.settings.clock == LoopClock::Simulated {
            self.simulated_s += seconds;
        }
    }

    /// The target's outcome, when the loop still holds its tracker (it ended in the warm-up).
    pub fn into_target(self) -> Option<TargetOutcome> {
        self.tracker.map(TargetTracker::outcome)
    }

    /// Evaluate through `step` and record it in the tracker.
    fn evaluate<S: SteadyStep + ?Sized>(&mut self, step: &mut S, when: EvalWhen) -> Result<(), S::Error> {
        let e = Instant::now();
        let (tally, simulated) = step.evaluate(when)?;
        let took = simulated.unwrap_or_else(|| e.elapsed().as_secs_f64());
        self.advance(took);
        let elapsed = self.elapsed_s();
        if let Some(t) = self.tracker.as_mut() {
            t.record(tally, took, elapsed);
        }
        Ok(())
    }

    /// Run the warm-up and measured steps through `step`, reporting each to `probe` and recording it in `out`
    /// (`steps`, `warmup_steps`, `interrupted`, and `target` unless the run stopped in its warm-up).
    pub fn run<S: SteadyStep + ?Sized>(
        &mut self,
        step: &mut S,
        probe: &mut dyn Probe,
        out: &mut RawMeasurements,
    ) -> Result<LoopEnd, S::Error> {
        let distributed = self.settings.distributed;
        let mut index = 0u64;
        for _ in 0..self.settings.warmup {
            let stop = probe.should_stop() || self.timed_out();
            if stop && !distributed {
                out.interrupted = true;
                return Ok(LoopEnd { steps: index, measured: 0, in_warmup: true });
            }
            let wish = if stop { EndWish::Interrupted } else { EndWish::Continue };
            let o = step.step(index, false, wish)?;
            self.advance(o.phases.total_s);
            if let Some(t) = self.tracker.as_mut() {
                t.trained(o.phases.total_s);
            }
            probe.step(index, false, &o.phases);
            out.warmup_steps.record(o.phases);
            index += 1;
            if o.agreed_end.is_some() {
                out.interrupted = true;
                return Ok(LoopEnd { steps: index, measured: 0, in_warmup: true });
            }
        }
        step.measuring()?;
        let measure_start = self.elapsed_s();
        let mut measured = 0u64;
        loop {
            let now = self.elapsed_s();
            let done = match (&mut self.tracker, self.settings.budget) {
                (Some(t), _) => t.finished(now),
                (None, Budget::Iterations(n)) => measured >= n,
                (None, Budget::Seconds(s)) => measured > 0 && now - measure_start >= s,
            };
            if done && !distributed {
                break;
            }
            let stop = probe.should_stop() || self.timed_out();
            if stop && !distributed {
                out.interrupted = true;
                break;
            }
            // This worker's wish to end after this step: the budget reached with it, or a stop.
            let last = match self.settings.budget {
                Budget::Iterations(n) => measured + 1 >= n,
                Budget::Seconds(s) => self.elapsed_s() - measure_start >= s,
            };
            let wish = match (stop, last) {
                (true, _) => EndWish::Interrupted,
                (false, true) => EndWish::Finished,
                (false, false) => EndWish::Continue,
            };
            let o = step.step(index, true, wish)?;
            self.advance(o.phases.total_s);
            probe.step(index, true, &o.phases);
            out.steps.record(o.phases, o.loss);
            index += 1;
            measured += 1;
            if distributed && let Some(interrupted) = o.agreed_end {
                // Another worker's budget may end first (clocks differ): only a stop interrupts.
                out.interrupted = interrupted;
                break;
            }
            if let Some(t) = self.tracker.as_mut() {
                t.trained(o.phases.total_s);
                if t.due() {
                    self.evaluate(step, EvalWhen::Due)?;
                }
            }
        }
        if self.tracker.as_ref().is_some_and(|t| t.unevaluated_steps()) && !out.interrupted {
            self.evaluate(step, EvalWhen::Final)?;
        }
        out.target = self.tracker.take().map(TargetTracker::outcome);
        Ok(LoopEnd { steps: index, measured, in_warmup: false })
    }
}

#[cfg(test)]
#[path = "steady_loop_tests.rs"]
mod tests;
