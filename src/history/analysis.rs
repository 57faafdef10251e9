//! Statistics over the store: change points of every series (restarting at acknowledged changes, each
//! explained by the environment fields that changed), and the gate: a candidate's runs against the baseline
//! the store holds for their configuration and machine.

use std::collections::BTreeMap;

use serde::Serialize;

use super::order::PointOrder;
use super::points::{EnvChange, Point, Series, environment_diff, group_runs, group_runs_in, points_of};
use super::record::RunRecord;
use super::series::Metric;
use super::store::{Store, StoreError};
use crate::stats::changepoint::{self, DetectOptions};
use crate::stats::gate::{self, GateOptions, GateVerdict, SessionNoise};

/// A change the detector found in a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The first point after the change.
    pub first_point: Point,
    /// `regression` or `improvement`, by the metric's direction.
    pub direction: &'static str,
    /// Mean of the segment before.
    pub mean_before: f64,
    /// Mean of the segment after.
    pub mean_after: f64,
    /// `mean_after / mean_before - 1`.
    pub relative_change: f64,
    /// p-value of the t-test between the segments.
    pub p_value: f64,
    /// The environment fields that changed between the last point before and the first after.
    pub environment: Vec<EnvChange>,
}

/// What detection says about one series.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Detection {
    /// The series (since its latest acknowledged change) is too short to judge.
    TooFewPoints {
        /// Points since the restart.
        points: usize,
        /// Points detection needs.
        needed: usize,
    },
    /// Detection ran: the changes found (none: a stationary series).
    Checked {
        /// The changes, in order.
        changes: Vec<Change>,
    },
}

impl Detection {
    /// The last change found, if any.
    pub fn last_change(&self) -> Option<&Change> {
        match self {
            Detection::Checked { changes } => changes.last(),
            Detection::TooFewPoints { .. } => None,
        }
    }
}

/// Change points of a series, from each acknowledged change on (an acknowledged change is never reported;
/// the statistics restart there).
pub fn detect(series: &Series, opts: &DetectOptions) -> Detection {
    let mut starts: Vec<usize> = series.acks.iter().map(|(i, _)| *i).filter(|i| *i > 0).collect();
    starts.sort_unstable();
    starts.dedup();
    starts.insert(0, 0);
    let mut changes = Vec::new();
    let mut checked_any = false;
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(series.points.len());
        let segment = &series.points[start..end];
        let values: Vec<f64> = segment.iter().map(|p| p.value).collect();
        let Ok(found) = changepoint::detect(&values, opts) else { continue };
        checked_any = true;
        for cp in found {
            let index = start + cp.index;
            let (Some(before), Some(after)) = (series.points.get(index.wrapping_sub(1)), series.points.get(index))
            else {
                continue;
            };
            let worse = if series.id.metric.lower_is_better() {
                cp.mean_after > cp.mean_before
            } else {
                cp.mean_after < cp.mean_before
            };
            changes.push(Change {
                first_point: after.clone(),
                direction: if worse { "regression" } else { "improvement" },
                mean_before: cp.mean_before,
                mean_after: cp.mean_after,
                relative_change: cp.relative_change,
                p_value: cp.p_value,
                environment: environment_diff(before, after),
            });
        }
    }
    if checked_any {
        Detection::Checked { changes }
    } else {
        let points = series.points.len() - series.restart().min(series.points.len());
        Detection::TooFewPoints { points, needed: 2 * opts.min_points_per_segment.max(2) }
    }
}

/// The baseline a gate compares with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// The runs recorded at this revision (a prefix of at least 7 characters matches).
    Revision(String),
    /// The runs of the series' last N points (since its latest acknowledged change).
    LastPoints(usize),
}

impl std::fmt::Display for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Baseline::Revision(r) => write!(f, "revision {r}"),
            Baseline::LastPoints(n) => write!(f, "last {n} points"),
        }
    }
}

/// Whether a recorded revision is the one asked for (equal, or one a prefix of at least 7 characters of the
/// other).
pub fn same_revision(recorded: &str, asked: &str) -> bool {
    recorded == asked
        || (asked.len() >= 7 && recorded.starts_with(asked))
        || (recorded.len() >= 7 && asked.starts_with(recorded))
}

/// The gate's answer for one configuration on one machine.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// The configuration in words.
    pub config_label: String,
    /// The machine in words.
    pub machine_label: String,
    /// The step-time series' name.
    pub series: String,
    /// Baseline runs found.
    pub baseline_runs: usize,
    /// Candidate runs.
    pub candidate_runs: usize,
    /// The verdict; `None` when the store holds no baseline for it (inconclusive).
    pub verdict: Option<GateVerdict>,
    /// The series' point-to-point noise the verdict used; `None` with fewer than
    /// [`SESSION_NOISE_MIN_POINTS`] points of history.
    pub series_noise: Option<f64>,
}

/// Fewest points of a series' history (since its latest acknowledged change) its point-to-point noise is
/// learned from; with fewer, the gate judges by the runs' own spread alone.
pub const SESSION_NOISE_MIN_POINTS: usize = 5;

