//! The runner's [`Probe`]: shows a run's progress (a bar on a terminal, a line at a steady interval in a log),
//! marks the measured window for the collectors, and stops a run on Ctrl-C or on its timeout. Also owns the
//! process-wide Ctrl-C handler.
//!
//! Progress goes to stderr, which worker processes inherit, so repeats in processes of their own report theirs
//! the same way. When stderr is not a terminal (a CI or Slurm log, a file), a bar would print nothing until the
//! run ends, so the probe writes a plain line instead every [`PROGRESS_INTERVAL`] (or every
//! `TRAINBENCH_PROGRESS_INTERVAL_S` seconds, [`progress_interval_from_env`]): the run, the iteration, the median
//! step time so far and an ETA. The interval is checked after each iteration, so a line never interrupts one.

use std::cell::Cell;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trainbench_contract::{Budget, PhaseTimes, Probe, RunPlan};

/// Default interval between progress lines when stderr is not a terminal.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// Environment variable overriding [`PROGRESS_INTERVAL`], in seconds (`0`: a line after every iteration, which
/// trainbench's own tests use, since the mock backend finishes a run in well under a second).
pub const PROGRESS_INTERVAL_ENV: &str = "TRAINBENCH_PROGRESS_INTERVAL_S";

/// `TRAINBENCH_PROGRESS_INTERVAL_S` holds something other than a number of seconds, at least 0 (the text given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TRAINBENCH_PROGRESS_INTERVAL_S must be a number of seconds, at least 0, not `{0}`")]
pub struct BadProgressInterval(pub String);

/// The interval between progress lines that `TRAINBENCH_PROGRESS_INTERVAL_S` asks for, if it is set; an error
/// when it is not a number of seconds, at least 0.
pub fn progress_interval_from_env() -> Result<Option<Duration>, BadProgressInterval> {
    let Some(value) = std::env::var_os(PROGRESS_INTERVAL_ENV) else { return Ok(None) };
    let text = value.to_string_lossy();
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        _ => Err(BadProgressInterval(text.into_owned())),
    }
}

/// Ctrl-C presses seen by this process.
static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

/// Signals after which the process exits at once, losing the run in progress: the first asks for a stop, the
/// second only says that the result is still being written (finishing takes at most a few seconds, whatever
/// the run's length), the third exits.
pub const SIGNALS_TO_EXIT: usize = 3;

