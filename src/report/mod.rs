//! Reports of result sets: groups runs into configurations and series (`model.rs`), then writes a
//! self-contained HTML page, a Markdown page with SVG plots next to it, and a CSV of every run (one file per
//! format; the overview table both pages open with in `overview.rs`, the scaling of data-parallel runs in
//! `scaling.rs`, predicted against measured in `predicted.rs`, the plots in `plots/`).

pub mod csv;
pub mod html;
pub mod markdown;
pub mod model;
pub mod overview;
pub mod plots;
pub mod predicted;
pub mod scaling;
pub mod utilization;

use std::path::{Path, PathBuf};

pub use model::{ConfigRow, ReportModel, Series, device_name};

use crate::result::{LoadedResult, RunResult};

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

/// The sentence under a report's title: how many runs, configurations and specs, on which backends and devices.
pub fn summary_line(model: &ReportModel<'_>) -> String {
    let specs = model.specs();
    let line = format!(
        "{} runs in {} configurations of {} spec(s): {}; on {}.",
        model.runs.len(),
        model.configs.len(),
        specs.len(),
        specs.join(", "),
        model.placements().join(", ")
    );
    match machines_note(model) {
        Some(note) => format!("{line} {note}"),
        None => line,
    }
}

/// The machines the runs came from (host names, with how many runs each) when there is more than one, as for a
/// suite a cluster ran (`run --on slurm`): figures of different machines differ by the machine too.
pub fn machines_note(model: &ReportModel<'_>) -> Option<String> {
    let mut hosts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for l in &model.runs {
        *hosts.entry(l.result.environment.hostname.as_str()).or_insert(0) += 1;
    }
    (hosts.len() > 1).then(|| {
        let list: Vec<String> = hosts.iter().map(|(h, n)| format!("{h} ({n})")).collect();
        format!(
            "The runs came from {} machines: {}; figures of configurations run on different machines differ by the \
             machine as well (each run's host is in \"Runs and environments\").",
            hosts.len(),
            list.join(", ")
        )
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
    }
}
