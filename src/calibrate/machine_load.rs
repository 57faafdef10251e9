//! The machine's load around a calibration: what other work took of the cores before and while `trainbench
//! calibrate` measured. Three figures, each against its limit ([`LoadLimits`]):
//!
//! - **Others' load per core**: the 1-minute load average less the calibration's own runnable threads, over the
//!   cores; read before the first suite and at every checkpoint between suites, the largest kept. The link's two
//!   ranks (`calibrate --link`) stay in the average after they end; their share is taken off as the kernel decays
//!   it (an exponential of time constant one minute).
//! - **Steal**: the share of the machine's CPU time the hypervisor gave to other guests (`steal` over all the
//!   columns of `/proc/stat`'s `cpu` line), from the start to the end of the calibration.
//! - **Probe spread**: a fixed kernel ([`probe_seconds`]: a pass of multiply-adds over 256 KiB) timed
//!   [`PROBES_PER_CHECKPOINT`] times at every checkpoint, interleaved with the suites; the coefficient of variation
//!   of all its timings. On a core of its own it varies by a few percent; a core shared with other work stretches
//!   some of its timings by a scheduler slice.
//!
//! One more figure is kept but judged against no limit: the **probe's drift** ([`checkpoint_drift`]), the
//! standard deviation of the log of the probe's median at each checkpoint. It is how far the machine's own speed
//! moves from one moment to another, which no curve's residuals can see (every point of a suite moves with it):
//! the predictions' intervals carry it as a term common to the whole step
//! (`crate::predict::uncertainty::Uncertainty::machine`).
//!
//! A reading over any limit makes the calibration loaded ([`LoadReading::excesses`]): `calibrate` refuses to store
//! it unless `--allow-loaded`, and then marks the profile (`calibration.load`, shown by `predict`). The decision is
//! a pure function of the reading, so tests hold it with synthetic readings; only [`LoadMonitor`] reads the host.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::hardware::wire::LoadMark;
use crate::stats;

/// Timings of the probe kernel at each checkpoint.
pub const PROBES_PER_CHECKPOINT: usize = 5;
/// Elements of the probe's buffer (f64: 256 KiB, inside a core's L2 on the machines this runs on).
const PROBE_ELEMENTS: usize = 32 * 1024;
/// Passes of the probe over its buffer.
const PROBE_PASSES: usize = 16;
/// Seconds over which the kernel's 1-minute load average decays a finished process's share by a factor e.
const LOAD_AVERAGE_DECAY_S: f64 = 60.0;

/// The limits a quiet machine stays under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadLimits {
    /// Largest load of other work per core (1-minute load average less the calibration's own threads, over the
    /// cores).
    pub others_per_core: f64,
    /// Largest share of CPU time stolen by the hypervisor.
    pub steal_share: f64,
    /// Largest coefficient of variation of the probe kernel's timings.
    pub probe_cv: f64,
}

impl Default for LoadLimits {
    /// A quarter of a core of other work, 2% steal, 15% probe spread.
    fn default() -> Self {
        LoadLimits { others_per_core: 0.25, steal_share: 0.02, probe_cv: 0.15 }
    }
}

/// What was read of the machine's load over a calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReading {
    /// Logical cores the calibration may use.
    pub cores: usize,
    /// The largest load of other work per core seen (before the first suite and at each checkpoint).
    pub others_per_core: f64,
    /// Share of the machine's CPU time stolen over the calibration (`None` where `/proc/stat` cannot be read).
    pub steal_share: Option<f64>,
    /// Coefficient of variation of the probe's timings (`None` with fewer than two).
    pub probe_cv: Option<f64>,
    /// Standard deviation of the log of the probe's median at each checkpoint (`None` with fewer than two
    /// checkpoints; absent from a reading written before it was kept).
    #[serde(default)]
    pub probe_drift: Option<f64>,
    /// Probe timings taken.
    pub probes: usize,
}

