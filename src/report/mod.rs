//! Reports of result sets: groups runs into configurations and series, then writes a self-contained HTML page,
//! a Markdown page with SVG plots next to it, and a CSV of every run (one file per format in this folder).

pub mod csv;
pub mod html;
pub mod markdown;
pub mod plots;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::result::{LoadedResult, Metrics, RunOutcome, RunResult};
use crate::workload::Precision;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("drawing plot `{plot}`: {message}")]
    Plot {
        /// Plot identifier.
        plot: String,
        /// What plotters reported.
        message: String,
    },
    /// Nothing to report.
    #[error("no results to report")]
    Empty,
}

/// One configuration of one spec (its repeats pooled), on one backend and device.
#[derive(Debug, Clone)]
pub struct ConfigRow<'a> {
    /// Spec name.
    pub spec: String,
    /// Run identifier without the repeat suffix.
    pub config: String,
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

/// Device name of a result: the environment's device name, else the plan's selector.
pub fn device_name(r: &RunResult) -> String {
    r.environment.device.as_ref().map(|d| d.name.clone()).unwrap_or_else(|| r.plan.device.to_string())
}

/// Median of a few values (NaN-free input); `None` when empty.
fn median_of(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
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
    /// Median over repeats of the steady-state samples per second.
    pub fn samples_per_s(&self) -> Option<f64> {
        median_of(self.metrics().map(|m| m.throughput.samples_per_s).collect())
    }
    /// Median over repeats of items per second, with the item unit.
    pub fn items_per_s(&self) -> Option<(f64, String)> {
        let unit = self.metrics().next()?.throughput.item_unit.clone();
        median_of(self.metrics().map(|m| m.throughput.items_per_s).collect()).map(|v| (v, unit))
    }
    /// Steady-state step times of all repeats, pooled, in seconds.
    pub fn pooled_step_times(&self) -> Vec<f64> {
        self.runs.iter().flat_map(|r| r.steady_step_times().iter().copied()).filter(|x| x.is_finite()).collect()
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
    /// Mean GPU utilisation in percent (median over repeats), when NVML measured it.
    pub fn gpu_utilization_percent(&self) -> Option<f64> {
        median_of(self.metrics().filter_map(|m| m.gpu.get()).map(|g| g.utilization_mean_percent).collect())
    }
    /// Why GPU utilisation is missing, from the first repeat that says.
    pub fn gpu_unavailable_reason(&self) -> Option<String> {
        self.metrics().find_map(|m| match &m.gpu {
            crate::result::Sampled::Unavailable { reason } => Some(reason.clone()),
            crate::result::Sampled::Available(_) => None,
        })
    }
    /// FLOP utilisation as a fraction of the device peak (median over repeats).
    pub fn flop_fraction(&self) -> Option<f64> {
        median_of(self.metrics().filter_map(|m| m.flops.fraction).collect())
    }
    /// Process CPU utilisation, fraction of all cores (median over repeats).
    pub fn cpu_utilization(&self) -> Option<f64> {
        median_of(self.metrics().filter_map(|m| m.cpu.get()).map(|c| c.utilization).collect())
    }
    /// Highest allocator peak over the repeats, bytes.
    pub fn peak_allocated_bytes(&self) -> Option<u64> {
        self.metrics().filter_map(|m| m.memory.measured.peak_allocated_bytes).max()
    }
    /// Energy per sample, joules (median over repeats).
    pub fn energy_per_sample_j(&self) -> Option<f64> {
        median_of(self.metrics().filter_map(|m| m.power.get()).map(|p| p.energy_per_sample_j).collect())
    }
    /// The first repeat's metrics (memory and phase figures are nearly deterministic across repeats).
    pub fn first_metrics(&self) -> Option<&'a Metrics> {
        self.metrics().next()
    }
    /// The series this configuration belongs to: same spec, precision, world size, backend and device.
    pub fn series_key(&self) -> (String, Precision, usize, String, String) {
        (self.spec.clone(), self.precision, self.world_size, self.backend.clone(), self.device.clone())
    }
    /// True when the first repeat ran out of memory.
    pub fn out_of_memory(&self) -> bool {
        self.runs.iter().any(|r| matches!(r.outcome, RunOutcome::OutOfMemory { .. }))
    }
}

