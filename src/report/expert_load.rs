//! The expert-load table of a report: for each configuration of a mixture-of-experts model (its first repeat
//! that recorded routing), one row per MoE layer and one for every layer together: the load's coefficient of
//! variation, the busiest expert's share, tokens dropped and the load-balancing loss. Also the one-line
//! summary `run` prints under its table for such runs. The heat map beside it is `plots/expert_load.rs`.

use super::model::{ConfigRow, ReportModel};
use crate::format;
use crate::result::{ExpertLoad, LayerLoad, RunResult};

/// Column headings of the expert-load table after the configuration.
pub const HEADINGS: [&str; 8] = [
    "layer",
    "experts",
    "CV mean",
    "CV max",
    "busiest share mean",
    "busiest share max",
    "dropped/step",
    "balance loss",
];

/// What the expert-load table's columns hold.
pub const NOTE: &str = "Per measured step, each expert's load is the (token, expert) assignments it computed \
     (after dropping); CV is that load's standard deviation over its mean (0: even), the busiest share the \
     largest expert's part of the step's assignments (1/experts: even); means over the measured steps, max the \
     worst step. Dropped: assignments over capacity per step, with their share of all routed. Balance loss: \
     the load-balancing loss before its coefficient (1: balanced), with the trained value (coefficient \
     applied) in brackets. Row `all`: every layer's load summed per expert index (its balance loss the layers' sum). Data-parallel runs: the \
     first worker's tokens.";

/// One row: a layer of a configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadRow {
    /// The configuration's id.
    pub config: String,
    /// Its cells, one per [`HEADINGS`] entry.
    pub cells: Vec<String>,
}

/// The expert load of a configuration: its first repeat's that has one.
pub fn of_config<'a>(c: &ConfigRow<'a>) -> Option<&'a ExpertLoad> {
    c.metrics().find_map(|m| m.expert_load.as_ref())
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// The cells of one layer's row.
pub fn cells(l: &LayerLoad) -> Vec<String> {
    let dropped = match l.dropped_fraction {
        Some(share) if l.dropped_per_step > 0.0 => {
            format!("{} ({})", format::sig(l.dropped_per_step), format::percent(share))
        }
        _ => format::sig(l.dropped_per_step),
    };
    let balance = if l.aux_loss_mean > 0.0 {
        format!("{} ({})", format::sig(l.balance_mean), format::sig(l.aux_loss_mean))
    } else {
        format::sig(l.balance_mean)
    };
    vec![
        l.layer.clone(),
        l.tokens_per_expert.len().to_string(),
        opt(l.cv_mean, format::sig),
        opt(l.cv_max, format::sig),
        opt(l.busiest_share_mean, format::percent),
        opt(l.busiest_share_max, format::percent),
        dropped,
        balance,
    ]
}

/// Every configuration's rows: every layer, then `all` (a model with one MoE layer: that layer alone).
pub fn table(model: &ReportModel<'_>) -> Vec<LoadRow> {
    let mut rows = Vec::new();
    for c in &model.configs {
        let Some(load) = of_config(c) else { continue };
        for l in &load.layers {
            rows.push(LoadRow { config: c.config.clone(), cells: cells(l) });
        }
        if load.layers.len() > 1 {
            rows.push(LoadRow { config: c.config.clone(), cells: cells(&load.all_layers) });
        }
    }
    rows
}

/// One line for a run that recorded routing (`None` otherwise): the load over every layer in a few figures.
pub fn summary_line(r: &RunResult) -> Option<String> {
    let load = r.metrics.as_ref()?.expert_load.as_ref()?;
    let a = &load.all_layers;
    let worst = load
        .layers
        .iter()
        .filter_map(|l| l.cv_mean.map(|cv| (cv, l.layer.as_str())))
        .max_by(|x, y| x.0.total_cmp(&y.0));
    let worst = worst.map(|(cv, layer)| format!("; most uneven layer {layer} (CV {})", format::sig(cv)));
    Some(format!(
        "{}: expert load over {} MoE layer(s), {} steps: CV {}, busiest expert {} of the assignments, {} dropped \
         per step, balance loss {} (summed over layers){}",
        r.run_id,
        load.layers.len(),
        load.steps,
        opt(a.cv_mean, format::sig),
        opt(a.busiest_share_mean, format::percent),
        format::sig(a.dropped_per_step),
        format::sig(a.balance_mean),
        worst.unwrap_or_default()
    ))
}
