//! Pairs of MLPerf entries of one benchmark across the two sides: a published result imported by `trainbench
//! import mlperf` (spec `mlperf-<benchmark>`, configuration `<system>`) and a user's run of a spec whose
//! `[mlperf]` table names the same benchmark have no configuration in common, so the ordinary pairing leaves
//! both unpaired. They are compared on what MLPerf scores, the time to train: each side's median over its
//! converged runs and its olympic mean; their step times are not comparable (an imported log has none).

use super::change::Change;
use super::comparison::{PairReport, Side, Verdict};
use crate::mlperf::score::{TrainTime, olympic_of, time_to_train};
use crate::result::{LoadedResult, RunResult};
use crate::stats;

/// The MLPerf benchmark a result is an entry of: an imported log's `submission_benchmark`, or the
/// `mlperf.benchmark` of the spec a run embeds; `None` for other results.
pub fn benchmark_of(result: &RunResult) -> Option<String> {
    if let Some(imported) = &result.mlperf {
        return Some(imported.benchmark.clone());
    }
    let spec: toml::Value = toml::from_str(&result.environment.spec_canonical).ok()?;
    Some(spec.get("mlperf")?.get("benchmark")?.as_str()?.to_string())
}

/// The benchmark every run of a configuration is an entry of (`None` when they disagree or one is none).
pub(super) fn benchmark_of_runs(runs: &[&LoadedResult]) -> Option<String> {
    let first = benchmark_of(&runs.first()?.result)?;
    runs.iter().all(|l| benchmark_of(&l.result).as_deref() == Some(first.as_str())).then_some(first)
}

/// One side of an MLPerf pair: its configuration's name and runs.
pub(super) struct EntrySide<'a> {
    /// Spec name.
    pub spec: &'a str,
    /// Configuration.
    pub config: &'a str,
    /// The side as a pair reports it.
    pub side: Side,
    /// Its runs.
    pub runs: &'a [&'a LoadedResult],
}

/// Median time to train over the converged runs, `(converged, with a time to train)`.
fn times(runs: &[&LoadedResult]) -> (Option<f64>, usize, usize) {
    let all: Vec<TrainTime> = runs.iter().filter_map(|l| time_to_train(&l.result)).collect();
    let converged: Vec<f64> = all
        .iter()
        .filter_map(|t| match t {
            TrainTime::Converged(s) => Some(*s),
            TrainTime::NotConverged => None,
        })
        .collect();
    (stats::median(&converged), converged.len(), all.len())
}

/// The time-to-train comparison of two entries of `benchmark`.
pub(super) fn time_to_train_pair(benchmark: &str, base: EntrySide<'_>, cand: EntrySide<'_>) -> PairReport {
    let (bt, ct) = (times(base.runs), times(cand.runs));
    let describe = |s: &EntrySide<'_>, t: (Option<f64>, usize, usize)| {
        let median = t.0.map_or("not converged".to_string(), |s| format!("median {}", crate::format::duration(s)));
        format!("{} / {}: {median}, {}/{} runs converged", s.spec, s.config, t.1, t.2)
    };
    let mut notes = vec![format!(
        "MLPerf `{benchmark}` entries compared on time to train only: baseline {}; candidate {}",
        describe(&base, bt),
        describe(&cand, ct)
    )];
    let score = |runs: &[&LoadedResult]| olympic_of(runs.iter().map(|l| &l.result)).map(|o| o.describe());
    if let (Some(b), Some(c)) = (score(base.runs), score(cand.runs)) {
        notes.push(format!("time to train (MLPerf): baseline {b}; candidate {c}"));
    }
    notes.push(
        "step times are not compared: a published log states no step times, and the two entries train different \
         models, data and systems to the same benchmark's metric"
            .to_string(),
    );
    let time_to_target = Change::new(bt.0, ct.0);
    if let Some(c) = &time_to_target {
        notes.push(format!("candidate time to train {:+.1}% against the baseline", (c.ratio - 1.0) * 100.0));
    }
    PairReport {
        spec: format!("mlperf:{benchmark}"),
        config: format!("{} vs {}", base.config, cand.config),
        batch_size: base.runs.first().map_or(0, |l| l.result.plan.batch_size),
        baseline: base.side,
        candidate: cand.side,
        verdict: Verdict::TimeToTrain,
        step_time: None,
        throughput: None,
        peak_memory: None,
        utilization: None,
        scaling_efficiency: None,
        time_to_target,
        env_differences: Vec::new(),
        notes,
    }
}
