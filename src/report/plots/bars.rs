//! Stacked bar panels: the memory breakdown per batch size (measured beside estimated) and the phase shares of
//! an iteration per configuration (horizontal bars).

use plotters::prelude::*;

use super::super::error::ReportError;
use super::super::model::{ConfigRow, Series};
use super::super::model::{Phase, Varying};
use super::{CHART_HEIGHT, FONT, LABEL_SIZE, Legend, Mark, Plot, Section, WIDTH};
use super::{Segments, chart_and_legend, color, finish, panel_chart, plot_err, slug, stacked_rows, tick};

/// Memory categories of the stacked bars, bottom up.
const MEMORY_PARTS: [&str; 4] = ["weights", "gradients", "optimizer state", "activations + workspace"];

/// Bytes per category of [`MEMORY_PARTS`].
type Parts = [u64; 4];

/// Measured and estimated breakdown of one configuration, bytes per category of [`MEMORY_PARTS`].
/// A measured breakdown without an allocator peak has no activations + workspace figure; it is drawn as 0 and
/// the plot says so.
fn memory_parts(c: &ConfigRow<'_>) -> (Option<Parts>, Option<Parts>) {
    let Some(m) = c.first_metrics() else { return (None, None) };
    let me = &m.memory.measured;
    let measured = [
        me.weights_bytes,
        me.gradients_bytes,
        me.optimizer_state_bytes,
        me.activations_and_workspace_bytes.unwrap_or(0),
    ];
    let estimate = m.memory.estimate.as_ref().map(|e| {
        [e.weights_bytes, e.gradients_bytes, e.optimizer_state_bytes, e.activations_bytes + e.workspace_bytes]
    });
    (Some(measured), estimate)
}

/// A binary unit and its divisor for a largest value of `max` bytes.
fn byte_unit(max: u64) -> (&'static str, f64) {
    if max >= 1 << 30 {
        ("GiB", (1u64 << 30) as f64)
    } else if max >= 1 << 20 {
        ("MiB", (1u64 << 20) as f64)
    } else {
        ("KiB", 1024.0)
    }
}

/// The memory breakdown of one series: per batch size, the measured bar (left) and the estimate (pale, right).
pub(super) fn memory(spec: &str, index: usize, s: &Series<'_>) -> Result<Plot, ReportError> {
    let id = format!("memory-{}-{index}", slug(spec));
    let title = format!("Memory breakdown per batch size: {spec} ({})", s.label);
    let groups: Vec<(usize, Option<Parts>, Option<Parts>)> = s
        .points
        .iter()
        .map(|p| {
            let (m, e) = memory_parts(p);
            (p.batch, m, e)
        })
        .filter(|(_, m, e)| m.is_some() || e.is_some())
        .collect();
    let max_total =
        groups.iter().flat_map(|(_, m, e)| [m, e]).flatten().map(|v| v.iter().sum::<u64>()).max().unwrap_or(0);
    let (unit, div) = byte_unit(max_total);
    let ymax = (max_total as f64 / div * 1.08).max(1e-9);
    let n = groups.len().max(1);
    let segments = Segments::of(n);
    let labels: Vec<String> = groups.iter().map(|(b, _, _)| b.to_string()).collect();
    let notes: Vec<String> = if s
        .points
        .iter()
        .any(|p| p.first_metrics().is_some_and(|m| m.memory.measured.activations_and_workspace_bytes.is_none()))
    {
        vec!["Measured activations + workspace: not available (the backend reports no allocator peak).".into()]
    } else {
        Vec::new()
    };
    let mut entries: Vec<(String, Mark)> =
        MEMORY_PARTS.iter().enumerate().map(|(k, n)| (n.to_string(), Mark::Block(color(k)))).collect();
    entries.push(("pale: estimate".into(), Mark::PaleBlock(color(7))));
    let legend = Legend::new(entries, WIDTH);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend.height)).into_drawing_area();
        let (upper, lower) = chart_and_legend(&root).map_err(plot_err(&id))?;
        let mut chart = panel_chart(&upper, format!("{spec} · {}", s.label), false)
            .build_cartesian_2d(segments.range().into_segmented(), 0.0..ymax)
            .map_err(plot_err(&id))?;
        let label_fmt = |v: &SegmentValue<usize>| segments.label(&labels, v);
        chart
            .configure_mesh()
            .max_light_lines(1)
            .disable_x_mesh()
            .x_desc("batch size")
            .y_desc(format!("memory ({unit})"))
            .x_labels(segments.ticks())
            .x_label_formatter(&label_fmt)
            .y_label_formatter(&|y| tick(*y))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, LABEL_SIZE + 1))
            .draw()
            .map_err(plot_err(&id))?;
        // Two bars share a segment: the measured one in its left half, the estimate in its right half.
        let segment = chart.plotting_area().dim_in_pixel().0 / n as u32;
        let (outer, inner) = (segment / 8, segment / 2 + 1);
        for part in 0..MEMORY_PARTS.len() {
            let c = color(part);
            let mut rects = Vec::new();
            for (i, (_, measured, estimate)) in groups.iter().enumerate() {
                for (bar, pale) in [(measured, false), (estimate, true)] {
                    let Some(v) = bar else { continue };
                    let below: u64 = v[..part].iter().sum();
                    let (y0, y1) = (below as f64 / div, (below + v[part]) as f64 / div);
                    let style = if pale { c.mix(0.4).filled() } else { c.filled() };
                    let mut r = Rectangle::new([(segments.start(i), y0), (segments.end(i), y1)], style);
                    let (left, right) = if pale { (inner, outer) } else { (outer, inner) };
                    r.set_margin(0, 0, left, right);
                    rects.push(r);
                }
            }
            chart.draw_series(rects).map_err(plot_err(&id))?;
        }
        legend.draw(&lower).map_err(plot_err(&id))?;
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::Memory, svg, notes))
}

/// Phase shares of one spec: a stacked horizontal bar per configuration, the first configuration on top.
pub(super) fn phases(spec: &str, configs: &[&ConfigRow<'_>], varying: Varying) -> Result<Plot, ReportError> {
    let id = format!("phases-{}", slug(spec));
    let title = format!("Phase shares of an iteration: {spec}");
    let rows: Vec<(String, [f64; 6])> = configs
        .iter()
        .map(|c| {
            let mark = if c.phases_synchronised() { "" } else { " *" };
            (format!("{}{mark}", c.short_label(varying)), Phase::ALL.map(|p| c.phase_share(p).unwrap_or(0.0)))
        })
        .collect();
    let notes = if configs.iter().all(|c| c.phases_synchronised()) {
        Vec::new()
    } else {
        vec!["* Phases timed without synchronising the device: the split is approximate, the total exact.".into()]
    };
    let parts: Vec<(String, RGBColor)> =
        Phase::ALL.iter().enumerate().map(|(k, p)| (p.name().to_string(), color(k))).collect();
    let rows: Vec<(String, Vec<f64>)> = rows.into_iter().map(|(l, v)| (l, v.to_vec())).collect();
    let svg = stacked_rows(&id, spec, &rows, &parts, "share of the iteration (%)")?;
    Ok(finish(id, title, Section::Phases, svg, notes))
}
