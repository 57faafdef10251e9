//! The overview table both report pages open with: one row per configuration with its throughput (and the
//! interval over repeats), step times, peak memory, utilisation, outcome and, when measured, the input
//! pipeline's own throughput, the data and comm shares, the input stall share, and the time to a training target.
//! Columns no configuration has a figure for are left out; HTML and Markdown render the same cells.

use std::collections::BTreeMap;

use super::model::{MemorySource, Phase, ReportModel};
use crate::format::{self, human_bytes};
use crate::mlperf::score::{olympic_of, reached};

/// A column of the overview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// The configuration identifier.
    Configuration,
    /// Backend and device (only when a report has several).
    Placement,
    /// How the repeats ended.
    Outcome,
    /// Samples per second with the interval over repeats.
    SamplesPerS,
    /// Median step time.
    MedianStep,
    /// 95th-percentile step time.
    P95Step,
    /// Peak memory.
    PeakMemory,
    /// NVML GPU busy time.
    Gpu,
    /// Achieved FLOP/s over the device peak.
    Flop,
    /// Tokens per second, global and per device (token models).
    TokensPerS,
    /// Model FLOP utilisation with the peak's precision and figure.
    Mfu,
    /// Hardware FLOP utilisation (activation checkpointing).
    Hfu,
    /// Process CPU utilisation.
    Cpu,
    /// Samples per second of the input pipeline alone (local datasets).
    LoaderPerS,
    /// Share of the iteration spent producing the batch.
    DataShare,
    /// Share of the iteration spent communicating gradients.
    CommShare,
    /// Share of the iteration spent waiting for the next batch (input stall).
    StallShare,
    /// Time to the training target (runs with `[training.target]`).
    TimeToTarget,
}

impl Column {
    /// Column heading.
    pub fn heading(self) -> &'static str {
        match self {
            Column::Configuration => "configuration",
            Column::Placement => "backend · device",
            Column::Outcome => "outcome",
            Column::SamplesPerS => "samples/s [repeats]",
            Column::MedianStep => "median step",
            Column::P95Step => "p95 step",
            Column::PeakMemory => "peak memory",
            Column::Gpu => "GPU busy",
            Column::Flop => "FLOP of peak",
            Column::TokensPerS => "tokens/s (per device)",
            Column::Mfu => "MFU (peak)",
            Column::Hfu => "HFU",
            Column::Cpu => "CPU",
            Column::LoaderPerS => "loader samples/s",
            Column::DataShare => "data",
            Column::CommShare => "comm",
            Column::StallShare => "stall",
            Column::TimeToTarget => "to target",
        }
    }
    /// True for right-aligned numeric columns.
    pub fn numeric(self) -> bool {
        !matches!(self, Column::Configuration | Column::Placement | Column::Outcome)
    }
    /// What the column holds, for the note under the table (`None`: self-explanatory).
    pub fn explanation(self) -> Option<&'static str> {
        Some(match self {
            Column::SamplesPerS => {
                "samples/s: steady-state throughput, median over repeats, with [smallest–largest repeat] when \
                 there are several; bold: the highest of its spec"
            }
            Column::MedianStep => "step times: median over repeats of each repeat's median and 95th percentile",
            Column::PeakMemory => {
                "peak memory: the allocator peak, else the GPU memory NVML saw the process use (NVML), else the \
                 process's largest resident set (RSS)"
            }
            Column::Gpu => "GPU busy: mean NVML kernel-busy time",
            Column::Flop => "FLOP of peak: analysis FLOPs x throughput over the peak of all the run's devices",
            Column::TokensPerS => "tokens/s: tokens of the trained sequences per second (no padding), per device after",
            Column::Mfu => {
                "MFU: model FLOPs (their convention in the result) x throughput over the peak of the precision the \
                 run computes in, summed over its devices; the peak's figure and precision in brackets"
            }
            Column::Hfu => "HFU: model FLOPs plus what activation checkpointing recomputes, over the same peak",
            Column::Cpu => "CPU: process utilisation of all cores",
            Column::LoaderPerS => {
                "loader samples/s: the input pipeline reading the local dataset alone, with no training (median \
                 over repeats); a run whose samples/s comes close to it is input-bound"
            }
            Column::DataShare => "data: share of the iteration producing and transferring the batch",
            Column::CommShare => {
                "comm: share of a data-parallel step spent exchanging gradients (median over steps and repeats; - for \
                 one worker)"
            }
            Column::StallShare => {
                "stall: share of the iteration waiting for the next batch from the dataset pipeline (part of data)"
            }
            Column::TimeToTarget => {
                "to target: seconds from the first step to the evaluation that reached the training target, median \
                 over the repeats that reached it (reached/with a target), and with three repeats or more MLPerf's \
                 olympic mean (fastest and slowest dropped, a run that missed the target counting as the slowest)"
            }
            _ => return None,
        })
    }
}

