//! Rendering a [`Comparison`]: a terminal table, Markdown, or JSON.

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};

use super::change::Change;
use super::comparison::{Comparison, PairReport, Verdict};
use crate::format::{self, human_bytes};

/// Output formats of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for the terminal (`text` is accepted too, as with the other commands' `--format`).
    #[value(alias = "text")]
    Table,
    /// A Markdown table (for pull-request comments and READMEs).
    Markdown,
    /// The full comparison as JSON.
    Json,
}

fn p_value(p: f64) -> String {
    if p < 1e-4 { "<0.0001".into() } else { format!("{p:.4}") }
}

fn change_cell(c: Option<&Change>, bytes: bool) -> String {
    match c {
        Some(c) if bytes => {
            format!(
                "{} -> {} ({})",
                human_bytes(c.baseline as u64),
                human_bytes(c.candidate as u64),
                format::percent_change(c.ratio)
            )
        }
        Some(c) => {
            format!("{} -> {} ({})", format::sig(c.baseline), format::sig(c.candidate), format::percent_change(c.ratio))
        }
        None => "-".into(),
    }
}

/// Cells of one pair: configuration, baseline median, candidate median, change [CI], p, throughput, memory,
/// verdict.
fn cells(p: &PairReport) -> [String; 8] {
    let (bm, cm, change, pv) = match &p.step_time {
        Some(s) => (
            format::ms(s.baseline_median_s),
            format::ms(s.candidate_median_s),
            format!(
                "{} [{}, {}]",
                format::percent_change(s.ratio),
                format::percent_change(s.ratio_ci[0]),
                format::percent_change(s.ratio_ci[1])
            ),
            p_value(s.p_value),
        ),
        None => ("-".into(), "-".into(), "-".into(), "-".into()),
    };
    let mut verdict = p.verdict.label().to_string();
    if p.verdict == Verdict::NotComparable {
        let reasons: Vec<String> = p.env_differences.iter().filter(|d| d.blocking).map(|d| d.describe()).collect();
        verdict = format!("not comparable: {}", reasons.join("; "));
    }
    if let (Verdict::TimeToTrain, Some(c)) = (p.verdict, &p.time_to_target) {
        verdict = format!(
            "time to train (MLPerf): {} -> {} ({})",
            format::duration(c.baseline),
            format::duration(c.candidate),
            format::percent_change(c.ratio)
        );
    }
    let target = if p.baseline.backend == p.candidate.backend && p.baseline.device == p.candidate.device {
        format!("{} on {}", p.baseline.backend, p.baseline.device)
    } else {
        format!("{} on {} / {} on {}", p.baseline.backend, p.baseline.device, p.candidate.backend, p.candidate.device)
    };
    [
        format!("{}\n{target}", p.config),
        bm,
        cm,
        change,
        pv,
        std::iter::once(change_cell(p.throughput.as_ref(), false))
            .chain(p.utilization.iter().flat_map(super::utilization::lines))
            .collect::<Vec<_>>()
            .join("\n"),
        change_cell(p.peak_memory.as_ref(), true),
        verdict,
    ]
}

const HEADERS: [&str; 8] = [
    "configuration",
    "baseline median step",
    "candidate median step",
    "step time change [95% CI]",
    "p (Mann-Whitney)",
    "samples/s",
    "peak allocated",
    "verdict",
];

fn summary(c: &Comparison) -> String {
    let counts: Vec<String> = c.counts().iter().map(|(k, n)| format!("{n} {k}")).collect();
    let mut s = format!(
        "{} pair(s): {}. Rule: significant when the {:.0}% CI excludes 0, p < {} and |change| > {:.1}% (or the \
         noise floor, the spread of one side's repeats, when larger).",
        c.pairs.len(),
        if counts.is_empty() { "none".to_string() } else { counts.join(", ") },
        c.options.confidence * 100.0,
        c.options.alpha,
        c.options.threshold * 100.0
    );
    if c.has_regression() {
        s.push_str(" Regression found.");
    }
    let single = c.pairs.iter().filter(|p| p.step_time.as_ref().is_some_and(|t| t.repeats.contains(&1))).count();
    if single > 0 {
        s.push_str(&format!(
            "\nNote: {single} pair(s) have a single repeat on a side, so their interval reflects only the noise within \
             one run, not between runs; for CI gating run `run.repeats >= 2` on both sides."
        ));
    }
    s
}

fn extras(c: &Comparison, bullet: &str) -> String {
    let mut out = String::new();
    for p in &c.pairs {
        for n in &p.notes {
            out.push_str(&format!("{bullet}{}: {n}\n", p.config));
        }
    }
    for u in &c.only_in_baseline {
        out.push_str(&format!("{bullet}only in baseline: {} ({}, {} repeat(s))\n", u.config, u.target, u.repeats));
    }
    for u in &c.only_in_candidate {
        out.push_str(&format!("{bullet}only in candidate: {} ({}, {} repeat(s))\n", u.config, u.target, u.repeats));
    }
    out
}

/// The terminal table, followed by notes, unpaired runs and a summary line.
pub fn table(c: &Comparison) -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(HEADERS);
    for p in &c.pairs {
        let row = cells(p);
        t.add_row(row.iter().enumerate().map(|(i, s)| {
            let cell = Cell::new(s);
            if (1..=4).contains(&i) { cell.set_alignment(CellAlignment::Right) } else { cell }
        }));
    }
    let mut out = if c.pairs.is_empty() { "no paired runs\n".to_string() } else { format!("{t}\n") };
    out.push_str(&extras(c, "  - "));
    out.push_str(&summary(c));
    out.push('\n');
    out
}

/// A Markdown table with the same content.
pub fn markdown(c: &Comparison) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = format!("| {} |\n", HEADERS.join(" | "));
    out.push_str("|---|--:|--:|--:|--:|--:|--:|---|\n");
    for p in &c.pairs {
        let row: Vec<String> = cells(p).iter().map(|s| esc(&s.replace('\n', " · "))).collect();
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    let extra = extras(c, "- ");
    if !extra.is_empty() {
        out.push('\n');
        out.push_str(&extra);
    }
    out.push('\n');
    out.push_str(&summary(c));
    out.push('\n');
    out
}

/// The comparison as pretty JSON.
pub fn json(c: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(c).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// Render in the given format.
pub fn render(c: &Comparison, format: Format) -> String {
    match format {
        Format::Table => table(c),
        Format::Markdown => markdown(c),
        Format::Json => json(c),
    }
}
