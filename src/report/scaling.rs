//! Scaling of data-parallel runs: each configuration with world size W > 1 against the world-size-1
//! configuration of the same sweep (same spec, batch size, precision, backend and device), its scaling efficiency
//! `throughput_W / (W x throughput_1)` (medians over repeats), and the scaling table of a report (world size,
//! strategy, engine, samples/s, efficiency, comm share, bytes per step, algorithm and bus bandwidth).

use std::collections::BTreeMap;

use super::model::{ConfigRow, ReportModel};
use crate::format::{self, human_bytes};
use crate::result::LoadedResult;

/// Scaling efficiency of `world` workers delivering `throughput` samples/s against one worker's
/// `single` samples/s on the same global batch: `throughput / (world x single)`; 1 is linear scaling.
/// `None` when a figure, or the quotient, is not a positive finite number.
pub fn efficiency(throughput: f64, world: usize, single: f64) -> Option<f64> {
    let ok = |v: f64| v.is_finite() && v > 0.0;
    Some(throughput / (world as f64 * single)).filter(|e| ok(throughput) && ok(single) && world >= 1 && e.is_finite())
}

/// A configuration's scaling efficiency, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub enum Efficiency {
    /// Measured against the world-size-1 configuration `reference`.
    Measured {
        /// `throughput_W / (W x throughput_1)`.
        value: f64,
        /// The world-size-1 configuration it was computed against.
        reference: String,
    },
    /// Not computed, and why.
    Absent(String),
}

impl Efficiency {
    /// The value, when measured.
    pub fn value(&self) -> Option<f64> {
        match self {
            Efficiency::Measured { value, .. } => Some(*value),
            Efficiency::Absent(_) => None,
        }
    }
}

/// Why a configuration has no world-size-1 reference to scale against.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoReference {
    /// No world-size-1 run of the same spec, batch, precision and placement (described).
    #[error("no world-size-1 run of {0} in these results")]
    Missing(String),
    /// Several world-size-1 configurations could serve (their ids, comma-separated).
    #[error("several world-size-1 configurations could serve: {0}")]
    Ambiguous(String),
    /// The reference ran from another spec text, so belongs to another sweep.
    #[error("{config} ran from another spec text (SHA-256 {theirs} vs {mine}), not in the same sweep")]
    OtherSweep {
        /// The reference's configuration id.
        config: String,
        /// Its spec hashes, shortened.
        theirs: String,
        /// This configuration's spec hashes, shortened.
        mine: String,
    },
}

/// The world-size-1 configuration of the same sweep as `c`: same spec (and spec text), batch size, precision,
/// backend and device, and a plan that differs from `c`'s only in its topology; the reason when there is none or
/// it cannot serve.
pub fn reference_of<'m, 'a>(model: &'m ReportModel<'a>, c: &ConfigRow<'a>) -> Result<&'m ConfigRow<'a>, NoReference> {
    let siblings: Vec<&ConfigRow<'a>> = model
        .configs
        .iter()
        .filter(|o| {
            o.spec == c.spec
                && o.world_size == 1
                && o.batch == c.batch
                && o.precision == c.precision
                && o.backend == c.backend
                && o.device == c.device
                && o.identity.differences(&c.identity).iter().all(|d| TOPOLOGY_FIELDS.contains(&d.field))
        })
        .collect();
    // Two world-size-1 topologies (say `single` and a one-worker all-reduce): prefer the one that exchanges nothing.
    let single: Vec<&ConfigRow<'a>> =
        siblings.iter().copied().filter(|o| o.runs.iter().all(|r| r.plan.topology.strategy.is_single())).collect();
    let candidates = if single.is_empty() { siblings } else { single };
    let reference = match candidates.as_slice() {
        [] => {
            return Err(NoReference::Missing(format!(
                "{} at batch {} {} on {}",
                c.spec,
                c.batch,
                c.precision.as_str(),
                c.placement()
            )));
        }
        [one] => *one,
        several => {
            let ids: Vec<&str> = several.iter().map(|o| o.config.as_str()).collect();
            return Err(NoReference::Ambiguous(ids.join(", ")));
        }
    };
    let (mine, theirs) = (c.spec_hashes(), reference.spec_hashes());
    if !mine.iter().any(|h| theirs.contains(h)) {
        let short = |v: &[&str]| v.iter().map(|h| h.get(..12).unwrap_or(h)).collect::<Vec<_>>().join(", ");
        return Err(NoReference::OtherSweep {
            config: reference.config.to_string(),
            theirs: short(&theirs),
            mine: short(&mine),
        });
    }
    Ok(reference)
}

/// The scaling efficiency of a configuration; `None` for world size 1 (the reference itself).
pub fn efficiency_of(model: &ReportModel<'_>, c: &ConfigRow<'_>) -> Option<Efficiency> {
    if c.world_size <= 1 {
        return None;
    }
    let reference = match reference_of(model, c) {
        Ok(r) => r,
        Err(why) => return Some(Efficiency::Absent(why.to_string())),
    };
    let Some(single) = reference.samples_per_s() else {
        return Some(Efficiency::Absent(format!(
            "its world-size-1 configuration {} measured no throughput ({})",
            reference.config,
            reference.outcome_summary()
        )));
    };
    let Some(throughput) = c.samples_per_s() else {
        return Some(Efficiency::Absent(format!("no throughput measured ({})", c.outcome_summary())));
    };
    Some(match efficiency(throughput, c.world_size, single) {
        Some(value) => Efficiency::Measured { value, reference: reference.config.clone() },
        None => Efficiency::Absent(format!("throughput {throughput} or {single} samples/s is not a positive number")),
    })
}

/// The fields of a configuration's identity that a world-size-1 reference may differ in.
const TOPOLOGY_FIELDS: [&str; 5] = ["topology", "strategy", "interconnect", "bucket size", "overlap"];

