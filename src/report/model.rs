//! The grouped view of a result set that every report format renders: configurations (repeats pooled), series
//! (configurations of a spec that differ only in batch size), per-repeat spreads and the short labels of plots.
//! Runs pool as repeats only when their [`ConfigurationIdentity`] is equal (and the device model too); rows of
//! one run id with different plans are named apart (`llm-smoke-gpt.b4.fp32.1x2 · strategy zero-2`).

use std::collections::BTreeMap;

use crate::result::distributed::DistributedResult;
use crate::result::identity::{ConfigurationIdentity, distinctions};
use crate::result::{LoadedResult, Metrics, PhaseBreakdown, RunOutcome, RunResult};
use trainbench_graph::Precision;

/// Device name of a result: the environment's device name, else the plan's selector.
pub fn device_name(r: &RunResult) -> String {
    r.environment.device.as_ref().map(|d| d.name.clone()).unwrap_or_else(|| r.plan.device.to_string())
}

/// The share of a data-parallel run's steps spent exchanging gradients: the median over its steps
/// (`distributed.comm_share`), else the share of the mean comm phase; `None` for a single-worker run, which
/// exchanges nothing, and for a run that measured nothing.
pub fn comm_share_of(r: &RunResult) -> Option<f64> {
    if r.plan.topology.world_size() <= 1 && r.distributed.is_none() {
        return None;
    }
    let mean_share = || r.metrics.as_ref().map(|m| m.phases.comm.share);
    r.distributed.as_ref().and_then(|d| d.comm_share).or_else(mean_share).filter(|s| s.is_finite())
}

/// Median of a few values (non-finite ones ignored); `None` when none is left.
pub(crate) fn median_of(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    crate::stats::median(&v)
}

/// A figure over the repeats of a configuration: the median and the smallest and largest repeat.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median over the repeats.
    pub median: f64,
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
    /// How many repeats have the figure.
    pub n: usize,
}

impl Spread {
    /// The spread of some per-repeat values (non-finite ones ignored); `None` when none is left.
    pub fn of(values: Vec<f64>) -> Option<Self> {
        let v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let n = v.len();
        median_of(v).map(|median| Self { median, min, max, n })
    }
    /// The interval when at least two repeats have the figure.
    pub fn interval(&self) -> Option<(f64, f64)> {
        (self.n >= 2).then_some((self.min, self.max))
    }
}

/// Where a configuration's peak memory figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemorySource {
    /// The backend's allocator peak (device memory).
    Allocator,
    /// NVML's largest memory use of this process on the GPU.
    GpuProcess,
    /// The process's largest resident set size (host memory), for backends without an allocator peak.
    Rss,
}

/// The largest memory figure over the repeats of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeakMemory {
    /// Bytes.
    pub bytes: u64,
    /// What was measured.
    pub source: MemorySource,
}

/// The phases of an iteration, in the order they are stacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Producing and transferring the input batch.
    Data,
    /// Forward pass with the loss.
    Forward,
    /// Backward pass.
    Backward,
    /// Gradient communication.
    Comm,
    /// Optimizer step.
    Optimizer,
    /// Time not attributed to any phase.
    Other,
}

impl Phase {
    /// Every phase, in stacking order.
    pub const ALL: [Phase; 6] =
        [Phase::Data, Phase::Forward, Phase::Backward, Phase::Comm, Phase::Optimizer, Phase::Other];
    /// Name as shown in legends and tables.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Data => "data",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Comm => "comm",
            Phase::Optimizer => "optimizer",
            Phase::Other => "other",
        }
    }
    /// This phase's share of the iteration in a breakdown (non-finite or negative shares read as 0).
    pub fn share_in(self, p: &PhaseBreakdown) -> f64 {
        let s = match self {
            Phase::Data => p.data.share,
            Phase::Forward => p.forward.share,
            Phase::Backward => p.backward.share,
            Phase::Comm => p.comm.share,
            Phase::Optimizer => p.optimizer.share,
            Phase::Other => p.other.share,
        };
        if s.is_finite() { s.max(0.0) } else { 0.0 }
    }
}

