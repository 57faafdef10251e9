//! A run's measured steps in memory that does not grow with the run ([`StepLog`]): the first
//! [`KEPT_STEPS`] steps kept exactly and, past them, a uniform reservoir of that many; an ordered series of at
//! most [`BLOCKS`] block summaries (exact count, sums, mean, variance, min and max) for steady-state detection
//! and exact moments from any block on; and at most [`SEGMENTS`] mergeable quantile sketches over equal
//! segments of the run, for percentiles past the cap.
//!
//! Every backend records its measured steps here, so a run of 10^9 iterations holds a few megabytes, and what
//! is derived from it at the end (steady state, statistics, intervals) costs the same for any run length.

use std::fmt;

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
pub use trainbench_graph::rng::SplitMix64;

use crate::phases::PhaseTimes;

/// Steps kept exactly: every step of a run up to this many, a uniform reservoir of this many beyond.
pub const KEPT_STEPS: usize = 10_000;

/// Most block summaries kept; when full, neighbours merge in pairs and each block covers twice the steps.
pub const BLOCKS: usize = 4_096;

/// Most quantile sketches kept, one per segment of the run; they merge in pairs as the blocks do.
pub const SEGMENTS: usize = 16;

/// Significant decimal digits of the quantile sketch (an HDR histogram of step times in nanoseconds).
pub const SKETCH_SIGNIFICANT_DIGITS: u8 = 3;

/// The sketch's stated relative error: a quantile it reports lies within this fraction of a step time whose
/// rank is the quantile's (HDR histogram with [`SKETCH_SIGNIFICANT_DIGITS`] digits: one part in 10^3).
pub const SKETCH_RELATIVE_ERROR: f64 = 1e-3;

/// Longest step time the sketch records, in nanoseconds (about 11.6 days); longer ones are recorded as this.
const SKETCH_MAX_NS: u64 = 1_000_000_000_000_000;

/// Seed of the reservoir's generator: fixed, so the ranks of a data-parallel run, which see the same number of
/// steps, keep the same step indices, and a run's kept steps do not depend on the machine.
const RESERVOIR_SEED: u64 = 0x7472_6169_6e62_656e;

/// One kept step: its index among the measured steps (0 = the first), its phases and its loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KeptStep {
    /// Index among the measured steps.
    pub index: u64,
    /// Phase times of the step.
    pub phases: PhaseTimes,
    /// The loss the step reported, if any (`None` also for a non-finite loss read back from JSON).
    pub loss: Option<f64>,
}

/// Exact summary of consecutive steps: count, sums of every phase, and the whole-iteration time's mean, sum of
/// squared deviations (Welford, merged by Chan et al.'s formula), min and max.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Block {
    /// Steps summarised.
    pub n: u64,
    /// Sum of each phase over the steps.
    pub sum: PhaseTimes,
    /// Mean whole-iteration time.
    pub mean: f64,
    /// Sum of squared deviations of the whole-iteration time from `mean`.
    pub m2: f64,
    /// Shortest whole-iteration time (0 for no steps).
    pub min: f64,
    /// Longest whole-iteration time (0 for no steps).
    pub max: f64,
}

fn add_phases(into: &mut PhaseTimes, p: &PhaseTimes) {
    into.data_s += p.data_s;
    into.stall_s += p.stall_s;
    into.copy_s += p.copy_s;
    into.forward_s += p.forward_s;
    into.backward_s += p.backward_s;
    into.comm_s += p.comm_s;
    into.optimizer_s += p.optimizer_s;
    into.total_s += p.total_s;
}

impl Block {
    /// Add one step.
    pub fn record(&mut self, p: &PhaseTimes) {
        let x = p.total_s;
        if self.n == 0 {
            (self.min, self.max) = (x, x);
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
        add_phases(&mut self.sum, p);
    }

    /// Add the steps another block summarised.
    pub fn merge(&mut self, other: &Block) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        let (na, nb) = (self.n as f64, other.n as f64);
        let n = na + nb;
        let delta = other.mean - self.mean;
        self.mean += delta * nb / n;
        self.m2 += other.m2 + delta * delta * na * nb / n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.n += other.n;
        add_phases(&mut self.sum, &other.sum);
    }

