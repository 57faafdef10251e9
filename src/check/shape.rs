//! The *shape* of a result: which fields and metrics exist, their kinds, units and series lengths, with
//! run-to-run varying values replaced by type tags. Two runs of the same configuration have the same shape.
//!
//! A shape is a sorted map from a field path to a descriptor:
//! - `metrics.throughput.samples_per_s: "number"`: a measured value, replaced by its JSON type
//!   (`number`, `integer`, `string`, `bool`, `null`); a `null` where a value used to be is a shape change,
//!   which is how a metric that stopped being measured shows up;
//! - `outcome.status: "= \"completed\""`: a deterministic value kept literally (`= ` + its JSON text): units,
//!   kinds, availability tags, the run plan, the static analysis;
//! - `metrics.step_times_s: "array[50] of number"`: a numeric series with its length (the measured iterations;
//!   `array of number` when the run had a time budget, whose iteration count varies);
//! - `environment.gpus.devices[].name: "string"`: fields of the elements of an array of objects (the
//!   array itself is `array`, its length is not part of the shape);
//! - `environment.env_vars: "map (keys and values vary)"`: a map whose content depends on the user's shell;
//! - `environment.cpu.isa: "varies with the host CPU"`: a host's instruction-set facts, whose presence (an empty
//!   flag list, no level on an ARM host, no `ONEDNN_MAX_CPU_ISA` cap) says which machine ran the check, not
//!   what the run produced;
//! - `x: "object (empty)"` for an empty object, so that an emptied map is visible;
//! - `distributed.ranks: "array[2]"`: arrays whose length is fixed by the configuration (a data-parallel run's
//!   workers and hosts) keep it, so a rank that stopped reporting is a shape change. The `distributed` section's
//!   topology (world size, strategy, servers, engine) and traffic (gradient bytes and bytes sent per step,
//!   fixed by the model, precision and strategy) are literal; its times and bandwidths are measured;
//! - `prediction: "varies with the machine's hardware profile"`: the performance model's prediction, or why
//!   there is none, depends on the profile the checking machine has, so only the section's presence is pinned.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::result::RunResult;
use trainbench_contract::Budget;

/// Version of the shape format written into golden files.
pub const SHAPE_FORMAT: u32 = 1;

/// The shape of one result, as stored in a golden file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Shape format version ([`SHAPE_FORMAT`]).
    pub shape_format: u32,
    /// Spec name of the result.
    pub spec: String,
    /// The configuration the shape belongs to: its name as a run of its plan is named now (the run id without
    /// the repeat suffix, for results written since the strategy is in every data-parallel id).
    pub config: String,
    /// Field path -> descriptor (see the module documentation).
    pub fields: BTreeMap<String, String>,
}