/// Which parts of a configuration differ within a report: labels name only those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Varying {
    /// More than one precision.
    pub precision: bool,
    /// More than one data-parallel world size.
    pub world_size: bool,
    /// More than one data-parallel strategy (`all-reduce`, `parameter-server ×N`) among runs with several workers.
    pub strategy: bool,
    /// More than one backend and device pair.
    pub placement: bool,
}

/// One configuration of one spec (its repeats pooled), on one backend and device.
#[derive(Debug, Clone)]
pub struct ConfigRow<'a> {
    /// Spec name.
    pub spec: String,
    /// Run identifier without the repeat suffix, then [`Self::distinction`] when it has one (`… · strategy zero-2`).
    pub config: String,
    /// The configuration's identity, shared by every repeat.
    pub identity: ConfigurationIdentity,
    /// What tells this row apart from the rows of the same run id, backend and device with another plan
    /// (`strategy zero-2`); empty when no other row shares its run id.
    pub distinction: Vec<String>,
    /// Backend.
    pub backend: String,
    /// Device name (from the environment, else the selector).
    pub device: String,
    /// Precision.
    pub precision: Precision,
    /// Global batch size.
    pub batch: usize,
    /// Data-parallel world size.
    pub world_size: usize,
    /// The repeats, in input order.
    pub runs: Vec<&'a RunResult>,
}

