//! The self-contained HTML report: inline CSS, inline SVG plots, no scripts and no external requests. The
//! overview table comes first, then one grid of compact plots per section, then every configuration and run.

use std::fmt::Write as _;

use super::escape::escape;
use super::expert_load::{self, LoadRow};
use super::model::{ConfigRow, ReportModel};
use super::overview::{Cell, Column, Emphasis, Overview};
use super::plots::{Plot, Section};
use super::predicted::{self, PredictionTable};
use super::scaling::{self, ScalingRow};
use super::text::{environment_summary, summary_line};
use crate::format::{self, human_bytes};

/// The report's stylesheet, shared with the history page (`history report`).
pub const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5rem auto;max-width:1280px;padding:0 1rem;\
color:#222;line-height:1.4}\
h1{margin:0 0 .2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.25rem;margin:2rem 0 .6rem;font-size:1.25rem}\
nav{font-size:.9rem;margin:.4rem 0 1rem}nav a{margin-right:.9rem}\
p.note{font-size:.85rem;color:#555;margin:.4rem 0}\
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:.8rem 1rem;align-items:start}\
.grid figure{margin:0;border:1px solid #e6e6e6;border-radius:4px;padding:.2rem}\
figure svg{display:block;width:100%;height:auto}figcaption{font-size:.8rem;color:#555;padding:.2rem .3rem}\
table{border-collapse:collapse;font-size:.85rem;width:100%}\
th,td{border:1px solid #ddd;padding:.3rem .45rem;text-align:left;vertical-align:top}\
th{background:#f4f4f4;position:sticky;top:0}td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr:nth-child(even) td{background:#fafafa}tbody+tbody{border-top:2px solid #999}\
.bad{color:#b00020;font-weight:600}.best{font-weight:700}.muted{color:#777}\
.range{color:#666;font-size:.8em;margin-left:.3em;white-space:nowrap}\
.scroll{overflow-x:auto}#overview-table td{white-space:nowrap}#overview-table td.wrap{white-space:normal}";

/// The SVG as inlined in HTML: without the namespace attribute (implied in HTML documents).
fn inline_svg(svg: &str) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

fn cell_num(v: Option<String>) -> String {
    match v {
        Some(s) => format!("<td class=\"num\">{}</td>", escape(&s)),
        None => "<td class=\"num muted\">-</td>".to_string(),
    }
}

/// A cell of the overview table.
fn overview_cell(column: Column, cell: &Cell) -> String {
    let mut classes = Vec::new();
    if column.numeric() {
        classes.push("num");
    }
    if column == Column::Placement {
        classes.push("wrap"); // the only long free text; the rest stays on one line
    }
    classes.push(match cell.emphasis {
        Emphasis::Plain => "",
        Emphasis::Best => "best",
        Emphasis::Bad => "bad",
        Emphasis::Missing => "muted",
    });
    let class = classes.into_iter().filter(|c| !c.is_empty()).collect::<Vec<_>>().join(" ");
    let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
    let range =
        cell.range.as_ref().map(|r| format!("<span class=\"range\">[{}]</span>", escape(r))).unwrap_or_default();
    format!("<td{class}>{}{range}</td>", escape(&cell.text))
}

/// The overview section: one row per configuration, one `<tbody>` per spec.
fn overview(model: &ReportModel<'_>) -> String {
    let table = Overview::new(model);
    let mut h = String::from("<section id=\"overview\">\n<h2>Overview</h2>\n<div class=\"scroll\">");
    h.push_str("<table id=\"overview-table\">\n<thead><tr>");
    for c in &table.columns {
        let _ = write!(h, "<th>{}</th>", escape(c.heading()));
    }
    h.push_str("</tr></thead>\n");
    let mut spec: Option<&str> = None;
    for row in &table.rows {
        if spec != Some(row.spec.as_str()) {
            if spec.is_some() {
                h.push_str("</tbody>\n");
            }
            let _ = writeln!(h, "<tbody data-spec=\"{}\">", escape(&row.spec));
            spec = Some(row.spec.as_str());
        }
        let _ = write!(h, "<tr data-config=\"{}\">", escape(&row.config));
        for (column, cell) in table.columns.iter().zip(&row.cells) {
            h.push_str(&overview_cell(*column, cell));
        }
        h.push_str("</tr>\n");
    }
    if spec.is_some() {
        h.push_str("</tbody>\n");
    }
    let _ = writeln!(h, "</table></div>\n<p class=\"note\">{}</p>\n</section>", escape(&table.note()));
    h
}

fn config_row(c: &ConfigRow<'_>) -> String {
    let outcome = c.outcome_summary();
    let outcome_cell = if c.all_completed() {
        format!("<td>{}</td>", escape(&outcome))
    } else {
        format!("<td class=\"bad\">{}</td>", escape(&outcome))
    };
    let mut row = String::from("<tr>");
    let _ = write!(
        row,
        "<td>{}</td><td>{}</td>{outcome_cell}<td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td>",
        escape(&c.spec),
        escape(&c.config),
        c.runs.len(),
        escape(&c.backend),
        escape(&c.device),
        c.precision.as_str(),
    );
    row.push_str(&format!("<td class=\"num\">{}</td>", c.batch));
    row.push_str(&cell_num(c.samples_per_s().map(format::sig)));
    row.push_str(&cell_num(c.items_per_s().map(|(v, u)| format!("{} {u}/s", format::sig(v)))));
    row.push_str(&cell_num(c.median_step_s().map(format::ms)));
    row.push_str(&cell_num(c.p95_step_s().map(format::ms)));
    row.push_str(&cell_num(c.cv().map(format::percent)));
    row.push_str(&cell_num(c.gpu_utilization_percent().map(|v| format!("{v:.1}%"))));
    row.push_str(&cell_num(c.flop_fraction().map(format::percent)));
    row.push_str(&cell_num(c.cpu_utilization().map(format::percent)));
    row.push_str(&cell_num(c.peak_allocated_bytes().map(human_bytes)));
    row.push_str(&cell_num(c.energy_per_sample_j().map(|j| format!("{} J", format::sig(j)))));
    row.push_str("</tr>\n");
    row
}

/// True when a section has something to show: a plot, or for scaling a row of the scaling table, or for
/// predictions a row or a reason.
fn shown(s: Section, plots: &[Plot], scaling_rows: &[ScalingRow], predictions: &PredictionTable) -> bool {
    plots.iter().any(|p| p.section == s)
        || (s == Section::Scaling && !scaling_rows.is_empty())
        || (s == Section::Predicted && !predictions.is_empty())
}

/// The predicted-against-measured table, what its columns hold, the errors' summary and what has no prediction.
fn predicted_table(t: &PredictionTable) -> String {
    let mut h = String::new();
    if !t.rows.is_empty() {
        h.push_str("<div class=\"scroll\"><table id=\"predicted-table\">\n<thead><tr><th>configuration</th>");
        for head in predicted::HEADINGS {
            let _ = write!(h, "<th>{}</th>", escape(head));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for r in &t.rows {
            let _ = write!(h, "<tr data-config=\"{}\"><td>{}</td>", escape(&r.config), escape(&r.config));
            for (i, c) in predicted::cells(r).iter().enumerate() {
                let class = match i {
                    2 if r.error.abs() > 0.25 => " class=\"num bad\"",
                    5 => "",
                    _ => " class=\"num\"",
                };
                let _ = write!(h, "<td{class}>{}</td>", escape(c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
        let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(predicted::NOTE));
    }
    let _ = writeln!(h, "<p class=\"note\" id=\"predicted-summary\">{}</p>", escape(&t.summary_line()));
    h
}

/// The scaling table (data-parallel runs against world size 1), with what its columns hold and why an
/// efficiency is missing.
fn scaling_table(rows: &[ScalingRow]) -> String {
    let mut h = String::from("<div class=\"scroll\"><table id=\"scaling-table\">\n<thead><tr><th>configuration</th>");
    for head in scaling::HEADINGS {
        let _ = write!(h, "<th>{}</th>", escape(head));
    }
    h.push_str("</tr></thead>\n");
    let mut spec: Option<&str> = None;
    for row in rows {
        if spec != Some(row.spec.as_str()) {
            if spec.is_some() {
                h.push_str("</tbody>\n");
            }
            let _ = writeln!(h, "<tbody data-spec=\"{}\">", escape(&row.spec));
            spec = Some(row.spec.as_str());
        }
        let _ = write!(h, "<tr data-config=\"{}\"><td>{}</td>", escape(&row.config), escape(&row.config));
        for (i, c) in row.cells.iter().enumerate() {
            let numeric = !matches!(i, 1 | 2);
            let class = match (numeric, c == "-") {
                (true, true) => " class=\"num muted\"",
                (true, false) => " class=\"num\"",
                (false, _) => "",
            };
            let _ = write!(h, "<td{class}>{}</td>", escape(c));
        }
        h.push_str("</tr>\n");
    }
    if spec.is_some() {
        h.push_str("</tbody>\n");
    }
    h.push_str("</table></div>\n");
    let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(scaling::NOTE));
    let absent: Vec<String> =
        rows.iter().filter_map(|r| r.absent_because.as_ref().map(|why| format!("{}: {why}", r.config))).collect();
    if !absent.is_empty() {
        let _ = writeln!(h, "<p class=\"note\">No efficiency for {}.</p>", escape(&absent.join("; ")));
    }
    h
}

/// The expert-load table: one row per MoE layer of each configuration, and what its columns hold.
fn expert_load_table(rows: &[LoadRow]) -> String {
    let mut h =
        String::from("<div class=\"scroll\"><table id=\"expert-load-table\">\n<thead><tr><th>configuration</th>");
    for head in expert_load::HEADINGS {
        let _ = write!(h, "<th>{}</th>", escape(head));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        let _ = write!(h, "<tr data-config=\"{}\"><td>{}</td>", escape(&r.config), escape(&r.config));
        for (i, c) in r.cells.iter().enumerate() {
            let class = if i == 0 { "" } else { " class=\"num\"" };
            let _ = write!(h, "<td{class}>{}</td>", escape(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(expert_load::NOTE));
    h
}

/// The plot sections: per section a note saying what is plotted, then a grid of its panels (and, for scaling,
/// the scaling table; for expert load, its table).
fn plot_sections(
    plots: &[Plot],
    scaling_rows: &[ScalingRow],
    predictions: &PredictionTable,
    loads: &[LoadRow],
) -> String {
    let mut h = String::new();
    for s in Section::ALL {
        let in_section: Vec<&Plot> = plots.iter().filter(|p| p.section == s).collect();
        if !shown(s, plots, scaling_rows, predictions) {
            continue;
        }
        let _ = writeln!(
            h,
            "<section id=\"{}\">\n<h2>{}</h2>\n<p class=\"note\">{}</p>\n<div class=\"grid\">",
            s.anchor(),
            escape(s.heading()),
            escape(s.description())
        );
        for p in in_section {
            let caption = if p.notes.is_empty() {
                String::new()
            } else {
                format!("\n<figcaption>{}</figcaption>", escape(&p.notes.join(" ")))
            };
            let _ = writeln!(h, "<figure id=\"plot-{}\">\n{}{caption}\n</figure>", escape(&p.id), inline_svg(&p.svg));
        }
        h.push_str("</div>\n");
        if s == Section::Scaling {
            h.push_str(&scaling_table(scaling_rows));
        }
        if s == Section::Predicted {
            h.push_str(&predicted_table(predictions));
        }
        if s == Section::ExpertLoad && !loads.is_empty() {
            h.push_str(&expert_load_table(loads));
        }
        h.push_str("</section>\n");
    }
    h
}

/// Render the HTML page: the overview table, the plot grids, then every configuration and run in detail.
pub fn render(model: &ReportModel<'_>, plots: &[Plot]) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>trainbench report</title>\n");
    let _ = writeln!(h, "<style>{STYLE}</style>\n</head>\n<body>");
    h.push_str("<h1>trainbench report</h1>\n");
    let _ = writeln!(h, "<p>{}</p>", escape(&summary_line(model)));
    h.push_str("<nav><a href=\"#overview\">Overview</a>");
    let scaling_rows = scaling::table(model);
    let predictions = predicted::table(model);
    for s in Section::ALL {
        if shown(s, plots, &scaling_rows, &predictions) {
            let _ = write!(h, "<a href=\"#{}\">{}</a>", s.anchor(), escape(s.heading()));
        }
    }
    h.push_str(
        "<a href=\"#details\">Configurations in detail</a><a href=\"#environment\">Runs and environments</a></nav>\n",
    );
    h.push_str(&overview(model));
    h.push_str(&plot_sections(plots, &scaling_rows, &predictions, &expert_load::table(model)));

    h.push_str(
        "<section id=\"details\">\n<h2>Configurations in detail</h2>\n<div class=\"scroll\"><table>\n<thead><tr>",
    );
    for head in [
        "spec",
        "configuration",
        "outcome",
        "repeats",
        "backend",
        "device",
        "precision",
        "batch",
        "samples/s",
        "items/s",
        "median step",
        "p95 step",
        "CV",
        "GPU busy",
        "FLOP of peak",
        "CPU",
        "peak allocated",
        "energy/sample",
    ] {
        let _ = write!(h, "<th>{}</th>", escape(head));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for c in &model.configs {
        h.push_str(&config_row(c));
    }
    h.push_str("</tbody></table></div>\n</section>\n");

    h.push_str("<section id=\"environment\">\n<h2>Runs and environments</h2>\n<div class=\"scroll\"><table>\n");
    h.push_str("<thead><tr><th>run</th><th>outcome</th><th>started</th><th>spec SHA-256</th><th>environment</th></tr></thead>\n<tbody>\n");
    for l in &model.runs {
        let r = &l.result;
        let sha = r.environment.spec_sha256.get(..12).unwrap_or(&r.environment.spec_sha256);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            escape(&r.run_id),
            escape(r.outcome.status()),
            escape(&r.environment.started_at),
            escape(sha),
            escape(&environment_summary(r))
        );
    }
    h.push_str("</tbody></table></div>\n</section>\n");
    h.push_str("<footer class=\"muted\"><p>Written by trainbench report. Self-contained: no scripts, no external resources.</p></footer>\n");
    h.push_str("</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_svg_drops_the_namespace_url() {
        let svg = "<svg width=\"1\" xmlns=\"http://www.w3.org/2000/svg\">\n</svg>";
        assert_eq!(inline_svg(svg), "<svg width=\"1\">\n</svg>");
    }
}