    /// Sample standard deviation of the whole-iteration time (`n - 1`; 0 for fewer than two steps).
    pub fn stdev(&self) -> f64 {
        if self.n < 2 { 0.0 } else { (self.m2.max(0.0) / (self.n - 1) as f64).sqrt() }
    }
}

/// A mergeable quantile sketch of whole-iteration times: an HDR histogram in nanoseconds with
/// [`SKETCH_SIGNIFICANT_DIGITS`] significant digits, which grows only to the longest time recorded.
#[derive(Clone)]
pub struct Sketch(Histogram<u64>);

impl Default for Sketch {
    fn default() -> Self {
        // Three significant digits are within the histogram's allowed range (0..=5): this cannot fail.
        Sketch(Histogram::new(SKETCH_SIGNIFICANT_DIGITS).unwrap_or_else(|_| unreachable!()))
    }
}

fn to_ns(seconds: f64) -> u64 {
    if seconds.is_finite() && seconds > 0.0 { ((seconds * 1e9).round() as u64).min(SKETCH_MAX_NS) } else { 0 }
}

impl Sketch {
    /// Record one step time, in seconds (negative or non-finite times count as 0).
    pub fn record(&mut self, seconds: f64) {
        self.record_n(to_ns(seconds), 1);
    }

    fn record_n(&mut self, ns: u64, count: u64) {
        // Auto-resizing, so no value is out of range (times are clamped to SKETCH_MAX_NS).
        let _ = self.0.record_n(ns, count);
    }

    /// Add another sketch's counts.
    pub fn merge(&mut self, other: &Sketch) {
        let _ = self.0.add(&other.0);
    }

    /// Times recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Quantile `q` in `0..=1` in seconds, within [`SKETCH_RELATIVE_ERROR`]; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        (!self.is_empty()).then(|| self.0.value_at_quantile(q.clamp(0.0, 1.0)) as f64 / 1e9)
    }

    /// Times recorded outside `[lo, hi]` seconds (at the sketch's resolution).
    pub fn count_outside(&self, lo: f64, hi: f64) -> u64 {
        let (lo, hi) = (to_ns(lo), to_ns(hi));
        self.0
            .iter_recorded()
            .filter(|v| v.value_iterated_to() < lo || v.value_iterated_to() > hi)
            .map(|v| v.count_at_value())
            .sum()
    }

    fn pairs(&self) -> Vec<(u64, u64)> {
        self.0.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
    }
}

impl PartialEq for Sketch {
    fn eq(&self, other: &Self) -> bool {
        self.pairs() == other.pairs()
    }
}

impl fmt::Debug for Sketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sketch({} times)", self.len())
    }
}

/// On the wire: the non-empty bins as `[nanoseconds, count]` pairs.
impl Serialize for Sketch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.pairs().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sketch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut sketch = Sketch::default();
        for (ns, count) in Vec::<(u64, u64)>::deserialize(d)? {
            sketch.record_n(ns.min(SKETCH_MAX_NS), count);
        }
        Ok(sketch)
    }
}

/// What a [`Series`] holds per entry.
trait Summary: Default + Clone {
    fn record(&mut self, p: &PhaseTimes);
    fn merge(&mut self, other: &Self);
}

impl Summary for Block {
    fn record(&mut self, p: &PhaseTimes) {
        Block::record(self, p);
    }
    fn merge(&mut self, other: &Self) {
        Block::merge(self, other);
    }
}

impl Summary for Sketch {
    fn record(&mut self, p: &PhaseTimes) {
        Sketch::record(self, p.total_s);
    }
    fn merge(&mut self, other: &Self) {
        Sketch::merge(self, other);
    }
}

/// An ordered series of summaries of `width` consecutive steps each, at most `cap` of them closed, plus the
/// open one the next steps go to; when `cap` are closed, neighbours merge in pairs and `width` doubles.
/// Entry `i` covers the steps `i * width .. (i + 1) * width`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Series<T> {
    cap: usize,
    width: u64,
    closed: Vec<T>,
    open: T,
    open_steps: u64,
}

impl<T: Summary> Series<T> {
    fn new(cap: usize) -> Self {
        Series { cap, width: 1, closed: Vec::new(), open: T::default(), open_steps: 0 }
    }

