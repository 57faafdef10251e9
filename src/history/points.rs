//! Runs grouped into series and points. A series is one configuration on one machine, one metric
//! ([`SeriesId`]); a point is one invocation's runs, repeats pooled: consecutive runs (in time order) of one
//! revision and one software set whose repeat numbers rise (a repeat 0, or a repeat number not above the last,
//! starts the next point). Points are computed when read, from the runs alone, so recording order and
//! `rebuild` never change them. In revision order ([`PointOrder::Revision`]) a point is every run of one revision
//! instead, in the revisions' order, and runs of a revision the history does not know are left out (and listed).

use std::collections::BTreeMap;

use serde::Serialize;

use super::order::PointOrder;
use super::record::RunRecord;
use super::series::Metric;
use super::store::{Ack, SeriesHead, Store, StoreError};
use crate::stats::median;

/// Hex digits of the configuration and machine keys shown in a series' name.
const NAME_DIGITS: usize = 8;

/// Which series: a configuration, a machine, a metric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeriesId {
    /// Configuration identity.
    pub config_key: String,
    /// The configuration in words.
    pub config_label: String,
    /// Machine identity.
    pub machine_key: String,
    /// The machine in words.
    pub machine_label: String,
    /// The metric.
    #[serde(serialize_with = "metric_name")]
    pub metric: Metric,
}

fn metric_name<S: serde::Serializer>(metric: &Metric, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(metric.name())
}

impl SeriesId {
    /// The series' name, as commands print and take it: `toy.b8.fp32.1x1#3fa2c1d0@9b1e22aa:step_time`.
    pub fn name(&self) -> String {
        let short = |key: &str| key.chars().take(NAME_DIGITS).collect::<String>();
        format!("{}#{}@{}:{}", self.config_label, short(&self.config_key), short(&self.machine_key), self.metric.name())
    }
}

/// One point of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Position in the series, from 0.
    pub index: usize,
    /// The metric's value: the median over the point's runs.
    pub value: f64,
    /// When its first run started.
    pub started_at: String,
    /// The revision it measured, if known.
    pub revision: Option<String>,
    /// The software its runs used.
    pub software: BTreeMap<String, String>,
    /// Its runs' identifiers.
    pub run_ids: Vec<String>,
    /// Its runs' keys (the first names the point in an acknowledgement).
    pub run_keys: Vec<String>,
    /// The files its runs were recorded from.
    pub sources: Vec<String>,
}

/// A series with its points and acknowledged changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Which series.
    pub id: SeriesId,
    /// Its points, in time order (or revision order, when asked).
    pub points: Vec<Point>,
    /// The acknowledged changes: the index of the point each restarts at, and the acknowledgement.
    pub acks: Vec<(usize, Ack)>,
    /// In revision order: the runs left out, their revision unknown to the history (always empty in time order).
    pub left_out: Vec<LeftOut>,
}

/// A run left out of a revision-ordered series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// The run identifier.
    pub run_id: String,
    /// The revision it recorded (`None`: none).
    pub revision: Option<String>,
    /// When it started.
    pub started_at: String,
    /// The file it was recorded from.
    pub source: String,
}

impl Series {
    /// Index of the point the statistics start at: the latest acknowledged change, or 0.
    pub fn restart(&self) -> usize {
        self.acks.iter().map(|(i, _)| *i).max().unwrap_or(0)
    }
}

/// The runs of one configuration on one machine grouped into points: indices into `runs` (time order).
pub fn group_runs(runs: &[RunRecord]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let continues = groups.last().and_then(|g| g.last()).is_some_and(|&last| {
            let prev = &runs[last];
            run.repeat > prev.repeat && run.revision == prev.revision && run.software == prev.software
        });
        match groups.last_mut() {
            Some(group) if continues => group.push(i),
            _ => groups.push(vec![i]),
        }
    }
    groups
}

/// The runs of one configuration on one machine (in time order) grouped into points in `order`: the groups, and
/// the indices of the runs left out (in revision order, those whose revision the history does not know).
pub fn group_runs_in(runs: &[RunRecord], order: &PointOrder) -> (Vec<Vec<usize>>, Vec<usize>) {
    let PointOrder::Revision(history) = order else {
        return (group_runs(runs), Vec::new());
    };
    let mut by_position: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut left_out = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        match run.revision.as_deref().and_then(|r| history.position(r)) {
            Some(position) => by_position.entry(position).or_default().push(i),
            None => left_out.push(i),
        }
    }
    (by_position.into_values().collect(), left_out)
}

