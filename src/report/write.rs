//! Writing a report: the HTML page, the Markdown page with its SVG plots and the CSV, into one folder.

use std::path::{Path, PathBuf};

use super::error::ReportError;
use super::model::ReportModel;
use super::{csv, html, markdown, plots};
use crate::result::LoadedResult;

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
