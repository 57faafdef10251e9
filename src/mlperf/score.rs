//! Time to train as MLPerf scores it: per run `run_stop - run_start` (a trainbench run's `time_to_target_s`, or an
//! imported log's), and over a configuration's repeats the olympic mean MLCommons' result summarizer takes: the
//! fastest and the slowest run dropped, the rest averaged. A run that did not converge counts as the slowest,
//! so one may be dropped; with two or more, or fewer than three runs, there is no olympic mean.

use crate::result::RunResult;

/// One run's time to train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TrainTime {
    /// The run reached its quality target after this many seconds.
    Converged(f64),
    /// The run ended without reaching it (`run_stop` status `aborted`).
    NotConverged,
}

/// The time to train of `result`: a run with a target (`time_to_target_s`, which its MLPerf log writes as
/// `run_stop - run_start`), or a run imported from an MLPerf log; `None` for a run trained without a target.
pub fn time_to_train(result: &RunResult) -> Option<TrainTime> {
    if let Some(imported) = &result.mlperf {
        return Some(imported.time_to_train_s().map_or(TrainTime::NotConverged, TrainTime::Converged));
    }
    result.plan.target.as_ref()?;
    let target = result.metrics.as_ref().and_then(|m| m.time_to_target.as_ref());
    Some(match target.and_then(|t| t.time_to_target_s.filter(|_| t.reached)) {
        Some(s) => TrainTime::Converged(s),
        None => TrainTime::NotConverged,
    })
}

/// A configuration's score over its runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Olympic {
    /// Runs with a time to train.
    pub runs: usize,
    /// Of them, the runs that did not converge.
    pub not_converged: usize,
    /// The olympic mean in seconds; `None` with fewer than three runs or more than one not converged.
    pub mean_s: Option<f64>,
}

/// The olympic mean of `times` (see the module docs).
pub fn olympic(times: &[TrainTime]) -> Olympic {
    let mut converged: Vec<f64> = times
        .iter()
        .filter_map(|t| match t {
            TrainTime::Converged(s) => Some(*s),
            TrainTime::NotConverged => None,
        })
        .collect();
    converged.sort_by(f64::total_cmp);
    let not_converged = times.len() - converged.len();
    let mean_s = match (times.len(), not_converged) {
        (n, _) if n < 3 => None,
        (_, 0) => mean(converged.get(1..converged.len() - 1)),
        (_, 1) => mean(converged.get(1..)),
        _ => None,
    };
    Olympic { runs: times.len(), not_converged, mean_s }
}

fn mean(values: Option<&[f64]>) -> Option<f64> {
    let v = values.filter(|v| !v.is_empty())?;
    Some(v.iter().sum::<f64>() / v.len() as f64)
}

/// The olympic score of the runs among `results` that have a time to train; `None` when none has.
pub fn olympic_of<'a>(results: impl IntoIterator<Item = &'a RunResult>) -> Option<Olympic> {
    let times: Vec<TrainTime> = results.into_iter().filter_map(time_to_train).collect();
    (!times.is_empty()).then(|| olympic(&times))
}

impl Olympic {
    /// In words: `olympic mean 12.3 s of 5 runs (fastest and slowest dropped), 1 not converged`.
    pub fn describe(&self) -> String {
        let runs = if self.runs == 1 { "1 run".to_string() } else { format!("{} runs", self.runs) };
        let mean = match self.mean_s {
            Some(s) => format!("olympic mean {} of {runs} (fastest and slowest dropped)", crate::format::duration(s)),
            None if self.runs < 3 => format!("no olympic mean: {runs}, it needs at least 3"),
            None => format!("no olympic mean: {} of {runs} did not converge", self.not_converged),
        };
        format!("{mean}, {} not converged", self.not_converged)
    }
}

/// Over `results`: the median time to train of the runs that converged, how many converged, and how many have a
/// time to train; `None` when none has.
pub fn reached<'a>(results: impl IntoIterator<Item = &'a RunResult>) -> Option<(Option<f64>, usize, usize)> {
    let times: Vec<TrainTime> = results.into_iter().filter_map(time_to_train).collect();
    let converged: Vec<f64> = times
        .iter()
        .filter_map(|t| match t {
            TrainTime::Converged(s) => Some(*s),
            TrainTime::NotConverged => None,
        })
        .collect();
    (!times.is_empty()).then(|| (crate::stats::median(&converged), converged.len(), times.len()))
}

/// One line per configuration of `results` with a time to train, in their order:
/// `time to train of <spec> <config>: olympic mean ...`.
pub fn summary_lines<'a>(results: impl IntoIterator<Item = &'a RunResult>) -> Vec<String> {
    let mut groups: Vec<((&str, &str), Vec<&RunResult>)> = Vec::new();
    for r in results {
        let key =
            (r.spec_name.as_str(), if r.plan.config.is_empty() { r.run_id.as_str() } else { r.plan.config.as_str() });
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, runs)) => runs.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups
        .into_iter()
        .filter_map(|((_, config), runs)| Some(format!("time to train of {config}: {}", olympic_of(runs)?.describe())))
        .collect()
}

/// A run's time to train in a table cell: seconds, or `not converged`.
pub fn cell(time: TrainTime) -> String {
    match time {
        TrainTime::Converged(s) => crate::format::duration(s),
        TrainTime::NotConverged => "not converged".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::TrainTime::{Converged as C, NotConverged as N};
    use super::*;

    #[test]
    fn the_fastest_and_the_slowest_are_dropped() {
        let o = olympic(&[C(10.0), C(1.0), C(4.0), C(6.0), C(100.0)]);
        assert_eq!(o, Olympic { runs: 5, not_converged: 0, mean_s: Some(20.0 / 3.0) });
        assert_eq!(olympic(&[C(3.0), C(1.0), C(2.0)]).mean_s, Some(2.0));
    }

    #[test]
    fn one_run_not_converged_is_the_slowest_two_leave_no_score() {
        assert_eq!(olympic(&[C(1.0), N, C(3.0), C(5.0)]).mean_s, Some(4.0));
        let two = olympic(&[C(1.0), N, C(3.0), N]);
        assert_eq!((two.mean_s, two.not_converged), (None, 2));
        assert!(two.describe().contains("2 of 4 runs did not converge"), "{}", two.describe());
        assert_eq!(olympic(&[C(1.0), C(2.0)]).mean_s, None);
        assert_eq!(olympic(&[]).mean_s, None);
    }
}