impl<'a> ConfigRow<'a> {
    /// Metrics of the repeats that measured something.
    pub fn metrics(&self) -> impl Iterator<Item = &'a Metrics> + '_ {
        self.runs.iter().filter_map(|r| r.metrics.as_ref())
    }
    /// A label that is unique within a report: the configuration, plus backend and device.
    pub fn label(&self) -> String {
        format!("{} [{} {}]", self.config, self.backend, self.device)
    }
    /// Backend and device, e.g. `tch · AMD EPYC 7B13`.
    pub fn placement(&self) -> String {
        format!("{} · {}", self.backend, self.device)
    }
    /// A label unique within its spec: the batch size, then what varies in the report (see [`Varying`]).
    pub fn short_label(&self, v: Varying) -> String {
        let mut parts = vec![format!("b{}", self.batch)];
        if v.precision {
            parts.push(self.precision.as_str().to_string());
        }
        if v.world_size {
            parts.push(format!("{}x", self.world_size));
        }
        if v.strategy && self.world_size > 1 {
            parts.push(self.strategy());
        }
        if v.placement {
            parts.push(self.placement());
        }
        parts.extend(self.distinction_beyond(v));
        parts.join(" · ")
    }
    /// The parts of [`Self::distinction`] that the labels of `v` do not already name (the strategy).
    fn distinction_beyond(&self, v: Varying) -> impl Iterator<Item = String> + '_ {
        let strategy_named = v.strategy && self.world_size > 1;
        self.distinction.iter().filter(move |d| !(strategy_named && d.starts_with("strategy "))).cloned()
    }
    /// True when every repeat completed.
    pub fn all_completed(&self) -> bool {
        self.runs.iter().all(|r| matches!(r.outcome, RunOutcome::Completed))
    }
    /// How the repeats ended: `completed`, or e.g. `2 completed, 1 out_of_memory`.
    pub fn outcome_summary(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &self.runs {
            *counts.entry(r.outcome.status()).or_default() += 1;
        }
        if counts.len() == 1 && self.runs.len() == 1 {
            return counts.keys().next().map(|s| s.to_string()).unwrap_or_default();
        }
        counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
    }
    /// The spread over repeats of a per-repeat figure.
    pub fn spread(&self, f: impl Fn(&Metrics) -> Option<f64>) -> Option<Spread> {
        Spread::of(self.metrics().filter_map(f).collect())
    }
    /// Steady-state samples per second over the repeats.
    pub fn samples_per_s_spread(&self) -> Option<Spread> {
        self.spread(|m| Some(m.throughput.samples_per_s))
    }
    /// Median over repeats of the steady-state samples per second.
    pub fn samples_per_s(&self) -> Option<f64> {
        self.samples_per_s_spread().map(|s| s.median)
    }
    /// Median over repeats of items per second, with the item unit.
    pub fn items_per_s(&self) -> Option<(f64, String)> {
        let unit = self.metrics().next()?.throughput.item_unit.clone();
        median_of(self.metrics().map(|m| m.throughput.items_per_s).collect()).map(|v| (v, unit))
    }
    /// Steady-state step times of all repeats, pooled, in seconds.
    pub fn pooled_step_times(&self) -> Vec<f64> {
        self.runs.iter().flat_map(|r| r.steady_step_times().into_owned()).filter(|x| x.is_finite()).collect()
    }
    /// Median over repeats of the median step time, seconds.
    pub fn median_step_s(&self) -> Option<f64> {
        median_of(self.metrics().map(|m| m.step_time.median_s).collect())
    }
    /// Median over repeats of the 95th-percentile step time, seconds.
    pub fn p95_step_s(&self) -> Option<f64> {
        median_of(self.metrics().map(|m| m.step_time.p95_s).collect())
    }
    /// Median over repeats of the coefficient of variation of step times.
    pub fn cv(&self) -> Option<f64> {
        median_of(self.metrics().map(|m| m.step_time.cv).collect())
    }
    /// Mean GPU utilisation in percent over the repeats, when NVML measured it.
    pub fn gpu_utilization_spread(&self) -> Option<Spread> {
        self.spread(|m| m.gpu.get().map(|g| g.utilization_mean_percent))
    }
    /// Mean GPU utilisation in percent (median over repeats), when NVML measured it.
    pub fn gpu_utilization_percent(&self) -> Option<f64> {
        self.gpu_utilization_spread().map(|s| s.median)
    }
    /// Why GPU utilisation is missing, from the first repeat that says.
    pub fn gpu_unavailable_reason(&self) -> Option<String> {
        self.metrics().find_map(|m| match &m.gpu {
            crate::result::Sampled::Unavailable { reason } => Some(reason.clone()),
            crate::result::Sampled::Available(_) => None,
        })
    }
    /// FLOP utilisation as a fraction of the device peak, over the repeats.
    pub fn flop_fraction_spread(&self) -> Option<Spread> {
        self.spread(|m| m.flops.fraction)
    }
    /// FLOP utilisation as a fraction of the device peak (median over repeats).
    pub fn flop_fraction(&self) -> Option<f64> {
        self.flop_fraction_spread().map(|s| s.median)
    }
    /// Process CPU utilisation, fraction of all cores (median over repeats).
    pub fn cpu_utilization(&self) -> Option<f64> {
        median_of(self.metrics().filter_map(|m| m.cpu.get()).map(|c| c.utilization).collect())
    }
    /// Samples per second the input pipeline delivered on its own (no training), median over the repeats that
    /// read a local dataset.
    pub fn loader_samples_per_s(&self) -> Option<f64> {
        median_of(self.runs.iter().filter_map(|r| r.data.as_ref()?.loader.as_ref()).map(|l| l.samples_per_s).collect())
    }
    /// Highest allocator peak over the repeats, bytes.
    pub fn peak_allocated_bytes(&self) -> Option<u64> {
        self.metrics().filter_map(|m| m.memory.measured.peak_allocated_bytes).max()
    }
    /// The highest memory figure over the repeats: the allocator peak, else NVML's process memory, else the
    /// resident set size.
    pub fn peak_memory(&self) -> Option<PeakMemory> {
        let gpu = || self.metrics().filter_map(|m| m.gpu.get()?.process_memory_max_bytes).max();
        let rss = || self.metrics().filter_map(|m| m.cpu.get()).map(|c| c.rss_max_bytes).filter(|b| *b > 0).max();
        if let Some(bytes) = self.peak_allocated_bytes() {
            Some(PeakMemory { bytes, source: MemorySource::Allocator })
        } else if let Some(bytes) = gpu() {
            Some(PeakMemory { bytes, source: MemorySource::GpuProcess })
        } else {
            rss().map(|bytes| PeakMemory { bytes, source: MemorySource::Rss })
        }
    }
    /// Energy per sample, joules (median over repeats).
    pub fn energy_per_sample_j(&self) -> Option<f64> {
        median_of(self.metrics().filter_map(|m| m.power.get()).map(|p| p.energy_per_sample_j).collect())
    }
    /// Share of the iteration spent waiting for the next batch from the dataset pipeline (median over
    /// repeats): how input-bound the run is.
    pub fn stall_share(&self) -> Option<f64> {
        median_of(self.metrics().map(|m| m.phases.data_stall.share).collect())
    }
    /// Runs with a target: the outcome of each repeat that recorded one.
    pub fn targets(&self) -> impl Iterator<Item = &'a trainbench_contract::target::TargetOutcome> + '_ {
        self.metrics().filter_map(|m| m.time_to_target.as_ref())
    }
    /// Seconds to the target (median over the repeats that reached it) and how many of the repeats with a
    /// target reached it: `(median, reached, with a target)`; `None` without a target.
    pub fn time_to_target(&self) -> Option<(Option<f64>, usize, usize)> {
        let all: Vec<_> = self.targets().collect();
        if all.is_empty() {
            return None;
        }
        let reached: Vec<f64> = all.iter().filter_map(|t| t.time_to_target_s).collect();
        let n = reached.len();
        Some((median_of(reached), n, all.len()))
    }
    /// A phase's share of the iteration (median over repeats).
    pub fn phase_share(&self, phase: Phase) -> Option<f64> {
        median_of(self.metrics().map(|m| phase.share_in(&m.phases)).collect())
    }
    /// True when every repeat's phases were timed with the device synchronised between them.
    pub fn phases_synchronised(&self) -> bool {
        self.metrics().all(|m| m.phases.synchronised)
    }
    /// The first repeat's metrics (memory figures are nearly deterministic across repeats).
    pub fn first_metrics(&self) -> Option<&'a Metrics> {
        self.metrics().next()
    }
    /// The series this configuration belongs to: same spec, precision, world size, data-parallel strategy,
    /// backend and device, and what tells it apart from rows of its run id with another plan.
    pub fn series_key(&self) -> (String, Precision, usize, String, String, String, Vec<String>) {
        (
            self.spec.clone(),
            self.precision,
            self.world_size,
            self.strategy(),
            self.backend.clone(),
            self.device.clone(),
            self.distinction.clone(),
        )
    }
    /// True when a repeat ran out of memory.
    pub fn out_of_memory(&self) -> bool {
        self.runs.iter().any(|r| matches!(r.outcome, RunOutcome::OutOfMemory { .. }))
    }
    /// The `distributed` sections of the repeats that wrote one (data-parallel runs).
    pub fn distributed(&self) -> impl Iterator<Item = &'a DistributedResult> + '_ {
        self.runs.iter().filter_map(|r| r.distributed.as_ref())
    }
    /// How the workers combined gradients: `single`, `all-reduce`, `parameter-server ×2` (two server ranks).
    pub fn strategy(&self) -> String {
        let strategy = self.runs.first().map(|r| r.plan.topology.strategy).unwrap_or_default();
        match strategy.servers() {
            0 => strategy.name().to_string(),
            n => format!("{} ×{n}", strategy.name()),
        }
    }
    /// The communication engine and its version (`mpi (Open MPI v4.1.4)`), from the first repeat that says.
    pub fn engine(&self) -> Option<String> {
        self.distributed().next().map(|d| {
            if d.engine_version.is_empty() { d.engine.clone() } else { format!("{} ({})", d.engine, d.engine_version) }
        })
    }
    /// Median over repeats of the share of a step spent exchanging gradients ([`comm_share_of`]).
    pub fn comm_share(&self) -> Option<f64> {
        median_of(self.runs.iter().filter_map(|r| comm_share_of(r)).collect())
    }
    /// Bytes each worker sent per step (the first repeat's; fixed by the model, precision and strategy).
    pub fn bytes_sent_per_step(&self) -> Option<u64> {
        self.distributed().next().map(|d| d.bytes_sent_per_step)
    }
    /// What one worker held of the model state (the first repeat's; the largest over its workers): weights,
    /// gradients, optimizer state, in bytes. A single worker's from its measured memory.
    pub fn held_per_rank(&self) -> Option<(u64, u64, u64)> {
        if let Some(d) = self.distributed().next() {
            let held: Vec<_> = d.ranks.iter().filter_map(|r| r.memory).collect();
            return (!held.is_empty()).then(|| {
                held.iter()
                    .fold((0, 0, 0), |(w, g, o), m| (w.max(m.weights), g.max(m.gradients), o.max(m.optimizer_state)))
            });
        }
        self.runs.iter().find_map(|r| r.metrics.as_ref()).map(|m| {
            let h = &m.memory.measured;
            (h.weights_bytes, h.gradients_bytes, h.optimizer_state_bytes)
        })
    }
    /// Median over repeats of the algorithm bandwidth (gradient bytes over the exchange time), GB/s.
    pub fn algorithm_bandwidth_gb_s(&self) -> Option<f64> {
        median_of(self.distributed().filter_map(|d| d.algorithm_bandwidth_gb_s).collect())
    }
    /// Median over repeats of the bus bandwidth (all-reduce only), GB/s.
    pub fn bus_bandwidth_gb_s(&self) -> Option<f64> {
        median_of(self.distributed().filter_map(|d| d.bus_bandwidth_gb_s).collect())
    }
    /// SHA-256 of the specs the repeats ran from (one, unless results of several runs were mixed).
    pub fn spec_hashes(&self) -> Vec<&'a str> {
        let mut v: Vec<&'a str> = self.runs.iter().map(|r| r.environment.spec_sha256.as_str()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Configurations of one spec on one backend, device, precision and world size, ordered by batch size.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    /// Legend label: what varies in the report (precision, devices, backend and device), e.g. `fp32`.
    pub label: String,
    /// Spec name.
    pub spec: String,
    /// Configurations by increasing batch size.
    pub points: Vec<ConfigRow<'a>>,
}