/// Identifies a configuration across result sets: spec, configuration identity key
/// ([`crate::result::identity::ConfigurationIdentity::key`]), backend, device name.
pub type ConfigKey = (String, String, String, String);

/// The scaling efficiency of every configuration with more than one worker in a result set, each against the
/// world-size-1 configuration of the same set (for `compare`, which computes it on each side).
pub fn efficiencies(results: &[LoadedResult]) -> BTreeMap<ConfigKey, Efficiency> {
    let model = ReportModel::new(results);
    model
        .configs
        .iter()
        .filter_map(|c| {
            let key = (c.spec.clone(), c.identity.key(), c.backend.clone(), c.device.clone());
            efficiency_of(&model, c).map(|e| (key, e))
        })
        .collect()
}

/// One row of the scaling table.
#[derive(Debug, Clone)]
pub struct ScalingRow {
    /// Spec name.
    pub spec: String,
    /// Configuration identifier.
    pub config: String,
    /// Data-parallel world size (workers).
    pub world_size: usize,
    /// `single`, `all-reduce`, `parameter-server ×N`.
    pub strategy: String,
    /// Cells after the configuration: world size, strategy, engine, samples/s, efficiency, comm share, bytes sent per
    /// step, algorithm bandwidth, bus bandwidth, and what a worker held (weights / gradients / optimizer state)
    /// (`-` when absent).
    pub cells: [String; 10],
    /// Why the efficiency is absent, for the note under the table.
    pub absent_because: Option<String>,
}

/// Column headings of the scaling table, after the configuration.
pub const HEADINGS: [&str; 10] = [
    "world size",
    "strategy",
    "engine",
    "samples/s",
    "efficiency",
    "comm",
    "bytes sent/step",
    "algorithm GB/s",
    "bus GB/s",
    "held/worker (w / g / opt)",
];

/// The scaling table of a report: for each spec with a data-parallel configuration, its configurations by
/// backend and device, precision, batch size, world size and strategy. Empty when no run had more than one worker.
pub fn table(model: &ReportModel<'_>) -> Vec<ScalingRow> {
    let mut rows = Vec::new();
    for spec in model.specs() {
        if !model.configs_of(&spec).any(|c| c.world_size > 1) {
            continue;
        }
        let mut configs: Vec<&ConfigRow<'_>> = model.configs_of(&spec).collect();
        configs.sort_by_key(|c| (c.placement(), c.precision, c.batch, c.world_size, c.strategy(), c.config.clone()));
        for c in configs {
            let eff = efficiency_of(model, c);
            let dash = || "-".to_string();
            let efficiency = match &eff {
                None => "reference".to_string(),
                Some(Efficiency::Measured { value, .. }) => format::percent(*value),
                Some(Efficiency::Absent(_)) => dash(),
            };
            rows.push(ScalingRow {
                spec: c.spec.clone(),
                config: c.config.clone(),
                world_size: c.world_size,
                strategy: c.strategy(),
                cells: [
                    c.world_size.to_string(),
                    c.strategy(),
                    c.engine().unwrap_or_else(dash),
                    c.samples_per_s().map(format::sig).unwrap_or_else(dash),
                    efficiency,
                    c.comm_share().map(format::percent).unwrap_or_else(dash),
                    c.bytes_sent_per_step().map(human_bytes).unwrap_or_else(dash),
                    c.algorithm_bandwidth_gb_s().map(format::sig).unwrap_or_else(dash),
                    c.bus_bandwidth_gb_s().map(format::sig).unwrap_or_else(dash),
                    c.held_per_rank()
                        .map(|(w, g, o)| format!("{} / {} / {}", human_bytes(w), human_bytes(g), human_bytes(o)))
                        .unwrap_or_else(dash),
                ],
                absent_because: match eff {
                    Some(Efficiency::Absent(why)) => Some(why),
                    _ => None,
                },
            });
        }
    }
    rows
}

/// What the scaling table's columns hold, one paragraph.
pub const NOTE: &str = "Efficiency: samples/s at world size W over W x the samples/s of the world-size-1 \
configuration of the same sweep (same spec, global batch size, precision, backend and device; medians over \
repeats); 100% is linear scaling. Comm: median share of a step spent exchanging gradients. Bytes sent/step: what \
each worker sent per step (ring all-reduce 2(W-1)/W x the gradient bytes; parameter servers the gradient bytes, \
and as much received; ZeRO-1/2 a reduce-scatter and an all-gather, as much as all-reduce; ZeRO-3 one more \
all-gather of its blocks). Algorithm GB/s: gradient bytes over the median exchange time; bus GB/s (all-reduce): the \
algorithm bandwidth x 2(W-1)/W, what each link carried. Held/worker: the bytes of weights, gradients (the most \
held at once) and optimizer state one worker kept, measured from its tensors; ZeRO-1/2 shard the optimizer state \
(and keep an f32 master shard of the weights), ZeRO-3 the weights too.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efficiency_is_throughput_over_world_size_times_one_worker() {
        // 500 samples/s on 2 workers against 320 on one: 500 / 640.
        assert_eq!(efficiency(500.0, 2, 320.0), Some(0.78125));
        assert_eq!(efficiency(1280.0, 4, 320.0), Some(1.0));
        assert_eq!(efficiency(320.0, 1, 320.0), Some(1.0));
        assert_eq!(efficiency(500.0, 2, 0.0), None);
        assert_eq!(efficiency(f64::NAN, 2, 320.0), None);
        assert_eq!(efficiency(500.0, 0, 320.0), None);
        assert_eq!(efficiency(f64::MAX, 2, f64::MIN_POSITIVE), None, "overflows to infinity");
    }
}
