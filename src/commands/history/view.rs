//! `history list`, `history show` and `history detect`: the series, one series' points, and the change points
//! of every series with the environment fields that changed, as text, JSON or Markdown.

use serde::Serialize;
use serde_json::json;

use super::common::{HistoryFormat, OrderArg, StoreArg, find_series, store_error};
use crate::commands::{CommandError, Outcome};
use crate::history::analysis::{Change, Detection, detect};
use crate::history::order::PointOrder;
use crate::history::points::{Series, load_series_in};
use crate::history::series::Metric;
use crate::stats::changepoint::DetectOptions;

/// Version of the JSON `list`, `show` and `detect` print.
const JSON_VERSION: u32 = 1;

/// The detector's settings on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct DetectArg {
    /// Fewest points on each side of a change point.
    #[arg(long, value_name = "N", default_value_t = DetectOptions::default().min_points_per_segment)]
    pub min_points: usize,
    /// Largest p-value of the t-test that counts as a change.
    #[arg(long, value_name = "P", default_value_t = DetectOptions::default().p_value)]
    pub p_value: f64,
    /// Smallest relative change of the level that counts (`0.02`: 2%).
    #[arg(long, value_name = "FRACTION", default_value_t = DetectOptions::default().min_effect)]
    pub min_effect: f64,
}

impl DetectArg {
    fn options(&self) -> Result<DetectOptions, CommandError> {
        let p_value_ok = self.p_value > 0.0 && self.p_value < 1.0;
        if !p_value_ok || self.min_effect.is_nan() || self.min_effect < 0.0 || self.min_points == 0 {
            return Err(CommandError::Input(
                "--p-value must be in (0, 1), --min-effect at least 0 and --min-points at least 1".into(),
            ));
        }
        Ok(DetectOptions {
            min_points_per_segment: self.min_points,
            p_value: self.p_value,
            min_effect: self.min_effect,
            ..DetectOptions::default()
        })
    }
}

/// Arguments of `history list` and `history detect`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only the series whose name contains this.
    #[arg(value_name = "SERIES")]
    pub filter: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = HistoryFormat::Text)]
    pub format: HistoryFormat,
    /// The detector's settings.
    #[command(flatten)]
    pub detect: DetectArg,
    /// The order of the points.
    #[command(flatten)]
    pub order: OrderArg,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
}

/// Arguments of `history show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The series (its name, or a part naming one series).
    #[arg(value_name = "SERIES")]
    pub series: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = HistoryFormat::Text)]
    pub format: HistoryFormat,
    /// The detector's settings.
    #[command(flatten)]
    pub detect: DetectArg,
    /// The order of the points.
    #[command(flatten)]
    pub order: OrderArg,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
}

/// A value in its unit, for people.
pub fn show_value(metric: Metric, v: f64) -> String {
    match metric {
        Metric::StepTime => format!("{:.3} ms", v * 1e3),
        Metric::Throughput => format!("{v:.1} samples/s"),
        Metric::TokensPerS => format!("{v:.0} tokens/s"),
        Metric::Mfu | Metric::CommShare => format!("{:.1}%", v * 100.0),
        Metric::PeakMemory => format!("{:.1} MiB", v / (1024.0 * 1024.0)),
    }
}

fn change_line(metric: Metric, c: &Change) -> String {
    let mut line = format!(
        "#{} ({}{}): {} {:+.1}% ({} -> {}, p = {:.1e})",
        c.first_point.index,
        c.first_point.started_at,
        c.first_point.revision.as_deref().map(|r| format!(", revision {}", short(r))).unwrap_or_default(),
        c.direction,
        c.relative_change * 100.0,
        show_value(metric, c.mean_before),
        show_value(metric, c.mean_after),
        c.p_value
    );
    if c.environment.is_empty() {
        line.push_str("; no environment field changed");
    } else {
        let changed: Vec<String> = c.environment.iter().map(ToString::to_string).collect();
        line.push_str(&format!("; changed: {}", changed.join(", ")));
    }
    line
}

fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

fn detection_words(metric: Metric, d: &Detection, points: usize) -> String {
    match d {
        Detection::TooFewPoints { points, needed } => {
            format!("too few points for detection ({points}; it needs {needed})")
        }
        Detection::Checked { changes } if changes.is_empty() => format!("no change point in {points} points"),
        Detection::Checked { changes } => {
            changes.last().map(|c| format!("last change {}", change_line(metric, c))).unwrap_or_default()
        }
    }
}

fn load(args_store: &StoreArg, filter: &str, order: &PointOrder) -> Result<Vec<Series>, CommandError> {
    let mut store = args_store.open_existing()?;
    load_series_in(store.as_mut(), &|name| name.contains(filter), order).map_err(store_error)
}

