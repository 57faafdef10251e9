//! The runner's [`Probe`]: drives the progress bar, marks the measured window for the collectors, and stops a
//! run on Ctrl-C or on its timeout. Also owns the process-wide Ctrl-C handler.

use std::cell::Cell;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trainbench_workload::{Budget, PhaseTimes, Probe, RunPlan};

/// Ctrl-C presses seen by this process.
static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

/// Install the Ctrl-C handler (once per process): the first press asks the runner to stop after the current
/// iteration, keeping finished runs; the second exits immediately with status 130.
pub fn install_interrupt_handler() {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        ctrlc::set_handler(|| {
            if INTERRUPTS.fetch_add(1, Ordering::SeqCst) >= 1 {
                eprintln!("\ninterrupted twice: exiting without finishing the current run");
                std::process::exit(130);
            }
            eprintln!("\ninterrupt: stopping after the current iteration (press Ctrl-C again to exit now)");
        })
        .is_ok()
    });
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}

/// A suite's own stop request, set by the test hook or an embedder, checked together with Ctrl-C.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Ask the suite to stop after the current iteration, as a first Ctrl-C would.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether a stop was requested, here or by Ctrl-C.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst) || interrupted()
    }
}

/// Why a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// Ctrl-C, or a [`StopFlag::request`]: the suite stops after this run.
    User,
    /// The plan's timeout elapsed (seconds): the sweep goes on.
    Timeout(f64),
}

impl StopCause {
    /// The reason recorded in the result of a run this stopped.
    pub fn reason(self) -> String {
        match self {
            StopCause::User => "interrupted by user".into(),
            StopCause::Timeout(t) => format!("timeout after {t} s"),
        }
    }
}

/// Probe of one run.
#[derive(Debug)]
pub struct RunProbe {
    bar: ProgressBar,
    time_budget: Option<f64>,
    measured_s: f64,
    deadline: Option<(Instant, f64)>,
    /// Start of the first measured iteration.
    pub measure_start: Option<Instant>,
    /// End of the last measured iteration.
    pub measure_end: Option<Instant>,
    stopped: Cell<Option<StopCause>>,
    stop: StopFlag,
    /// Stop after this many probe steps (test hook for interrupting mid-run).
    interrupt_after: Option<u64>,
    steps: u64,
}

impl RunProbe {
    /// A probe for `plan`; `show` draws a progress bar on stderr (only if it is a terminal).
    pub fn new(plan: &RunPlan, label: &str, show: bool, stop: StopFlag) -> Self {
        let (len, time_budget) = match plan.budget {
            Budget::Iterations(n) => (plan.warmup + n, None),
            // Time budgets: warm-up iterations count 1 each, then milliseconds of measured time.
            Budget::Seconds(s) => (plan.warmup + (s * 1000.0).ceil() as u64, Some(s)),
        };
        let bar = if show && std::io::stderr().is_terminal() {
            let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} {msg} ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            b.set_style(style);
            b.set_prefix(label.to_string());
            b.set_message("warm-up");
            b
        } else {
            ProgressBar::hidden()
        };
        Self {
            bar,
            time_budget,
            measured_s: 0.0,
            deadline: plan.timeout_s.map(|t| (Instant::now() + Duration::from_secs_f64(t.max(0.0)), t)),
            measure_start: None,
            measure_end: None,
            stopped: Cell::new(None),
            stop,
            interrupt_after: None,
            steps: 0,
        }
    }

    /// Test hook: behave as if Ctrl-C were pressed after `n` iterations of this run.
    pub fn interrupt_after(mut self, n: u64) -> Self {
        self.interrupt_after = Some(n);
        self
    }

    /// Why the run was stopped early, if it was.
    pub fn stop_cause(&self) -> Option<StopCause> {
        self.stopped.get()
    }

    /// Remove the progress bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Probe for RunProbe {
    fn step(&mut self, _index: u64, measured: bool, phases: &PhaseTimes) {
        self.steps += 1;
        if let Some(n) = self.interrupt_after {
            if self.steps >= n {
                self.stop.request();
            }
        }
        if !measured {
            self.bar.inc(1);
            return;
        }
        let now = Instant::now();
        if self.measure_start.is_none() {
            self.measure_start = Some(now.checked_sub(Duration::from_secs_f64(phases.total_s.max(0.0))).unwrap_or(now));
            self.bar.set_message("measuring");
        }
        self.measure_end = Some(now);
        match self.time_budget {
            None => self.bar.inc(1),
            Some(_) => {
                let before = (self.measured_s * 1000.0) as u64;
                self.measured_s += phases.total_s;
                self.bar.inc(((self.measured_s * 1000.0) as u64).saturating_sub(before));
            }
        }
    }

    fn should_stop(&self) -> bool {
        if self.stop.is_set() {
            self.stopped.set(Some(StopCause::User));
            return true;
        }
        if let Some((deadline, t)) = self.deadline {
            if Instant::now() >= deadline {
                self.stopped.set(Some(StopCause::Timeout(t)));
                return true;
            }
        }
        false
    }
}
