//! The Markdown report: the same sections as the HTML page, with the plots as SVG files next to it.

use std::fmt::Write as _;

use super::plots::{Plot, Section};
use super::{ReportModel, environment_summary, fmt_ms, fmt_percent, fmt_sig};
use crate::format::human_bytes;

/// Escape text for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn opt(v: Option<String>) -> String {
    v.map(|s| cell(&s)).unwrap_or_else(|| "-".into())
}

/// Render `report.md`; plots are linked as `<id>.svg`.
pub fn render(model: &ReportModel<'_>, plots: &[Plot]) -> String {
    let mut m = String::new();
    m.push_str("# trainbench report\n\n");
    let specs = model.specs();
    let _ = writeln!(
        m,
        "{} runs in {} configurations of {} spec(s): {}.\n",
        model.runs.len(),
        model.configs.len(),
        specs.len(),
        specs.join(", ")
    );
    for s in Section::ALL {
        let in_section: Vec<&Plot> = plots.iter().filter(|p| p.section == s).collect();
        if in_section.is_empty() {
            continue;
        }
        let _ = writeln!(m, "## {}\n", s.heading());
        for p in in_section {
            let _ = writeln!(m, "![{}]({}.svg)\n\n{}\n", p.title, p.id, p.caption);
        }
    }

    m.push_str("## Configurations\n\n");
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
            opt(c.samples_per_s().map(fmt_sig)),
            opt(c.median_step_s().map(fmt_ms)),
            opt(c.p95_step_s().map(fmt_ms)),
            opt(c.cv().map(fmt_percent)),
            opt(c.gpu_utilization_percent().map(|v| format!("{v:.1}%"))),
            opt(c.flop_fraction().map(fmt_percent)),
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