/// The runs a revision-ordered series left out, in words (empty when none).
fn left_out_words(s: &Series) -> String {
    if s.left_out.is_empty() {
        return String::new();
    }
    format!("{} run(s) left out: their revision is not in the repository's history", s.left_out.len())
}

#[derive(Serialize)]
struct SeriesSummary<'a> {
    name: String,
    #[serde(flatten)]
    id: &'a crate::history::points::SeriesId,
    unit: &'static str,
    lower_is_better: bool,
    points: usize,
    last_value: Option<f64>,
    #[serde(skip_serializing_if = "is_zero")]
    left_out: usize,
    detection: Detection,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn summary<'a>(s: &'a Series, opts: &DetectOptions) -> SeriesSummary<'a> {
    SeriesSummary {
        name: s.id.name(),
        id: &s.id,
        unit: s.id.metric.unit(),
        lower_is_better: s.id.metric.lower_is_better(),
        points: s.points.len(),
        last_value: s.points.last().map(|p| p.value),
        left_out: s.left_out.len(),
        detection: detect(s, opts),
    }
}

fn print_json(value: &serde_json::Value) -> Result<(), CommandError> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Carry out `history list`.
pub fn list(args: &ListArgs) -> Result<Outcome, CommandError> {
    let opts = args.detect.options()?;
    let order = args.order.resolve()?;
    let all = load(&args.store, args.filter.as_deref().unwrap_or(""), &order)?;
    let rows: Vec<SeriesSummary<'_>> = all.iter().map(|s| summary(s, &opts)).collect();
    match args.format {
        HistoryFormat::Json => print_json(&json!({
            "format": "trainbench-history-list",
            "version": JSON_VERSION,
            "order": order.name(),
            "series": rows,
        }))?,
        HistoryFormat::Text | HistoryFormat::Markdown => {
            let markdown = args.format == HistoryFormat::Markdown;
            if markdown {
                outln!("| series | machine | points | last | status |\n|---|---|---:|---:|---|");
            } else if rows.is_empty() {
                outln!("no series recorded yet (`trainbench history record RESULTS...` adds results)");
            }
            for (s, row) in all.iter().zip(&rows) {
                let last = row.last_value.map(|v| show_value(s.id.metric, v)).unwrap_or_else(|| "-".into());
                let mut status = detection_words(s.id.metric, &row.detection, row.points);
                if !s.left_out.is_empty() {
                    status.push_str(&format!("; {}", left_out_words(s)));
                }
                if markdown {
                    outln!("| `{}` | {} | {} | {last} | {status} |", row.name, s.id.machine_label, row.points);
                } else {
                    outln!("{}\n  {} | {} point(s) | last {last} | {status}", row.name, s.id.machine_label, row.points);
                }
            }
        }
    }
    Ok(Outcome::Success)
}

/// Carry out `history show`.
pub fn show(args: &ShowArgs) -> Result<Outcome, CommandError> {
    let opts = args.detect.options()?;
    let order = args.order.resolve()?;
    let all = load(&args.store, &args.series, &order)?;
    let s = find_series(&all, &args.series)?;
    let detection = detect(s, &opts);
    let metric = s.id.metric;
    let acks: Vec<serde_json::Value> = s.acks.iter().map(|(i, a)| json!({"point": i, "why": a.why})).collect();
    let changes: Vec<usize> = match &detection {
        Detection::Checked { changes } => changes.iter().map(|c| c.first_point.index).collect(),
        Detection::TooFewPoints { .. } => Vec::new(),
    };
    match args.format {
        HistoryFormat::Json => print_json(&json!({
            "format": "trainbench-history-series",
            "version": JSON_VERSION,
            "order": order.name(),
            "series": summary(s, &opts),
            "points": s.points,
            "acks": acks,
            "left_out": s.left_out,
        }))?,
        HistoryFormat::Text | HistoryFormat::Markdown => {
            let markdown = args.format == HistoryFormat::Markdown;
            outln!("{}{}\n", if markdown { "### " } else { "" }, s.id.name());
            outln!(
                "configuration {} | machine {} | metric {} ({})",
                s.id.config_label,
                s.id.machine_label,
                metric.name(),
                metric.unit()
            );
            outln!("{}\n", detection_words(metric, &detection, s.points.len()));
            if markdown {
                outln!("| point | started | revision | value | runs | note |\n|---:|---|---|---:|---:|---|");
            }
            for p in &s.points {
                let mut note = Vec::new();
                if changes.contains(&p.index) {
                    note.push("change point".to_string());
                }
                for (_, a) in s.acks.iter().filter(|(i, _)| *i == p.index) {
                    note.push(format!("acknowledged: {}", a.why));
                }
                let revision = p.revision.as_deref().map(short).unwrap_or("-");
                let value = show_value(metric, p.value);
                if markdown {
                    outln!(
                        "| {} | {} | {revision} | {value} | {} | {} |",
                        p.index,
                        p.started_at,
                        p.run_ids.len(),
                        note.join("; ")
                    );
                } else {
                    outln!(
                        "#{:<4} {}  {revision:<12}  {value:>18}  {} run(s)  {}",
                        p.index,
                        p.started_at,
                        p.run_ids.len(),
                        note.join("; ")
                    );
                }
            }
            if !s.left_out.is_empty() {
                outln!("\n{}:", left_out_words(s));
                for r in &s.left_out {
                    let revision = r.revision.as_deref().unwrap_or("(no revision recorded)");
                    outln!(
                        "{}{} ({}, revision {revision})",
                        if markdown { "- " } else { "  " },
                        r.run_id,
                        r.started_at
                    );
                }
            }
        }
    }
    Ok(Outcome::Success)
}