    fn record(&mut self, p: &PhaseTimes) {
        self.open.record(p);
        self.open_steps += 1;
        if self.open_steps < self.width {
            return;
        }
        self.closed.push(std::mem::take(&mut self.open));
        self.open_steps = 0;
        if self.closed.len() >= self.cap {
            let old = std::mem::take(&mut self.closed);
            self.closed = old
                .chunks(2)
                .map(|pair| {
                    let mut merged = pair[0].clone();
                    if let Some(next) = pair.get(1) {
                        merged.merge(next);
                    }
                    merged
                })
                .collect();
            self.width *= 2;
        }
    }

    /// The merge of every entry from the first that starts at or after step `from`, the open one included.
    fn merged_from(&self, from: u64) -> T {
        let first = from.div_ceil(self.width) as usize;
        let mut merged = T::default();
        for entry in self.closed.iter().skip(first) {
            merged.merge(entry);
        }
        if first <= self.closed.len() {
            merged.merge(&self.open);
        }
        merged
    }
}

/// First and last loss of the measured steps and whether every loss was finite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossTrack {
    /// Loss of the first measured step that reported one.
    pub first: Option<f64>,
    /// Loss of the last measured step that reported one.
    pub last: Option<f64>,
    /// Whether every reported loss was finite.
    pub all_finite: bool,
    /// Steps that reported a loss.
    pub count: u64,
}

impl Default for LossTrack {
    fn default() -> Self {
        LossTrack { first: None, last: None, all_finite: true, count: 0 }
    }
}

/// A run's measured steps in bounded memory (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLog {
    seen: u64,
    kept: Vec<KeptStep>,
    rng: SplitMix64,
    last: Option<PhaseTimes>,
    blocks: Series<Block>,
    segments: Series<Sketch>,
    losses: LossTrack,
}

impl Default for StepLog {
    fn default() -> Self {
        StepLog {
            seen: 0,
            kept: Vec::new(),
            rng: SplitMix64::new(RESERVOIR_SEED),
            last: None,
            blocks: Series::new(BLOCKS),
            segments: Series::new(SEGMENTS),
            losses: LossTrack::default(),
        }
    }
}

/// The steps from a steady-state start on, summarised exactly and sketched.
#[derive(Debug, Clone)]
pub struct SteadySteps {
    /// Exact summary of the steps from the start on.
    pub block: Block,
    /// Sketch of the steps from the first segment boundary at or after the start on.
    pub sketch: Sketch,
}

impl StepLog {
    /// An empty log.
    pub fn new() -> Self {
        StepLog::default()
    }

    /// A log of these steps and losses, recorded in order.
    pub fn of(steps: impl IntoIterator<Item = (PhaseTimes, Option<f64>)>) -> StepLog {
        let mut log = StepLog::new();
        steps.into_iter().for_each(|(p, loss)| log.record(p, loss));
        log
    }

    /// Record one measured step and the loss it reported.
    pub fn record(&mut self, phases: PhaseTimes, loss: Option<f64>) {
        let index = self.seen;
        let step = KeptStep { index, phases, loss };
        if self.kept.len() < KEPT_STEPS {
            self.kept.push(step);
        } else {
            // Algorithm R: step `index` replaces a kept one with probability KEPT_STEPS / (index + 1).
            let j = self.rng.below_u64(index + 1);
            if j < KEPT_STEPS as u64 {
                self.kept[j as usize] = step;
            }
        }
        self.seen += 1;
        self.last = Some(phases);
        self.blocks.record(&phases);
        self.segments.record(&phases);
        if let Some(l) = loss {
            let t = &mut self.losses;
            t.first.get_or_insert(l);
            t.last = Some(l);
            t.all_finite &= l.is_finite();
            t.count += 1;
        }
    }

    /// Steps recorded.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Whether no step was recorded.
    pub fn is_empty(&self) -> bool {
        self.seen == 0
    }

    /// Whether the kept steps are a reservoir sample (more steps were recorded than [`KEPT_STEPS`]) rather
    /// than every step.
    pub fn is_sampled(&self) -> bool {
        self.seen > self.kept.len() as u64
    }

    /// The kept steps in index order: every step when [`StepLog::is_sampled`] is false.
    pub fn kept(&self) -> Vec<KeptStep> {
        let mut kept = self.kept.clone();
        if self.is_sampled() {
            kept.sort_by_key(|k| k.index);
        }
        kept
    }

    /// The kept steps' phase times, in index order.
    pub fn phases(&self) -> Vec<PhaseTimes> {
        self.kept().iter().map(|k| k.phases).collect()
    }