/// The run keys acknowledged changes of the series `name` restart at.
fn acks_of(acks: &[super::store::Ack], name: &str) -> Vec<String> {
    acks.iter().filter(|a| a.series == name).map(|a| a.at_run_key.clone()).collect()
}

/// The step-time series' point-to-point noise over its history `runs` (the candidates excluded, points in
/// `order`) since its latest acknowledged change, and how many points the baseline's and the candidate's runs
/// make.
fn session_noise(
    runs: &[RunRecord],
    order: &PointOrder,
    ack_keys: &[String],
    baseline: &[&RunRecord],
    candidates: &[&RunRecord],
) -> Option<SessionNoise> {
    let (groups, _) = group_runs_in(runs, order);
    let points = points_of(runs, &groups, Metric::StepTime);
    let restart = points.iter().rposition(|p| p.run_keys.iter().any(|k| ack_keys.contains(k))).unwrap_or(0);
    let values: Vec<f64> = points[restart..].iter().map(|p| p.value).collect();
    if values.len() < SESSION_NOISE_MIN_POINTS {
        return None;
    }
    let count = |side: &[&RunRecord]| {
        let owned: Vec<RunRecord> = side.iter().map(|r| (*r).clone()).collect();
        group_runs(&owned).len()
    };
    Some(SessionNoise {
        relative_sd: changepoint::relative_noise(&values),
        baseline_points: count(baseline),
        candidate_points: count(candidates),
    })
}

/// Gate `candidates` on their step times against `baseline` in the store, one answer per configuration and
/// machine (candidates already in the store are never their own baseline); `last:N` counts points in time order.
pub fn gate(
    store: &mut dyn Store,
    candidates: &[RunRecord],
    baseline: &Baseline,
    opts: &GateOptions,
) -> Result<Vec<GateResult>, StoreError> {
    gate_in(store, candidates, baseline, opts, &PointOrder::Time)
}

/// [`gate`], with the points `last:N` counts in `order` (in revision order: the last N revisions of the history
/// measured, however late they were recorded).
pub fn gate_in(
    store: &mut dyn Store,
    candidates: &[RunRecord],
    baseline: &Baseline,
    opts: &GateOptions,
    order: &PointOrder,
) -> Result<Vec<GateResult>, StoreError> {
    let acks = store.acks()?;
    let mut groups: BTreeMap<(String, String), Vec<&RunRecord>> = BTreeMap::new();
    for c in candidates {
        groups.entry((c.config_key.clone(), c.machine_key.clone())).or_default().push(c);
    }
    let mut out = Vec::new();
    for ((config_key, machine_key), cands) in groups {
        let Some(first) = cands.first() else { continue };
        let id = super::points::SeriesId {
            config_key: config_key.clone(),
            config_label: first.config_label.clone(),
            machine_key: machine_key.clone(),
            machine_label: first.machine_label.clone(),
            metric: Metric::StepTime,
        };
        let name = id.name();
        let own: Vec<&str> = cands.iter().map(|c| c.run_key.as_str()).collect();
        let mut runs = store.runs_of(&config_key, &machine_key)?;
        runs.retain(|r| !own.contains(&r.run_key.as_str()));
        let chosen: Vec<&RunRecord> = match baseline {
            Baseline::Revision(rev) => {
                runs.iter().filter(|r| r.revision.as_deref().is_some_and(|x| same_revision(x, rev))).collect()
            }
            Baseline::LastPoints(n) => {
                let (groups, _) = group_runs_in(&runs, order);
                let points = points_of(&runs, &groups, Metric::StepTime);
                let restart = acks
                    .iter()
                    .filter(|a| a.series == name)
                    .filter_map(|a| points.iter().position(|p| p.run_keys.contains(&a.at_run_key)))
                    .max()
                    .unwrap_or(0);
                let from = points.len().saturating_sub(*n).max(restart);
                let keys: Vec<&String> = points[from.min(points.len())..].iter().flat_map(|p| &p.run_keys).collect();
                runs.iter().filter(|r| keys.contains(&&r.run_key)).collect()
            }
        };
        let baseline_steps: Vec<Vec<f64>> = chosen.iter().map(|r| r.step_times()).filter(|s| !s.is_empty()).collect();
        let candidate_steps: Vec<Vec<f64>> = cands.iter().map(|r| r.step_times()).filter(|s| !s.is_empty()).collect();
        let session = session_noise(&runs, order, &acks_of(&acks, &name), &chosen, &cands);
        let verdict = (!baseline_steps.is_empty() && !candidate_steps.is_empty())
            .then(|| gate::judge(&baseline_steps, &candidate_steps, true, opts, session.as_ref()));
        out.push(GateResult {
            config_label: first.config_label.clone(),
            machine_label: first.machine_label.clone(),
            series: name,
            baseline_runs: baseline_steps.len(),
            candidate_runs: candidate_steps.len(),
            verdict,
            series_noise: session.map(|s| s.relative_sd),
        });
    }
    Ok(out)
}