/// One figure over its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Excess {
    /// Which figure (`others' load per core`, `steal`, `probe spread`).
    pub figure: &'static str,
    /// Its value.
    pub value: f64,
    /// Its limit.
    pub limit: f64,
}

impl std::fmt::Display for Excess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:.3} > {:.3}", self.figure, self.value, self.limit)
    }
}

impl LoadReading {
    /// The figures over their limits (empty: a quiet machine).
    pub fn excesses(&self, limits: &LoadLimits) -> Vec<Excess> {
        let mut out = Vec::new();
        let mut check = |figure, value: Option<f64>, limit: f64| {
            if let Some(value) = value.filter(|v| *v > limit) {
                out.push(Excess { figure, value, limit });
            }
        };
        check("others' load per core", Some(self.others_per_core), limits.others_per_core);
        check("steal", self.steal_share, limits.steal_share);
        check("probe spread", self.probe_cv, limits.probe_cv);
        out
    }

    /// The mark a profile keeps of this reading.
    pub fn mark(&self, limits: &LoadLimits, allowed: bool) -> LoadMark {
        let excesses = self.excesses(limits);
        LoadMark {
            loaded: !excesses.is_empty(),
            exceeded: excesses.iter().map(ToString::to_string).collect(),
            cores: self.cores as u64,
            others_per_core: self.others_per_core,
            steal_share: self.steal_share,
            probe_cv: self.probe_cv,
            probe_drift: self.probe_drift,
            limit_others_per_core: limits.others_per_core,
            limit_steal_share: limits.steal_share,
            limit_probe_cv: limits.probe_cv,
            allowed_loaded: allowed,
        }
    }
}

/// Why a calibration was not stored.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the machine is loaded {when}: {}; a calibration taken now would price everything by the other work \
     (rerun on a quiet machine, or pass --allow-loaded to store it marked as loaded)",
    exceeded.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
)]
pub struct LoadedMachine {
    /// `before calibrating` or `while calibrating`.
    pub when: &'static str,
    /// The figures over their limits.
    pub exceeded: Vec<Excess>,
}

/// Check `reading` against `limits`: `Err` when loaded and not `allowed`.
pub fn check(
    reading: &LoadReading,
    limits: &LoadLimits,
    allowed: bool,
    when: &'static str,
) -> Result<(), LoadedMachine> {
    let exceeded = reading.excesses(limits);
    if exceeded.is_empty() || allowed { Ok(()) } else { Err(LoadedMachine { when, exceeded }) }
}

/// The 1-minute load average of `/proc/loadavg`'s text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok().filter(|x: &f64| x.is_finite() && *x >= 0.0)
}

/// The machine's CPU time so far (`/proc/stat`'s `cpu` line): all columns and steal, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuTicks {
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    pub total: u64,
    /// steal.
    pub steal: u64,
}

/// The `cpu` line of `/proc/stat`'s text.
pub fn parse_stat(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let columns: Vec<u64> = line.split_whitespace().skip(1).take(8).map(|c| c.parse().ok()).collect::<Option<_>>()?;
    if columns.len() < 8 {
        return None;
    }
    Some(CpuTicks { total: columns.iter().sum(), steal: columns[7] })
}

/// Share of CPU time stolen between two readings (`None` when no time passed).
pub fn steal_share(before: CpuTicks, after: CpuTicks) -> Option<f64> {
    let total = after.total.checked_sub(before.total).filter(|t| *t > 0)?;
    Some(after.steal.saturating_sub(before.steal) as f64 / total as f64)
}

/// Coefficient of variation (standard deviation over mean) of `xs` (`None` with fewer than two or a zero mean).
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 || stats::mean(xs)? <= 0.0 {
        return None;
    }
    stats::cv(xs)
}

