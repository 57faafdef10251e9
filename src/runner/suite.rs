//! What the runner executes: a [`Suite`] (one spec's runs), and an interim loader that turns a spec file plus
//! `--set` overrides into one. The loader is a stand-in until the spec stage's `ValidatedSpec` and `plan`
//! land; swap [`Suite::load`] for a conversion from them (the runner only sees [`Suite`]).

use std::path::Path;
use std::time::Duration;

use trainbench_workload::{Budget, ModelSpec, RunPlan};

use crate::manifest::canonical_spec;
use crate::spec::wire::{BackendChoice, MetricGroup, SpecFile};

/// One spec's runs and the settings shared by all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// Spec name (results go to `<out>/<spec_name>/`).
    pub spec_name: String,
    /// Canonical spec text (hashed into every result).
    pub spec_canonical: String,
    /// The model every run trains.
    pub model: ModelSpec,
    /// Backend the spec asks for.
    pub backend: BackendChoice,
    /// Runs, in execution order (batch sizes ascending within a precision and topology).
    pub plans: Vec<RunPlan>,
    /// Sampling period of the background collectors.
    pub sample_interval: Duration,
    /// Metric groups to collect; empty means all.
    pub metric_groups: Vec<MetricGroup>,
}

impl Suite {
    /// Whether a metric group is collected.
    pub fn collects(&self, group: MetricGroup) -> bool {
        self.metric_groups.is_empty() || self.metric_groups.contains(&group)
    }

    /// Build a suite from a parsed spec: the sweep product topology x precision x batch size x repeat.
    pub fn from_spec(spec: &SpecFile) -> Self {
        let t = &spec.topology;
        let topologies: Vec<(usize, usize)> = if spec.sweep.topologies.is_empty() {
            vec![(t.nodes, t.devices_per_node)]
        } else {
            spec.sweep
                .topologies
                .iter()
                .map(|o| (o.nodes.unwrap_or(t.nodes), o.devices_per_node.unwrap_or(t.devices_per_node)))
                .collect()
        };
        let precisions = if spec.sweep.precisions.is_empty() {
            vec![spec.training.precision]
        } else {
            spec.sweep.precisions.clone()
        };
        let mut batches = spec.sweep.batch_sizes.clone();
        batches.sort_unstable();
        batches.dedup();
        let budget = match spec.run.time_budget_s {
            Some(s) => Budget::Seconds(s),
            None => Budget::Iterations(spec.run.iterations),
        };
        let mut plans = Vec::new();
        for &(nodes, per_node) in &topologies {
            for &precision in &precisions {
                for &batch_size in &batches {
                    for repeat in 0..spec.run.repeats.max(1) {
                        plans.push(RunPlan {
                            id: format!(
                                "{}.b{batch_size}.{}.{nodes}x{per_node}.r{repeat}",
                                spec.name,
                                precision.as_str()
                            ),
                            batch_size,
                            precision,
                            device: t.device.clone(),
                            world_size: nodes * per_node,
                            warmup: spec.run.warmup,
                            budget,
                            repeat,
                            seed: spec.training.seed.wrapping_add(u64::from(repeat)),
                            optimizer: spec.training.optimizer.clone(),
                            phase_timing: spec.run.phase_timing,
                            timeout_s: spec.run.timeout_s,
                        });
                    }
                }
            }
        }
        Suite {
            spec_name: spec.name.clone(),
            spec_canonical: canonical_spec(spec),
            model: spec.model.clone(),
            backend: t.backend,
            plans,
            sample_interval: Duration::from_millis(spec.run.sample_interval_ms.max(1)),
            metric_groups: spec.metrics.collect.clone(),
        }
    }

    /// Interim loader: read a TOML spec, apply `key.path=value` overrides, parse and plan it. Errors are
    /// plain messages (the spec stage gives located diagnostics once it lands).
    pub fn load(path: &Path, sets: &[String]) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut doc: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for set in sets {
            apply_set(&mut doc, set)?;
        }
        let spec: SpecFile =
            doc.try_into().map_err(|e: toml::de::Error| format!("{}: {}", path.display(), e.message()))?;
        if spec.version != 1 {
            return Err(format!(
                "{}: unsupported spec version {} (this build reads version 1)",
                path.display(),
                spec.version
            ));
        }
        Ok(Self::from_spec(&spec))
    }
}

/// Apply one `--set a.b.c=value` override; the value is read as a TOML value (`8`, `[8, 16]`, `"fp16"`,
/// `true`), or as a bare string when it is not one.
pub fn apply_set(doc: &mut toml::Table, set: &str) -> Result<(), String> {
    let (key, raw) = set.split_once('=').ok_or_else(|| format!("--set `{set}`: expected KEY=VALUE"))?;
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("--set `{set}`: empty key segment"));
    }
    let (last, parents) = parts.split_last().ok_or_else(|| format!("--set `{set}`: empty key"))?;
    let mut table = doc;
    for p in parents {
        let entry = table.entry((*p).to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry.as_table_mut().ok_or_else(|| format!("--set `{set}`: `{p}` is not a table"))?;
    }
    table.insert((*last).to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SPEC: &str = r#"
version = 1
name = "tiny"
[model]
family = "mlp"
inputs = 16
hidden = [32]
classes = 4
[sweep]
batch_sizes = [16, 4]
precisions = ["fp32", "bf16"]
[run]
warmup = 2
iterations = 5
repeats = 2
"#;

    #[test]
    fn sweep_expands_in_order() {
        let spec: SpecFile = toml::from_str(SPEC).unwrap();
        let s = Suite::from_spec(&spec);
        let ids: Vec<&str> = s.plans.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), 8);
        assert_eq!(&ids[..3], ["tiny.b4.fp32.1x1.r0", "tiny.b4.fp32.1x1.r1", "tiny.b16.fp32.1x1.r0"]);
        assert_eq!(s.plans[1].seed, 43);
        assert_eq!(s.plans[7].id, "tiny.b16.bf16.1x1.r1");
    }

    #[test]
    fn set_overrides_nested_keys() {
        let mut doc: toml::Table = toml::from_str(SPEC).unwrap();
        apply_set(&mut doc, "run.iterations=9").unwrap();
        apply_set(&mut doc, "sweep.batch_sizes=[2]").unwrap();
        apply_set(&mut doc, "topology.device=cuda:1").unwrap();
        let spec: SpecFile = doc.try_into().unwrap();
        assert_eq!(spec.run.iterations, 9);
        assert_eq!(spec.sweep.batch_sizes, vec![2]);
        assert_eq!(spec.topology.device, "cuda:1");
        let mut doc: toml::Table = toml::from_str(SPEC).unwrap();
        assert!(apply_set(&mut doc, "run").is_err());
        assert!(apply_set(&mut doc, "run.warmup.x=1").is_err());
    }
}