/// Configurations of one spec on one backend, device, precision and world size, ordered by batch size.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    /// Legend label, e.g. `fp32 · tch · cpu`.
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
        let mut groups: BTreeMap<(String, String, String, String), ConfigRow<'a>> = BTreeMap::new();
        for loaded in results {
            let r = &loaded.result;
            let device = match &r.environment.device {
                Some(d) => d.name.clone(),
                None => names
                    .get(&(r.backend.as_str(), r.plan.device.to_string()))
                    .cloned()
                    .unwrap_or_else(|| device_name(r)),
            };
            let key = (r.spec_name.clone(), r.backend.clone(), device.clone(), r.config_id().to_string());
            groups
                .entry(key)
                .or_insert_with(|| ConfigRow {
                    spec: r.spec_name.clone(),
                    config: r.config_id().to_string(),
                    backend: r.backend.clone(),
                    device,
                    precision: r.plan.precision,
                    batch: r.plan.batch_size,
                    world_size: r.plan.world_size,
                    runs: Vec::new(),
                })
                .runs
                .push(r);
        }
        let mut configs: Vec<ConfigRow<'a>> = groups.into_values().collect();
        configs.sort_by(|a, b| a.series_key().cmp(&b.series_key()).then(a.batch.cmp(&b.batch)));
        let mut runs: Vec<&'a LoadedResult> = results.iter().collect();
        runs.sort_by(|a, b| {
            let key = |l: &LoadedResult| {
                let r = &l.result;
                (r.spec_name.clone(), r.plan.precision, r.plan.world_size, r.plan.batch_size, r.run_id.clone())
            };
            key(a).cmp(&key(b))
        });
        Self { runs, configs }
    }

    /// Spec names, sorted.
    pub fn specs(&self) -> Vec<String> {
        let mut v: Vec<String> = self.configs.iter().map(|c| c.spec.clone()).collect();
        v.dedup();
        v
    }

    /// The series of one spec.
    pub fn series_of(&self, spec: &str) -> Vec<Series<'a>> {
        let mut out: Vec<Series<'a>> = Vec::new();
        for c in self.configs.iter().filter(|c| c.spec == spec) {
            let key = c.series_key();
            match out.last_mut() {
                Some(s) if s.points.first().is_some_and(|p| p.series_key() == key) => s.points.push(c.clone()),
                _ => {
                    let topo = if c.world_size > 1 { format!(" · {} devices", c.world_size) } else { String::new() };
                    out.push(Series {
                        label: format!("{} · {} · {}{topo}", c.precision.as_str(), c.backend, c.device),
                        spec: c.spec.clone(),
                        points: vec![c.clone()],
                    });
                }
            }
        }
        out
    }
}

/// Files written by [`write_report`].
#[derive(Debug, Clone)]
pub struct ReportFiles {
    /// The self-contained HTML page.
    pub html: PathBuf,
    /// The Markdown page.
    pub markdown: PathBuf,
    /// The CSV of every run.
    pub csv: PathBuf,
    /// The SVG plots the Markdown page links to.
    pub svgs: Vec<PathBuf>,
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, ReportError> {
    std::fs::write(&path, text).map_err(|source| ReportError::Io { path: path.clone(), source })?;
    Ok(path)
}

/// Write `index.html`, `report.md` (+ one SVG per plot) and `runs.csv` into `out`, creating it if needed.
pub fn write_report(results: &[LoadedResult], out: &Path) -> Result<ReportFiles, ReportError> {
    if results.is_empty() {
        return Err(ReportError::Empty);
    }
    std::fs::create_dir_all(out).map_err(|source| ReportError::Io { path: out.to_path_buf(), source })?;
    let model = ReportModel::new(results);
    let plots = plots::all_plots(&model)?;
    let mut svgs = Vec::new();
    for p in &plots {
        svgs.push(write(out.join(format!("{}.svg", p.id)), &p.svg)?);
    }
    Ok(ReportFiles {
        html: write(out.join("index.html"), &html::render(&model, &plots))?,
        markdown: write(out.join("report.md"), &markdown::render(&model, &plots))?,
        csv: write(out.join("runs.csv"), &csv::render(&model))?,
        svgs,
    })
}

/// A number with three significant digits (no exponent for everyday magnitudes).
pub fn fmt_sig(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// Seconds as milliseconds with three significant digits.
pub fn fmt_ms(s: f64) -> String {
    format!("{} ms", fmt_sig(s * 1e3))
}

/// A fraction as a percentage with one decimal.
pub fn fmt_percent(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// One-line environment summary of a run: device, backend libraries, trainbench version, CPU, host.
pub fn environment_summary(r: &RunResult) -> String {
    let env = &r.environment;
    let libs: Vec<String> = env.library_versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let libs = if libs.is_empty() { String::new() } else { format!(" ({})", libs.join(", ")) };
    let driver = env.gpus.get().map(|g| format!("; driver {}", g.driver_version)).unwrap_or_default();
    format!(
        "{} via {}{libs}{driver}; trainbench {}; {} x{}; {}",
        device_name(r),
        r.backend,
        env.trainbench_version,
        env.cpu.model,
        env.cpu.logical_cores,
        env.hostname
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(fmt_sig(1234.5), "1234");
        assert_eq!(fmt_sig(12.345), "12.3");
        assert_eq!(fmt_sig(0.01234), "0.012");
        assert_eq!(fmt_ms(0.0421), "42.1 ms");
        assert_eq!(fmt_percent(0.5), "50.0%");
        assert_eq!(median_of(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_of(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median_of(vec![]), None);
    }
}