/// Carry out `history detect`: exit 1 when a series regressed since its latest acknowledged change.
pub fn detect_all(args: &ListArgs) -> Result<Outcome, CommandError> {
    let opts = args.detect.options()?;
    let order = args.order.resolve()?;
    let all = load(&args.store, args.filter.as_deref().unwrap_or(""), &order)?;
    let rows: Vec<SeriesSummary<'_>> = all.iter().map(|s| summary(s, &opts)).collect();
    let open_regression = all.iter().zip(&rows).any(|(s, row)| match &row.detection {
        Detection::Checked { changes } => {
            changes.iter().any(|c| c.direction == "regression" && c.first_point.index >= s.restart())
        }
        Detection::TooFewPoints { .. } => false,
    });
    match args.format {
        HistoryFormat::Json => print_json(&json!({
            "format": "trainbench-history-detect",
            "version": JSON_VERSION,
            "order": order.name(),
            "regression": open_regression,
            "series": rows,
        }))?,
        HistoryFormat::Text | HistoryFormat::Markdown => {
            let bullet = if args.format == HistoryFormat::Markdown { "- " } else { "  " };
            for (s, row) in all.iter().zip(&rows) {
                let name = if args.format == HistoryFormat::Markdown {
                    format!("**`{}`**", row.name)
                } else {
                    row.name.clone()
                };
                match &row.detection {
                    Detection::Checked { changes } if !changes.is_empty() => {
                        outln!("{name}: {} change point(s)", changes.len());
                        for c in changes.iter() {
                            outln!("{bullet}{}", change_line(s.id.metric, c));
                        }
                    }
                    other => outln!("{name}: {}", detection_words(s.id.metric, other, row.points)),
                }
                if !s.left_out.is_empty() {
                    outln!("{bullet}{}", left_out_words(s));
                }
            }
        }
    }
    Ok(if open_regression { Outcome::Failure } else { Outcome::Success })
}

/// Arguments of `history report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Folder to write `history.html` into (created when missing).
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// Only the series whose name contains this.
    #[arg(value_name = "SERIES")]
    pub filter: Option<String>,
    /// The detector's settings.
    #[command(flatten)]
    pub detect: DetectArg,
    /// The order of the points.
    #[command(flatten)]
    pub order: OrderArg,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
}

/// Carry out `history report`: the static HTML page of every series over time.
pub fn report(args: &ReportArgs) -> Result<Outcome, CommandError> {
    let opts = args.detect.options()?;
    let order = args.order.resolve()?;
    let all = load(&args.store, args.filter.as_deref().unwrap_or(""), &order)?;
    let detections: Vec<Detection> = all.iter().map(|s| detect(s, &opts)).collect();
    let cwd = std::env::current_dir().map_err(|e| CommandError::Io { path: ".".into(), source: e })?;
    let links = crate::history::page::LinkBase::new(&args.out, &cwd);
    let page = crate::history::page::render(&all, &detections, &links);
    let io = |path: &std::path::Path, source| CommandError::Io { path: path.display().to_string(), source };
    std::fs::create_dir_all(&args.out).map_err(|e| io(&args.out, e))?;
    let file = args.out.join("history.html");
    std::fs::write(&file, page).map_err(|e| io(&file, e))?;
    outln!("wrote {} ({} series)", file.display(), all.len());
    let left_out: usize = all.iter().map(|s| s.left_out.len()).sum();
    if left_out > 0 {
        eprintln!("{left_out} run(s) left out of the page: their revision is not in the repository's history");
    }
    Ok(Outcome::Success)
}