/// The points of one metric from runs grouped by [`group_runs`] or [`group_runs_in`] (groups without the metric are left out).
pub fn points_of(runs: &[RunRecord], groups: &[Vec<usize>], metric: Metric) -> Vec<Point> {
    let mut points = Vec::new();
    for group in groups {
        let members: Vec<&RunRecord> =
            group.iter().map(|&i| &runs[i]).filter(|r| r.metrics.contains_key(&metric)).collect();
        let values: Vec<f64> = members.iter().filter_map(|r| r.metrics.get(&metric).copied()).collect();
        let (Some(first), Some(value)) = (members.first(), median(&values)) else { continue };
        points.push(Point {
            index: points.len(),
            value,
            started_at: first.started_at.clone(),
            revision: first.revision.clone(),
            software: first.software.clone(),
            run_ids: members.iter().map(|r| r.run_id.clone()).collect(),
            run_keys: members.iter().map(|r| r.run_key.clone()).collect(),
            sources: members.iter().map(|r| r.source.clone()).collect(),
        });
    }
    points
}

/// Every series of the store with its points and acknowledgements, in the store's series order. `filter`
/// keeps the series (by name) to load.
pub fn load_series(store: &mut dyn Store, filter: &dyn Fn(&str) -> bool) -> Result<Vec<Series>, StoreError> {
    load_series_in(store, filter, &PointOrder::Time)
}

/// Every series of the store as [`load_series`] loads them, with points in `order`.
pub fn load_series_in(
    store: &mut dyn Store,
    filter: &dyn Fn(&str) -> bool,
    point_order: &PointOrder,
) -> Result<Vec<Series>, StoreError> {
    let heads = store.series()?;
    let acks = store.acks()?;
    let mut by_machine: BTreeMap<(String, String), Vec<SeriesHead>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for head in heads {
        let key = (head.config_key.clone(), head.machine_key.clone());
        if !by_machine.contains_key(&key) {
            order.push(key.clone());
        }
        by_machine.entry(key).or_default().push(head);
    }
    let mut out = Vec::new();
    for key in order {
        let heads = by_machine.remove(&key).unwrap_or_default();
        let wanted: Vec<(SeriesId, SeriesHead)> = heads
            .into_iter()
            .filter_map(|h| {
                let metric = Metric::parse(&h.metric)?;
                let id = SeriesId {
                    config_key: h.config_key.clone(),
                    config_label: h.config_label.clone(),
                    machine_key: h.machine_key.clone(),
                    machine_label: h.machine_label.clone(),
                    metric,
                };
                filter(&id.name()).then_some((id, h))
            })
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let runs = store.runs_of(&key.0, &key.1)?;
        let (groups, left_out) = group_runs_in(&runs, point_order);
        for (id, _) in wanted {
            let points = points_of(&runs, &groups, id.metric);
            let name = id.name();
            let series_acks = acks
                .iter()
                .filter(|a| a.series == name)
                .filter_map(|a| points.iter().position(|p| p.run_keys.contains(&a.at_run_key)).map(|i| (i, a.clone())))
                .collect();
            let left_out = left_out
                .iter()
                .map(|&i| &runs[i])
                .filter(|r| r.metrics.contains_key(&id.metric))
                .map(|r| LeftOut {
                    run_id: r.run_id.clone(),
                    revision: r.revision.clone(),
                    started_at: r.started_at.clone(),
                    source: r.source.clone(),
                })
                .collect();
            out.push(Series { id, points, acks: series_acks, left_out });
        }
    }
    Ok(out)
}

/// A field of the environment that differs between two points: `libtorch 2.12.0 -> 2.13.0`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvChange {
    /// The field (`libtorch`, `nvidia driver`, `host`, ...).
    pub field: String,
    /// Its value before (`None`: absent).
    pub before: Option<String>,
    /// Its value after.
    pub after: Option<String>,
}

impl std::fmt::Display for EnvChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        write!(f, "{} {} -> {}", self.field, show(&self.before), show(&self.after))
    }
}

/// The environment fields (software, host, revision) that differ between the last point before a change and
/// the first after it.
pub fn environment_diff(before: &Point, after: &Point) -> Vec<EnvChange> {
    let mut fields: Vec<&String> = before.software.keys().chain(after.software.keys()).collect();
    fields.sort();
    fields.dedup();
    let mut out: Vec<EnvChange> = fields
        .into_iter()
        .filter(|f| before.software.get(*f) != after.software.get(*f))
        .map(|f| EnvChange {
            field: f.clone(),
            before: before.software.get(f).cloned(),
            after: after.software.get(f).cloned(),
        })
        .collect();
    if before.revision != after.revision {
        out.push(EnvChange {
            field: "revision".into(),
            before: before.revision.clone(),
            after: after.revision.clone(),
        });
    }
    out
}