impl Shape {
    /// The golden file text: pretty JSON with sorted keys and a final newline, one field per line.
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Paths whose values are deterministic for a configuration and are kept literally. A `*` segment matches any
/// one key; a pattern ending in `.**` matches everything below it.
const LITERAL: &[&str] = &[
    "format_version",
    "spec_name",
    "backend",
    "outcome.status",
    "metrics.*.status",
    "environment.*.status",
    "plan.**",
    "metrics.throughput.item_unit",
    "metrics.throughput.items_per_sample",
    "metrics.steady_state.method",
    "metrics.steady_state.warmup_iterations",
    "metrics.phases.synchronised",
    "metrics.flops.flops_per_sample",
    "metrics.flops.peak_precision",
    "metrics.flops.mfu.status",
    "metrics.flops.mfu.model_flops_per_sample",
    "metrics.flops.mfu.convention",
    "metrics.flops.mfu.peak.devices",
    "metrics.flops.mfu.peak.precision",
    "metrics.power.method",
    "metrics.memory.estimate.**",
    "analysis.**",
    "distributed.world_size",
    "distributed.strategy",
    "distributed.parameter_servers",
    "distributed.engine",
    "distributed.gradient_bytes",
    "distributed.bytes_sent_per_step",
];

/// Arrays of objects or strings whose length the configuration fixes: their descriptor keeps it.
const COUNTED_ARRAYS: &[&str] = &["distributed.hosts", "distributed.ranks"];

/// Paths under a literal pattern that still vary between repeats.
const VARYING: &[&str] = &["plan.id", "plan.repeat", "plan.seed"];

/// Maps whose keys depend on the machine or the user's shell: reduced to one descriptor.
const OPAQUE_MAPS: &[&str] = &["environment.env_vars"];

/// Host facts reduced to one descriptor whatever their value, so that a shape is the same on every CPU.
const HOST_CPU_FACTS: &[&str] = &["environment.cpu.features", "environment.cpu.isa", "environment.cpu.onednn_isa_cap"];

/// Sections whose content depends on which hardware profile the checking machine has (a calibrated profile of
/// its own, or none): reduced to one descriptor, so the section's presence is part of the shape, its content not.
const HARDWARE_PROFILE_FACTS: &[&str] = &["prediction"];

/// The series whose length is the number of measured iterations (variable under a time budget).
const ITERATION_SERIES: &[&str] = &["metrics.step_times_s"];

fn matches(pattern: &str, path: &str) -> bool {
    let mut p = pattern.split('.');
    let mut s = path.split('.');
    loop {
        match (p.next(), s.next()) {
            (Some("**"), Some(_)) => return true,
            (Some(a), Some(b)) if a == "*" || a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

fn any_match(patterns: &[&str], path: &str) -> bool {
    patterns.iter().any(|p| matches(p, path))
}

fn type_tag(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Extract the shape of a result.
pub fn shape_of(result: &RunResult) -> Shape {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let time_budget = matches!(result.plan.budget, Budget::Seconds(_));
    let mut fields = BTreeMap::new();
    walk(&value, "", time_budget, &mut fields);
    // Named as a run of its plan is named now, so results of one old run id with different plans get a golden
    // file each.
    let config = crate::result::identity::ConfigurationIdentity::of(result).name();
    Shape { shape_format: SHAPE_FORMAT, spec: result.spec_name.clone(), config, fields }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") }
}

fn walk(v: &Value, path: &str, time_budget: bool, out: &mut BTreeMap<String, String>) {
    // Element paths (`a[]`) are matched against the patterns without the brackets.
    let bare = path.replace("[]", "");
    if any_match(HOST_CPU_FACTS, &bare) {
        out.insert(path.to_string(), "varies with the host CPU".to_string());
        return;
    }
    if any_match(HARDWARE_PROFILE_FACTS, &bare) {
        out.insert(path.to_string(), "varies with the machine's hardware profile".to_string());
        return;
    }
    if !path.is_empty() && any_match(LITERAL, &bare) && !any_match(VARYING, &bare) && !v.is_object() {
        out.insert(path.to_string(), format!("= {v}"));
        return;
    }
    match v {
        Value::Object(_) if any_match(OPAQUE_MAPS, &bare) => {
            out.insert(path.to_string(), "map (keys and values vary)".to_string());
        }
        Value::Object(map) if map.is_empty() => {
            out.insert(path.to_string(), "object (empty)".to_string());
        }
        Value::Object(map) => {
            for (k, child) in map {
                walk(child, &join(path, k), time_budget, out);
            }
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_number) => {
            let kind = if items.iter().all(|n| !n.is_f64()) { "integer" } else { "number" };
            let desc = if time_budget && any_match(ITERATION_SERIES, &bare) {
                format!("array of {kind}")
            } else {
                format!("array[{}] of {kind}", items.len())
            };
            out.insert(path.to_string(), desc);
        }
        Value::Array(items) if items.is_empty() => {
            out.insert(path.to_string(), "array (empty)".to_string());
        }
        Value::Array(items) => {
            let desc =
                if any_match(COUNTED_ARRAYS, &bare) { format!("array[{}]", items.len()) } else { "array".to_string() };
            out.insert(path.to_string(), desc);
            let elem = format!("{path}[]");
            let mut merged = BTreeMap::new();
            for item in items {
                let mut one = BTreeMap::new();
                walk(item, &elem, time_budget, &mut one);
                for (k, d) in one {
                    merged
                        .entry(k)
                        .and_modify(|e: &mut String| {
                            if !e.split(" | ").any(|x| x == d) {
                                e.push_str(" | ");
                                e.push_str(&d);
                            }
                        })
                        .or_insert(d);
                }
            }
            out.extend(merged);
        }
        leaf => {
            out.insert(path.to_string(), type_tag(leaf).to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_segments() {
        assert!(matches("plan.**", "plan.budget.iterations"));
        assert!(matches("plan.**", "plan.id"));
        assert!(!matches("plan.**", "plan"));
        assert!(matches("metrics.*.status", "metrics.gpu.status"));
        assert!(!matches("metrics.*.status", "metrics.gpu.x.status"));
        assert!(matches("outcome.status", "outcome.status"));
        assert!(!matches("outcome.status", "outcome.status.x"));
    }

    #[test]
    fn walk_tags_values_and_keeps_literals() {
        let v = serde_json::json!({
            "backend": "mock",
            "outcome": {"status": "completed"},
            "metrics": {"step_times_s": [0.1, 0.2, 0.3], "throughput": {"samples_per_s": 12.5, "item_unit": "samples"},
                        "memory": {"measured": {"peak_allocated_bytes": null, "weights_bytes": 10}}},
            "environment": {"env_vars": {"OMP_NUM_THREADS": "2"}, "library_versions": {},
                            "cpu": {"model": "x", "features": ["avx2"], "isa": null},
                            "gpus": {"status": "available", "devices": [{"index": 0, "name": "a"}, {"index": 1, "name": null}]}},
        });
        let mut out = BTreeMap::new();
        walk(&v, "", false, &mut out);
        let get = |k: &str| out.get(k).map(String::as_str);
        assert_eq!(get("backend"), Some("= \"mock\""));
        assert_eq!(get("outcome.status"), Some("= \"completed\""));
        assert_eq!(get("metrics.step_times_s"), Some("array[3] of number"));
        assert_eq!(get("metrics.throughput.samples_per_s"), Some("number"));
        assert_eq!(get("metrics.throughput.item_unit"), Some("= \"samples\""));
        assert_eq!(get("metrics.memory.measured.peak_allocated_bytes"), Some("null"));
        assert_eq!(get("metrics.memory.measured.weights_bytes"), Some("integer"));
        assert_eq!(get("environment.env_vars"), Some("map (keys and values vary)"));
        assert_eq!(get("environment.library_versions"), Some("object (empty)"));
        assert_eq!(get("environment.cpu.model"), Some("string"));
        assert_eq!(get("environment.cpu.features"), Some("varies with the host CPU"));
        assert_eq!(get("environment.cpu.isa"), Some("varies with the host CPU"));
        assert!(!out.keys().any(|k| k.starts_with("environment.cpu.features[]")));
        assert_eq!(get("environment.gpus.status"), Some("= \"available\""));
        assert_eq!(get("environment.gpus.devices"), Some("array"));
        assert_eq!(get("environment.gpus.devices[].index"), Some("integer"));
        assert_eq!(get("environment.gpus.devices[].name"), Some("string | null"));

        let d = serde_json::json!({"distributed": {"world_size": 2, "strategy": "all-reduce", "engine": "mpi",
            "engine_version": "Open MPI v4.1.4", "hosts": ["a", "a"], "gradient_bytes": 400, "comm_share": null,
            "ranks": [{"rank": 0, "mean": {"comm_s": 0.1}}, {"rank": 1, "mean": {"comm_s": 0.2}}]}});
        let mut dist = BTreeMap::new();
        walk(&d, "", false, &mut dist);
        let get = |k: &str| dist.get(k).map(String::as_str);
        assert_eq!(get("distributed.world_size"), Some("= 2"));
        assert_eq!(get("distributed.strategy"), Some("= \"all-reduce\""));
        assert_eq!(get("distributed.engine"), Some("= \"mpi\""));
        assert_eq!(get("distributed.engine_version"), Some("string"));
        assert_eq!(get("distributed.gradient_bytes"), Some("= 400"));
        assert_eq!(get("distributed.comm_share"), Some("null"));
        assert_eq!(get("distributed.hosts"), Some("array[2]"));
        assert_eq!(get("distributed.hosts[]"), Some("string"));
        assert_eq!(get("distributed.ranks"), Some("array[2]"));
        assert_eq!(get("distributed.ranks[].mean.comm_s"), Some("number"));

        let mut timed = BTreeMap::new();
        walk(&v, "", true, &mut timed);
        assert_eq!(timed.get("metrics.step_times_s").map(String::as_str), Some("array of number"));
    }
}
