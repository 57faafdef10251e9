//! The Markdown report: the same sections as the HTML page (overview table first, then the plots of each
//! section side by side in one paragraph, which Markdown viewers wrap into a grid), with the plots as SVG files
//! next to it.

use std::fmt::Write as _;

use super::expert_load;
use super::model::ReportModel;
use super::overview::{Emphasis, Overview};
use super::plots::{Plot, Section};
use super::predicted;
use super::scaling;
use super::text::{environment_summary, summary_line};
use crate::format::{self, human_bytes};

/// Escape text for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn opt(v: Option<String>) -> String {
    v.map(|s| cell(&s)).unwrap_or_else(|| "-".into())
}

/// The overview table and the note under it.
fn overview(model: &ReportModel<'_>) -> String {
    let table = Overview::new(model);
    let mut m = String::from("## Overview\n\n|");
    for c in &table.columns {
        let _ = write!(m, " {} |", c.heading());
    }
    m.push_str("\n|");
    for c in &table.columns {
        m.push_str(if c.numeric() { "--:|" } else { "---|" });
    }
    m.push('\n');
    for row in &table.rows {
        m.push('|');
        for c in &row.cells {
            let text = match c.emphasis {
                Emphasis::Best => format!("**{}**", cell(&c.text)),
                _ => cell(&c.text),
            };
            let range = c.range.as_ref().map(|r| format!(" [{}]", cell(r))).unwrap_or_default();
            let _ = write!(m, " {text}{range} |");
        }
        m.push('\n');
    }
    let _ = writeln!(m, "\n{}\n", table.note());
    m
}

/// The scaling table, what its columns hold and why an efficiency is missing.
fn scaling_table(rows: &[scaling::ScalingRow]) -> String {
    let mut m = format!("| configuration | {} |\n|---|", scaling::HEADINGS.join(" | "));
    for i in 0..scaling::HEADINGS.len() {
        m.push_str(if matches!(i, 1 | 2) { "---|" } else { "--:|" });
    }
    m.push('\n');
    for r in rows {
        let cells: Vec<String> = r.cells.iter().map(|c| cell(c)).collect();
        let _ = writeln!(m, "| {} | {} |", cell(&r.config), cells.join(" | "));
    }
    let _ = writeln!(m, "\n{}\n", scaling::NOTE);
    let absent: Vec<String> =
        rows.iter().filter_map(|r| r.absent_because.as_ref().map(|why| format!("{}: {why}", r.config))).collect();
    if !absent.is_empty() {
        let _ = writeln!(m, "No efficiency for {}.\n", absent.join("; "));
    }
    m
}

/// The predicted-against-measured table, what its columns hold, the errors' summary and what has no prediction.
fn predicted_table(t: &predicted::PredictionTable) -> String {
    let mut m = String::new();
    if !t.rows.is_empty() {
        let _ = writeln!(m, "| configuration | {} |\n|---|--:|--:|--:|--:|--:|---|", predicted::HEADINGS.join(" | "));
        for r in &t.rows {
            let cells: Vec<String> = predicted::cells(r).iter().map(|c| cell(c)).collect();
            let _ = writeln!(m, "| {} | {} |", cell(&r.config), cells.join(" | "));
        }
        let _ = writeln!(m, "\n{}\n", predicted::NOTE);
    }
    let _ = writeln!(m, "{}\n", t.summary_line());
    m
}

/// The expert-load table and what its columns hold.
fn expert_load_table(rows: &[expert_load::LoadRow]) -> String {
    let mut m = format!("| configuration | {} |\n|---|---|", expert_load::HEADINGS.join(" | "));
    m.push_str(&"--:|".repeat(expert_load::HEADINGS.len() - 1));
    m.push('\n');
    for r in rows {
        let cells: Vec<String> = r.cells.iter().map(|c| cell(c)).collect();
        let _ = writeln!(m, "| {} | {} |", cell(&r.config), cells.join(" | "));
    }
    let _ = writeln!(m, "\n{}\n", expert_load::NOTE);
    m
}

/// Render `report.md`; plots are linked as `<id>.svg`.
pub fn render(model: &ReportModel<'_>, plots: &[Plot]) -> String {
    let mut m = String::new();
    m.push_str("# trainbench report\n\n");
    let _ = writeln!(m, "{}\n", summary_line(model));
    m.push_str(&overview(model));
    let scaling_rows = scaling::table(model);
    let predictions = predicted::table(model);
    let loads = expert_load::table(model);
    for s in Section::ALL {
        let in_section: Vec<&Plot> = plots.iter().filter(|p| p.section == s).collect();
        let table =
            (s == Section::Scaling && !scaling_rows.is_empty()) || (s == Section::Predicted && !predictions.is_empty());
        if in_section.is_empty() && !table {
            continue;
        }
        let _ = writeln!(m, "## {}\n\n{}\n", s.heading(), s.description());
        if !in_section.is_empty() {
            let images: Vec<String> = in_section.iter().map(|p| format!("![{}]({}.svg)", p.title, p.id)).collect();
            let _ = writeln!(m, "{}\n", images.join("\n"));
        }
        if table && s == Section::Scaling {
            m.push_str(&scaling_table(&scaling_rows));
        }
        if table && s == Section::Predicted {
            m.push_str(&predicted_table(&predictions));
        }
        if s == Section::ExpertLoad && !loads.is_empty() {
            m.push_str(&expert_load_table(&loads));
        }
        for p in in_section.iter().filter(|p| !p.notes.is_empty()) {
            let _ = writeln!(m, "- *{}*: {}", p.title, p.notes.join(" "));
        }
        if in_section.iter().any(|p| !p.notes.is_empty()) {
            m.push('\n');
        }
    }

    m.push_str("## Configurations in detail\n\n");
    m.push_str("| configuration | outcome | repeats | backend | device | precision | batch | samples/s | median step | p95 step | CV | GPU busy | FLOP of peak | peak allocated |\n");
    m.push_str("|---|---|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for c in &model.configs {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&c.config),
            cell(&c.outcome_summary()),
            c.runs.len(),
            cell(&c.backend),
            cell(&c.device),
            c.precision.as_str(),
            c.batch,
            opt(c.samples_per_s().map(format::sig)),
            opt(c.median_step_s().map(format::ms)),
            opt(c.p95_step_s().map(format::ms)),
            opt(c.cv().map(format::percent)),
            opt(c.gpu_utilization_percent().map(|v| format!("{v:.1}%"))),
            opt(c.flop_fraction().map(format::percent)),
            opt(c.peak_allocated_bytes().map(human_bytes)),
        );
    }

    m.push_str("\n## Runs and environments\n\n| run | outcome | environment |\n|---|---|---|\n");
    for l in &model.runs {
        let r = &l.result;
        let _ = writeln!(m, "| {} | {} | {} |", cell(&r.run_id), r.outcome.status(), cell(&environment_summary(r)));
    }
    m
}