/// How a cell is emphasised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emphasis {
    /// Nothing special.
    Plain,
    /// The highest throughput of its spec.
    Best,
    /// Not every repeat completed.
    Bad,
    /// No figure.
    Missing,
}

/// One cell: its text, an optional interval after it, and its emphasis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The figure or text (`-` when missing).
    pub text: String,
    /// The interval over repeats, e.g. `1180–1260`.
    pub range: Option<String>,
    /// Emphasis.
    pub emphasis: Emphasis,
}

impl Cell {
    fn plain(text: impl Into<String>) -> Self {
        Self { text: text.into(), range: None, emphasis: Emphasis::Plain }
    }
    fn opt(v: Option<String>) -> Self {
        v.map(Self::plain).unwrap_or(Self { text: "-".into(), range: None, emphasis: Emphasis::Missing })
    }
}

/// One configuration's row.
#[derive(Debug, Clone)]
pub struct Row {
    /// Spec name.
    pub spec: String,
    /// Configuration identifier.
    pub config: String,
    /// One cell per column.
    pub cells: Vec<Cell>,
}

/// The overview table.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The columns shown.
    pub columns: Vec<Column>,
    /// One row per configuration, in the model's order.
    pub rows: Vec<Row>,
}

impl Overview {
    /// The table of a report.
    pub fn new(model: &ReportModel<'_>) -> Self {
        let any = |f: &dyn Fn(&super::model::ConfigRow<'_>) -> bool| model.configs.iter().any(f);
        let share_seen = |p: Phase| any(&|c| c.phase_share(p).is_some_and(|s| s >= 0.0005));
        let optional = [
            (Column::Placement, model.varying.placement),
            (Column::Gpu, any(&|c| c.gpu_utilization_percent().is_some())),
            (Column::Flop, any(&|c| c.flop_fraction().is_some())),
            (Column::TokensPerS, any(&|c| c.tokens_per_s().is_some())),
            (Column::Mfu, any(&|c| c.utilization().is_some())),
            (Column::Hfu, any(&|c| c.utilization().is_some_and(|u| u.hfu.is_some()))),
            (Column::Cpu, any(&|c| c.cpu_utilization().is_some())),
            (Column::LoaderPerS, any(&|c| c.loader_samples_per_s().is_some())),
            (Column::DataShare, share_seen(Phase::Data)),
            (Column::CommShare, any(&|c| c.comm_share().is_some())),
            (Column::StallShare, any(&|c| c.stall_share().is_some_and(|s| s >= 0.0005))),
            (Column::TimeToTarget, any(&|c| reached(c.runs.iter().copied()).is_some())),
        ];
        let shown = |col: Column| optional.iter().find(|(c, _)| *c == col).is_none_or(|(_, on)| *on);
        let columns: Vec<Column> = [
            Column::Configuration,
            Column::Placement,
            Column::Outcome,
            Column::SamplesPerS,
            Column::MedianStep,
            Column::P95Step,
            Column::PeakMemory,
            Column::Gpu,
            Column::Flop,
            Column::TokensPerS,
            Column::Mfu,
            Column::Hfu,
            Column::Cpu,
            Column::LoaderPerS,
            Column::DataShare,
            Column::StallShare,
            Column::CommShare,
            Column::TimeToTarget,
        ]
        .into_iter()
        .filter(|c| shown(*c))
        .collect();

        // The highest throughput of each spec that has at least two configurations with one.
        let mut best: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for c in &model.configs {
            best.entry(c.spec.as_str()).or_default().extend(c.samples_per_s());
        }
        let best: BTreeMap<&str, f64> = best
            .into_iter()
            .filter(|(_, v)| v.len() >= 2)
            .map(|(spec, v)| (spec, v.into_iter().fold(f64::MIN, f64::max)))
            .collect();
        let rows = model
            .configs
            .iter()
            .map(|c| {
                let best = best.get(c.spec.as_str()).copied();
                let cells = columns
                    .iter()
                    .map(|col| match col {
                        Column::Configuration => Cell::plain(c.config.clone()),
                        Column::Placement => Cell::plain(c.placement()),
                        Column::Outcome => Cell {
                            emphasis: if c.all_completed() { Emphasis::Plain } else { Emphasis::Bad },
                            ..Cell::plain(c.outcome_summary())
                        },
                        Column::SamplesPerS => match c.samples_per_s_spread() {
                            Some(s) => Cell {
                                text: format::sig(s.median),
                                range: s.interval().map(|(lo, hi)| format!("{}–{}", format::sig(lo), format::sig(hi))),
                                emphasis: if best == Some(s.median) { Emphasis::Best } else { Emphasis::Plain },
                            },
                            None => Cell::opt(None),
                        },
                        Column::MedianStep => Cell::opt(c.median_step_s().map(format::ms)),
                        Column::P95Step => Cell::opt(c.p95_step_s().map(format::ms)),
                        Column::PeakMemory => Cell::opt(c.peak_memory().map(|p| match p.source {
                            MemorySource::Allocator => human_bytes(p.bytes),
                            MemorySource::GpuProcess => format!("{} (NVML)", human_bytes(p.bytes)),
                            MemorySource::Rss => format!("{} (RSS)", human_bytes(p.bytes)),
                        })),
                        Column::Gpu => Cell::opt(c.gpu_utilization_percent().map(|v| format!("{v:.1}%"))),
                        Column::Flop => Cell::opt(c.flop_fraction().map(format::percent)),
                        Column::TokensPerS => {
                            Cell::opt(c.tokens_per_s().map(|(global, per_device)| match per_device {
                                Some(d) if (d - global).abs() > 1e-9 * global => {
                                    format!("{} ({})", format::sig(global), format::sig(d))
                                }
                                _ => format::sig(global),
                            }))
                        }
                        Column::Mfu => match c.utilization() {
                            Some(u) => Cell::plain(format!(
                                "{} ({})",
                                format::percent(u.mfu),
                                super::utilization::peak_text(u.peak_flop_per_s, &u.precision)
                            )),
                            None => Cell::opt(None),
                        },
                        Column::Hfu => Cell::opt(c.utilization().and_then(|u| u.hfu).map(format::percent)),
                        Column::Cpu => Cell::opt(c.cpu_utilization().map(format::percent)),
                        Column::LoaderPerS => Cell::opt(c.loader_samples_per_s().map(format::sig)),
                        Column::DataShare => Cell::opt(c.phase_share(Phase::Data).map(format::percent)),
                        Column::CommShare => Cell::opt(c.comm_share().map(format::percent)),
                        Column::StallShare => Cell::opt(c.stall_share().map(format::percent)),
                        Column::TimeToTarget => match reached(c.runs.iter().copied()) {
                            Some((median, reached, of)) => Cell {
                                emphasis: if reached == of { Emphasis::Plain } else { Emphasis::Bad },
                                ..Cell::plain(format!(
                                    "{} ({reached}/{of}){}",
                                    median.map_or_else(|| "not reached".to_string(), |s| format!("{s:.2} s")),
                                    olympic_of(c.runs.iter().copied())
                                        .and_then(|o| o.mean_s)
                                        .map_or_else(String::new, |s| format!("; olympic {s:.2} s"))
                                ))
                            },
                            None => Cell::opt(None),
                        },
                    })
                    .collect();
                Row { spec: c.spec.clone(), config: c.config.clone(), cells }
            })
            .collect();
        Self { columns, rows }
    }

    /// The note under the table: what each shown column holds, one sentence.
    pub fn note(&self) -> String {
        let mut parts: Vec<&str> = self.columns.iter().filter_map(|c| c.explanation()).collect();
        parts.dedup();
        let mut s = parts.join("; ");
        if let Some(first) = s.get(..1) {
            s = format!("{}{}.", first.to_uppercase(), &s[1..]);
        }
        s
    }
}