/// The machine's drift over the checkpoints: the sample standard deviation of the log of the median of each
/// complete run of `per_checkpoint` consecutive `timings` (`None` with fewer than two such checkpoints or a
/// non-positive median). A checkpoint's median drops the odd timing a scheduler slice stretched (the spread
/// judges those); what is left is how fast the machine ran at that moment.
pub fn checkpoint_drift(timings: &[f64], per_checkpoint: usize) -> Option<f64> {
    if per_checkpoint == 0 {
        return None;
    }
    let logs: Vec<f64> = timings
        .chunks_exact(per_checkpoint)
        .map(|chunk| stats::median(chunk).filter(|m| *m > 0.0 && m.is_finite()).map(f64::ln))
        .collect::<Option<_>>()?;
    if logs.len() < 2 {
        return None;
    }
    stats::stdev(&logs)
}

/// The load other work puts on each core: `load` less `own` runnable threads of the calibration, over `cores`.
pub fn others_per_core(load: f64, own: f64, cores: usize) -> f64 {
    (load - own).max(0.0) / cores.max(1) as f64
}

/// Seconds of one run of the probe kernel: [`PROBE_PASSES`] passes of a multiply-add over [`PROBE_ELEMENTS`]
/// doubles.
pub fn probe_seconds() -> f64 {
    let mut buffer = vec![1.0f64; PROBE_ELEMENTS];
    let start = Instant::now();
    for _ in 0..PROBE_PASSES {
        for x in buffer.iter_mut() {
            *x = std::hint::black_box(*x * 1.000_000_1 + 1e-9);
        }
    }
    std::hint::black_box(&buffer);
    start.elapsed().as_secs_f64()
}

/// Reads the host's load over a calibration: the 1-minute load average and the probe at each checkpoint, the
/// steal from the first reading to the last.
#[derive(Debug)]
pub struct LoadMonitor {
    cores: usize,
    own_threads: f64,
    ticks_at_start: Option<CpuTicks>,
    largest_others: f64,
    probes: Vec<f64>,
    /// When the link's ranks ended, and how many there were.
    link: Option<(Instant, f64)>,
}

impl LoadMonitor {
    /// Start monitoring a calibration running `own_threads` threads at a time.
    pub fn start(own_threads: usize) -> Self {
        let mut m = LoadMonitor {
            cores: crate::metrics::cpu::available_cores(),
            own_threads: own_threads.max(1) as f64,
            ticks_at_start: read_stat(),
            largest_others: 0.0,
            probes: Vec::new(),
            link: None,
        };
        // Before the first suite nothing of the calibration has run yet.
        m.checkpoint_with_own(0.0);
        m
    }

    /// The link's `ranks` ended now: they stay in the load average for a while.
    pub fn link_ended(&mut self, ranks: usize) {
        self.link = Some((Instant::now(), ranks as f64));
    }

    /// Read the load average and time the probe (between two suites).
    pub fn checkpoint(&mut self) {
        let link_share = self
            .link
            .map_or(0.0, |(ended, ranks)| ranks * (-ended.elapsed().as_secs_f64() / LOAD_AVERAGE_DECAY_S).exp());
        self.checkpoint_with_own(self.own_threads + link_share);
    }

    fn checkpoint_with_own(&mut self, own: f64) {
        if let Some(load) = std::fs::read_to_string("/proc/loadavg").ok().as_deref().and_then(parse_loadavg) {
            self.largest_others = self.largest_others.max(others_per_core(load, own, self.cores));
        }
        for _ in 0..PROBES_PER_CHECKPOINT {
            self.probes.push(probe_seconds());
        }
    }

    /// What was read so far.
    pub fn reading(&self) -> LoadReading {
        LoadReading {
            cores: self.cores,
            others_per_core: self.largest_others,
            steal_share: self.ticks_at_start.zip(read_stat()).and_then(|(a, b)| steal_share(a, b)),
            probe_cv: coefficient_of_variation(&self.probes),
            probe_drift: checkpoint_drift(&self.probes, PROBES_PER_CHECKPOINT),
            probes: self.probes.len(),
        }
    }
}

fn read_stat() -> Option<CpuTicks> {
    parse_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

#[cfg(test)]
#[path = "machine_load_tests.rs"]
mod tests;