    /// The kept steps' losses, in index order (steps that reported none left out).
    pub fn loss_values(&self) -> Vec<f64> {
        self.kept().iter().filter_map(|k| k.loss).collect()
    }

    /// The last step recorded.
    pub fn last(&self) -> Option<PhaseTimes> {
        self.last
    }

    /// First and last loss and whether all were finite.
    pub fn losses(&self) -> LossTrack {
        self.losses
    }

    /// The mean whole-iteration time of each closed block, in order, and the steps each covers: the series a
    /// steady-state rule reads once the steps are sampled.
    pub fn block_means(&self) -> (Vec<f64>, u64) {
        (self.blocks.closed.iter().map(|b| b.mean).collect(), self.blocks.width)
    }

    /// The steps from `start` on (a multiple of the blocks' width; a start inside a block begins at the next).
    pub fn steady_from(&self, start: u64) -> SteadySteps {
        SteadySteps { block: self.blocks.merged_from(start), sketch: self.segments.merged_from(start) }
    }

    /// The log of a data-parallel run from its workers' logs, which saw the same steps: each kept step is the
    /// slowest worker's at that index with the workers' mean loss, each block and segment the slowest
    /// worker's (the largest sum, or mean), the first and last loss the workers' means.
    pub fn slowest_of(logs: &[&StepLog]) -> Option<StepLog> {
        let (first, rest) = logs.split_first()?;
        let mut out = (*first).clone();
        for (i, kept) in out.kept.iter_mut().enumerate() {
            let same = |l: &&StepLog| l.kept.get(i).filter(|k| k.index == kept.index).copied();
            let all: Vec<KeptStep> = logs.iter().filter_map(same).collect();
            if let Some(slowest) = all.iter().max_by(|a, b| a.phases.total_s.total_cmp(&b.phases.total_s)) {
                kept.phases = slowest.phases;
            }
            let losses: Vec<f64> = all.iter().filter_map(|k| k.loss).collect();
            if losses.len() == logs.len() {
                kept.loss = Some(losses.iter().sum::<f64>() / losses.len() as f64);
            }
        }
        let slowest_block = |a: &Block, b: &Block| if b.sum.total_s > a.sum.total_s { *b } else { *a };
        for other in rest {
            if other.blocks.width == out.blocks.width && other.blocks.closed.len() == out.blocks.closed.len() {
                for (mine, theirs) in out.blocks.closed.iter_mut().zip(&other.blocks.closed) {
                    *mine = slowest_block(mine, theirs);
                }
                out.blocks.open = slowest_block(&out.blocks.open, &other.blocks.open);
            }
            if other.segments.width == out.segments.width && other.segments.closed.len() == out.segments.closed.len() {
                let mean = |s: &Sketch| s.0.mean();
                for (mine, theirs) in out.segments.closed.iter_mut().zip(&other.segments.closed) {
                    if mean(theirs) > mean(mine) {
                        *mine = theirs.clone();
                    }
                }
            }
            out.last = match (out.last, other.last) {
                (Some(a), Some(b)) if b.total_s > a.total_s => Some(b),
                (a, b) => a.or(b),
            };
        }
        let mean_of = |f: fn(&LossTrack) -> Option<f64>| {
            let each: Vec<f64> = logs.iter().filter_map(|l| f(&l.losses)).collect();
            (each.len() == logs.len()).then(|| each.iter().sum::<f64>() / each.len() as f64)
        };
        out.losses.first = mean_of(|t| t.first);
        out.losses.last = mean_of(|t| t.last);
        out.losses.all_finite = logs.iter().all(|l| l.losses.all_finite);
        Some(out)
    }
}

/// The warm-up steps of a run: how many, and the first and last (kept for the one-time costs they show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmupSteps {
    /// Warm-up steps run.
    pub count: u64,
    /// The first warm-up step.
    pub first: Option<PhaseTimes>,
    /// The last warm-up step.
    pub last: Option<PhaseTimes>,
}

impl WarmupSteps {
    /// Record one warm-up step.
    pub fn record(&mut self, phases: PhaseTimes) {
        self.count += 1;
        self.first.get_or_insert(phases);
        self.last = Some(phases);
    }

    /// Warm-up steps run.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether none ran.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
#[path = "steplog_tests.rs"]
mod tests;