/// The grouped view of a result set that every output format renders.
#[derive(Debug, Clone)]
pub struct ReportModel<'a> {
    /// Every run, sorted by spec, precision, world size, batch size and run id.
    pub runs: Vec<&'a LoadedResult>,
    /// Configurations, sorted by spec, then series, then batch size.
    pub configs: Vec<ConfigRow<'a>>,
    /// What differs between configurations, beyond spec and batch size.
    pub varying: Varying,
}

impl<'a> ReportModel<'a> {
    /// Group results into configurations.
    pub fn new(results: &'a [LoadedResult]) -> Self {
        // Runs that never started (out of memory, skipped) record no device: borrow the name another run of the
        // same backend and selector recorded, so they join their series.
        let mut names: BTreeMap<(&str, String), String> = BTreeMap::new();
        for r in results.iter().map(|l| &l.result) {
            if let Some(d) = &r.environment.device {
                names.entry((r.backend.as_str(), r.plan.device.to_string())).or_insert_with(|| d.name.clone());
            }
        }
        let mut groups: BTreeMap<(String, String, String, String, String), ConfigRow<'a>> = BTreeMap::new();
        for loaded in results {
            let r = &loaded.result;
            let device = match &r.environment.device {
                Some(d) => d.name.clone(),
                None => names
                    .get(&(r.backend.as_str(), r.plan.device.to_string()))
                    .cloned()
                    .unwrap_or_else(|| device_name(r)),
            };
            let identity = ConfigurationIdentity::of(r);
            let key =
                (r.spec_name.clone(), r.backend.clone(), device.clone(), r.config_id().to_string(), identity.key());
            groups
                .entry(key)
                .or_insert_with(|| ConfigRow {
                    spec: r.spec_name.clone(),
                    config: r.config_id().to_string(),
                    identity,
                    distinction: Vec::new(),
                    backend: r.backend.clone(),
                    device,
                    precision: r.plan.precision,
                    batch: r.plan.batch_size,
                    world_size: r.plan.topology.world_size(),
                    runs: Vec::new(),
                })
                .runs
                .push(r);
        }
        let mut configs: Vec<ConfigRow<'a>> = groups.into_values().collect();
        name_distinctions(&mut configs);
        configs.sort_by(|a, b| a.series_key().cmp(&b.series_key()).then(a.batch.cmp(&b.batch)));
        let mut runs: Vec<&'a LoadedResult> = results.iter().collect();
        runs.sort_by(|a, b| {
            let key = |l: &LoadedResult| {
                let r = &l.result;
                (
                    r.spec_name.clone(),
                    r.plan.precision,
                    r.plan.topology.world_size(),
                    r.plan.batch_size,
                    r.run_id.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        let differs = |f: &dyn Fn(&ConfigRow<'a>) -> String| {
            configs.first().is_some_and(|first| configs.iter().any(|c| f(c) != f(first)))
        };
        let varying = Varying {
            precision: differs(&|c| c.precision.as_str().to_string()),
            world_size: differs(&|c| c.world_size.to_string()),
            strategy: {
                let mut strategies: Vec<String> =
                    configs.iter().filter(|c| c.world_size > 1).map(ConfigRow::strategy).collect();
                strategies.sort();
                strategies.dedup();
                strategies.len() > 1
            },
            placement: differs(&|c| c.placement()),
        };
        Self { runs, configs, varying }
    }

    /// Spec names, sorted.
    pub fn specs(&self) -> Vec<String> {
        let mut v: Vec<String> = self.configs.iter().map(|c| c.spec.clone()).collect();
        v.dedup();
        v
    }

    /// Distinct backend and device pairs, sorted.
    pub fn placements(&self) -> Vec<String> {
        let mut v: Vec<String> = self.configs.iter().map(ConfigRow::placement).collect();
        v.sort();
        v.dedup();
        v
    }

    /// The configurations of one spec.
    pub fn configs_of<'m>(&'m self, spec: &'m str) -> impl Iterator<Item = &'m ConfigRow<'a>> + 'm {
        self.configs.iter().filter(move |c| c.spec == spec)
    }

    /// The series of one spec.
    pub fn series_of(&self, spec: &str) -> Vec<Series<'a>> {
        let mut out: Vec<Series<'a>> = Vec::new();
        for c in self.configs_of(spec) {
            let key = c.series_key();
            match out.last_mut() {
                Some(s) if s.points.first().is_some_and(|p| p.series_key() == key) => s.points.push(c.clone()),
                _ => out.push(Series { label: self.series_label(c), spec: c.spec.clone(), points: vec![c.clone()] }),
            }
        }
        out
    }

    /// Legend label of the series of a configuration: what varies in the report, at least the precision.
    fn series_label(&self, c: &ConfigRow<'_>) -> String {
        let v = self.varying;
        let mut parts = Vec::new();
        if v.precision || !(v.world_size || v.placement) {
            parts.push(c.precision.as_str().to_string());
        }
        if v.world_size {
            parts.push(if c.world_size == 1 { "1 device".to_string() } else { format!("{} devices", c.world_size) });
        }
        if v.strategy && c.world_size > 1 {
            parts.push(c.strategy());
        }
        if v.placement {
            parts.push(c.placement());
        }
        parts.extend(c.distinction_beyond(v));
        parts.join(" · ")
    }
}

/// Rows of one spec, backend, device and run id with different plans: each gets what tells it apart
/// ([`distinctions`]), appended to its `config` so that every table and plot names it.
fn name_distinctions(configs: &mut [ConfigRow<'_>]) {
    let mut by_id: BTreeMap<(&str, &str, &str, &str), Vec<usize>> = BTreeMap::new();
    for (i, c) in configs.iter().enumerate() {
        by_id.entry((&c.spec, &c.backend, &c.device, &c.config)).or_default().push(i);
    }
    let shared: Vec<Vec<usize>> = by_id.into_values().filter(|rows| rows.len() > 1).collect();
    for rows in shared {
        let ids: Vec<&ConfigurationIdentity> = rows.iter().map(|&i| &configs[i].identity).collect();
        for (&i, parts) in rows.iter().zip(distinctions(&ids)) {
            if !parts.is_empty() {
                configs[i].config = format!("{} · {}", configs[i].config, parts.join(", "));
            }
            configs[i].distinction = parts;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median_of(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_of(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median_of(vec![f64::NAN]), None);
        let s = Spread::of(vec![3.0, f64::NAN, 1.0, 2.0]).unwrap_or(Spread { median: 0.0, min: 0.0, max: 0.0, n: 0 });
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(s.interval(), Some((1.0, 3.0)));
        assert_eq!(Spread::of(vec![5.0]).and_then(|s| s.interval()), None);
        assert_eq!(Spread::of(vec![]), None);
    }
}