/// Install the handler of Ctrl-C, SIGTERM and SIGHUP (once per process): the first asks the runner to stop
/// after the current iteration and write its result as `interrupted`, keeping finished runs; the second waits
/// for that result to be written (a stop must never leave nothing on disk); the third
/// ([`SIGNALS_TO_EXIT`]) exits at once with status 130.
pub fn install_interrupt_handler() {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        ctrlc::set_handler(|| {
            let message = match INTERRUPTS.fetch_add(1, Ordering::SeqCst) + 1 {
                1 => "interrupt: stopping after the current iteration; its result will be written as interrupted",
                n if n < SIGNALS_TO_EXIT => {
                    "interrupt: still writing the current run's result, wait a few seconds (press Ctrl-C once \
                     more to exit now and lose it)"
                }
                _ => {
                    eprintln!("\ninterrupted {SIGNALS_TO_EXIT} times: exiting without the current run's result");
                    std::process::exit(130);
                }
            };
            eprintln!("\n{message}");
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

/// How a run's progress is shown.
#[derive(Debug)]
enum Display {
    /// Not at all (`--quiet`, or the caller asked for none).
    Hidden,
    /// A bar, redrawn in place on a terminal.
    Bar(ProgressBar),
    /// A line at a steady interval, for logs.
    Lines(LogLines),
}

/// Probe of one run.
#[derive(Debug)]
pub struct RunProbe {
    display: Display,
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
    /// A probe for `plan`, labelled `label` on stderr. `progress`: `None` shows nothing; `Some(interval)` draws
    /// a bar when stderr is a terminal, and otherwise writes a progress line every `interval`.
    pub fn new(plan: &RunPlan, label: &str, progress: Option<Duration>, stop: StopFlag) -> Self {
        let (len, time_budget) = match plan.budget {
            Budget::Iterations(n) => (plan.warmup + n, None),
            // Time budgets: warm-up iterations count 1 each, then milliseconds of measured time.
            Budget::Seconds(s) => (plan.warmup + (s * 1000.0).ceil() as u64, Some(s)),
        };
        let display = match progress {
            None => Display::Hidden,
            Some(_) if std::io::stderr().is_terminal() => {
                let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
                let style = ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} {msg} ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
                b.set_style(style);
                b.set_prefix(label.to_string());
                b.set_message("warm-up");
                Display::Bar(b)
            }
            Some(interval) => Display::Lines(LogLines::new(plan, label, interval)),
        };
        Self {
            display,
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
        if let Display::Bar(bar) = &self.display {
            bar.finish_and_clear();
        }
    }

    /// Advance the bar by `n` positions.
    fn advance(&self, n: u64) {
        if let Display::Bar(bar) = &self.display {
            bar.inc(n);
        }
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
        if let Display::Lines(lines) = &mut self.display {
            lines.step(measured, phases.total_s);
        }
        if !measured {
            self.advance(1);
            return;
        }
        let now = Instant::now();
        if self.measure_start.is_none() {
            self.measure_start = Some(now.checked_sub(Duration::from_secs_f64(phases.total_s.max(0.0))).unwrap_or(now));
            if let Display::Bar(bar) = &self.display {
                bar.set_message("measuring");
            }
        }
        self.measure_end = Some(now);
        match self.time_budget {
            None => self.advance(1),
            Some(_) => {
                let before = (self.measured_s * 1000.0) as u64;
                self.measured_s += phases.total_s;
                self.advance(((self.measured_s * 1000.0) as u64).saturating_sub(before));
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

/// Progress lines for logs: what a run has done so far, written to stderr at a steady interval.
#[derive(Debug)]
struct LogLines {
    label: String,
    warmup: u64,
    budget: Budget,
    interval: Duration,
    next_due: Instant,
    /// The warm-up iterations so far.
    warmup_s: Recent,
    /// The measured iterations so far.
    measured_s: Recent,
}

/// Most recent step times a progress line's median is taken over.
const RECENT_STEPS: usize = 1001;

/// The iterations of one phase so far: how many, their summed time, and the last [`RECENT_STEPS`] times (the
/// median of a progress line is that of the recent steps, so a line costs the same however long the run).
#[derive(Debug, Default)]
struct Recent {
    count: u64,
    sum_s: f64,
    last: std::collections::VecDeque<f64>,
}

impl Recent {
    fn push(&mut self, step_s: f64) {
        self.count += 1;
        self.sum_s += step_s;
        if self.last.len() == RECENT_STEPS {
            self.last.pop_front();
        }
        self.last.push_back(step_s);
    }

    fn median(&self) -> f64 {
        let (a, b) = self.last.as_slices();
        crate::stats::median(&[a, b].concat()).unwrap_or(0.0)
    }
}

impl LogLines {
    fn new(plan: &RunPlan, label: &str, interval: Duration) -> Self {
        LogLines {
            label: label.to_string(),
            warmup: plan.warmup,
            budget: plan.budget,
            interval,
            next_due: Instant::now() + interval,
            warmup_s: Recent::default(),
            measured_s: Recent::default(),
        }
    }

    /// Note one iteration; write a line when the interval has passed since the last one (or the run's start).
    fn step(&mut self, measured: bool, step_s: f64) {
        let step_s = if step_s.is_finite() { step_s.max(0.0) } else { 0.0 };
        let times = if measured { &mut self.measured_s } else { &mut self.warmup_s };
        times.push(step_s);
        let now = Instant::now();
        if now < self.next_due {
            return;
        }
        self.next_due = now + self.interval;
        // A log that cannot be written to must not end the run.
        let _ = writeln!(std::io::stderr().lock(), "{}", self.line());
    }

    /// The progress line: `progress <label>: <warm-up i/N | measured i/N>, median step <t>, ETA <t>`; the median is
    /// that of the phase the run is in, since warm-up steps are slower.
    fn line(&self) -> String {
        let spent = self.measured_s.sum_s;
        let done = self.measured_s.count;
        let (phase, median) = if done == 0 {
            (format!("warm-up {}/{}", self.warmup_s.count, self.warmup), self.warmup_s.median())
        } else {
            let phase = match self.budget {
                Budget::Iterations(n) => format!("measured {done}/{n}"),
                Budget::Seconds(budget) => format!("measured {spent:.1}/{budget} s ({done} iterations)"),
            };
            (phase, self.measured_s.median())
        };
        let warmup_left = self.warmup.saturating_sub(self.warmup_s.count) as f64 * median;
        let eta_s = match self.budget {
            Budget::Iterations(n) => warmup_left + n.saturating_sub(done) as f64 * median,
            Budget::Seconds(budget) => warmup_left + (budget - spent).max(0.0),
        };
        format!("progress {}: {phase}, median step {}, ETA {}", self.label, crate::format::duration(median), eta(eta_s))
    }
}

/// A time left: seconds under a minute, then minutes and seconds, then hours and minutes.
fn eta(s: f64) -> String {
    let s = if s.is_finite() { s.max(0.0) } else { 0.0 };
    let whole = s.round() as u64;
    match whole {
        _ if s < 10.0 => format!("{s:.1} s"),
        0..60 => format!("{whole} s"),
        60..3600 => format!("{} min {:02} s", whole / 60, whole % 60),
        _ => format!("{} h {:02} min", whole / 3600, whole % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(warmup: u64, budget: Budget) -> LogLines {
        let plan = RunPlan { warmup, budget, ..RunPlan::for_tests("m.b8", 1) };
        // An interval no test reaches: the lines are read, not written.
        LogLines::new(&plan, "[2/4] m.b8", Duration::from_secs(3600))
    }

    #[test]
    fn a_progress_line_names_the_run_the_iteration_the_median_and_the_eta() {
        let mut l = lines(2, Budget::Iterations(100));
        l.step(false, 0.030);
        assert_eq!(l.line(), "progress [2/4] m.b8: warm-up 1/2, median step 30.0 ms, ETA 3.0 s");
        l.step(false, 0.010);
        for t in [0.012, 0.010, 0.011] {
            l.step(true, t);
        }
        // 97 measured iterations left at the measured median (11 ms); warm-up times no longer count.
        assert_eq!(l.line(), "progress [2/4] m.b8: measured 3/100, median step 11.0 ms, ETA 1.1 s");
        let mut slow = lines(0, Budget::Iterations(200));
        slow.step(true, 4.0);
        slow.step(true, 5.0);
        assert_eq!(slow.line(), "progress [2/4] m.b8: measured 2/200, median step 4.50 s, ETA 14 min 51 s");
    }

    #[test]
    fn a_time_budget_counts_measured_seconds() {
        let mut l = lines(1, Budget::Seconds(30.0));
        l.step(false, 2.0);
        l.step(true, 1.5);
        l.step(true, 2.5);
        assert_eq!(l.line(), "progress [2/4] m.b8: measured 4.0/30 s (2 iterations), median step 2.00 s, ETA 26 s");
        let mut warming = lines(3, Budget::Seconds(30.0));
        warming.step(false, 1.0);
        assert_eq!(warming.line(), "progress [2/4] m.b8: warm-up 1/3, median step 1.00 s, ETA 32 s");
    }

    #[test]
    fn odd_step_times_make_no_odd_lines() {
        let mut l = lines(0, Budget::Iterations(3));
        l.step(true, f64::NAN);
        l.step(true, -1.0);
        assert_eq!(l.line(), "progress [2/4] m.b8: measured 2/3, median step 0 ms, ETA 0.0 s");
        assert_eq!(Recent::default().median(), 0.0);
        assert_eq!(eta(f64::INFINITY), "0.0 s");
        assert_eq!(eta(7265.0), "2 h 01 min");
    }
}
