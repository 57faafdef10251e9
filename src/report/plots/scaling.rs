//! The scaling panels of a spec with data-parallel runs, against the world size (log2 axis), one colour per
//! strategy (and batch size, precision or placement where a report has several), each line starting from the
//! world-size-1 configuration of the sweep: throughput (solid, left axis) and scaling efficiency (dashed, right
//! axis); and what one worker held (weights + gradients + optimizer state, solid; the optimizer state, dashed).

use plotters::prelude::*;

use super::super::model::{ConfigRow, ReportModel};
use super::super::scaling::{efficiency_of, reference_of};
use super::{CHART_HEIGHT, FONT, LABEL_SIZE, Legend, Mark, Plot, Section, WIDTH};
use super::{chart_and_legend, color, draw_count_mesh, draw_marked_line, finish, panel_chart, slug, tick};

/// One line of a panel: its label and `(world size, solid value, dashed value)` points by world size.
struct Line {
    label: String,
    points: Vec<(f64, Option<f64>, Option<f64>)>,
}

/// The configurations of one line: its label and, by world size, the world-size-1 reference first.
struct Group<'m, 'a> {
    label: String,
    members: Vec<&'m ConfigRow<'a>>,
}

/// The lines of a spec: configurations with more than one worker grouped by strategy, precision, batch size and
/// placement, each preceded by its world-size-1 reference (efficiency 1 by definition).
fn lines(model: &ReportModel<'_>, spec: &str) -> Vec<Line> {
    groups(model, spec)
        .into_iter()
        .map(|g| {
            let points = g
                .members
                .iter()
                .map(|c| {
                    let efficiency =
                        if c.world_size == 1 { Some(1.0) } else { efficiency_of(model, c).and_then(|e| e.value()) };
                    (c.world_size as f64, c.samples_per_s(), efficiency)
                })
                // The reference starts a line only when it has a throughput.
                .filter(|p| p.0 > 1.0 || p.1.is_some())
                .collect();
            Line { label: g.label, points }
        })
        .collect()
}

/// MiB one worker held against world size: weights + gradients + optimizer state, and the optimizer state.
fn held_lines(model: &ReportModel<'_>, spec: &str) -> Vec<Line> {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    groups(model, spec)
        .into_iter()
        .map(|g| {
            let points = g
                .members
                .iter()
                .map(|c| {
                    let held = c.held_per_rank();
                    (c.world_size as f64, held.map(|(w, g, o)| mib(w + g + o)), held.map(|(_, _, o)| mib(o)))
                })
                .collect();
            Line { label: g.label, points }
        })
        .collect()
}

fn groups<'m, 'a>(model: &'m ReportModel<'a>, spec: &'m str) -> Vec<Group<'m, 'a>> {
    let scaled: Vec<&ConfigRow<'_>> = model.configs_of(spec).filter(|c| c.world_size > 1).collect();
    let key = |c: &ConfigRow<'_>| (c.strategy(), c.precision, c.batch, c.placement());
    let mut keys: Vec<_> = scaled.iter().map(|c| key(c)).collect();
    keys.sort();
    keys.dedup();
    let differs = |f: &dyn Fn(&ConfigRow<'_>) -> String| {
        scaled.iter().any(|c| f(c) != scaled.first().map_or(String::new(), |s| f(s)))
    };
    let (batches, precisions, placements) = (
        differs(&|c| c.batch.to_string()),
        differs(&|c| c.precision.as_str().to_string()),
        differs(&|c| c.placement()),
    );
    keys.into_iter()
        .map(|k| {
            let mut members: Vec<&ConfigRow<'_>> = scaled.iter().copied().filter(|c| key(c) == k).collect();
            members.sort_by_key(|c| c.world_size);
            if let Some(reference) = members.first().and_then(|c| reference_of(model, c).ok()) {
                members.insert(0, reference);
            }
            let (strategy, precision, batch, placement) = k;
            let mut label = vec![strategy];
            if batches {
                label.push(format!("b{batch}"));
            }
            if precisions {
                label.push(precision.as_str().to_string());
            }
            if placements {
                label.push(placement);
            }
            Group { label: label.join(" · "), members }
        })
        .collect()
}

/// Throughput and scaling efficiency against world size for one spec; `None` when no point has a throughput.
pub(super) fn scaling(model: &ReportModel<'_>, spec: &str) -> Result<Option<Plot>, super::super::error::ReportError> {
    let lines = lines(model, spec);
    if !lines.iter().any(|l| l.points.iter().any(|p| p.1.is_some())) {
        return Ok(None);
    }
    let id = format!("scaling-{}", slug(spec));
    let title = format!("Throughput and scaling efficiency vs world size: {spec}");
    let (xlo, xhi, ymax) = extent(&lines);
    let emax =
        (lines.iter().flat_map(|l| l.points.iter().filter_map(|p| p.2)).fold(1.0, f64::max) * 100.0 * 1.1).max(110.0);
    let mut entries = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        entries.push((format!("samples/s · {}", l.label), Mark::Line(color(i))));
        if l.points.iter().any(|p| p.2.is_some()) {
            entries.push((format!("efficiency · {}", l.label), Mark::Dashed(color(i))));
        }
    }
    let legend = Legend::new(entries, WIDTH);
    render(id, title, &legend, |root| draw(root, spec, (xlo, xhi, ymax, emax), &lines, &legend)).map(Some)
}

/// What one worker held against world size for one spec; `None` when no run says.
pub(super) fn held(model: &ReportModel<'_>, spec: &str) -> Result<Option<Plot>, super::super::error::ReportError> {
    let lines = held_lines(model, spec);
    if !lines.iter().any(|l| l.points.iter().any(|p| p.0 > 1.0 && p.1.is_some())) {
        return Ok(None);
    }
    let id = format!("held-{}", slug(spec));
    let title = format!("Memory held per worker vs world size: {spec}");
    let (xlo, xhi, ymax) = extent(&lines);
    let mut entries = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        entries.push((format!("weights + gradients + optimizer · {}", l.label), Mark::Line(color(i))));
        entries.push((format!("optimizer state · {}", l.label), Mark::Dashed(color(i))));
    }
    let legend = Legend::new(entries, WIDTH);
    render(id, title, &legend, |root| draw_held(root, spec, (xlo, xhi, ymax), &lines, &legend)).map(Some)
}

/// The log2 world-size range of `lines` and the top of their solid values, with 10% room above.
fn extent(lines: &[Line]) -> (f64, f64, f64) {
    let worlds = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (xlo, xhi) = (worlds.clone().fold(f64::INFINITY, f64::min).max(1.0), worlds.fold(1.0, f64::max));
    let (xlo, xhi) = super::log2_range(xlo, xhi);
    let ymax = (lines.iter().flat_map(|l| l.points.iter().filter_map(|p| p.1)).fold(0.0, f64::max) * 1.1).max(1e-9);
    (xlo, xhi, ymax)
}

/// Panel `id` of the scaling section: `draw` fills an SVG of the report's width, with room for `legend`.
fn render(
    id: String,
    title: String,
    legend: &Legend,
    draw: impl FnOnce(&super::Area<'_>) -> Result<(), String>,
) -> Result<Plot, super::super::error::ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend.height)).into_drawing_area();
        draw(&root).map_err(|message| super::super::error::ReportError::Plot { plot: id.clone(), message })?;
    }
    Ok(finish(id, title, Section::Scaling, svg, Vec::new()))
}

fn draw_held(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    (xlo, xhi, ymax): (f64, f64, f64),
    lines: &[Line],
    legend: &Legend,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| format!("{e:?}");
    let (upper, lower) = chart_and_legend(root).map_err(e)?;
    let mut chart = panel_chart(&upper, caption, false)
        .build_cartesian_2d((xlo..xhi).log_scale().base(2.0), 0.0..ymax)
        .map_err(e)?;
    draw_count_mesh(&mut chart, "world size (workers)", "MiB held per worker")?;
    for (i, l) in lines.iter().enumerate() {
        let total: Vec<(f64, f64)> = l.points.iter().filter_map(|p| p.1.map(|v| (p.0, v))).collect();
        draw_marked_line(&mut chart, &total, color(i), false)?;
        let opt: Vec<(f64, f64)> = l.points.iter().filter_map(|p| p.2.map(|v| (p.0, v))).collect();
        draw_marked_line(&mut chart, &opt, color(i), true)?;
    }
    legend.draw(&lower).map_err(e)?;
    root.present().map_err(e)
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    (xlo, xhi, ymax, emax): (f64, f64, f64, f64),
    lines: &[Line],
    legend: &Legend,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| format!("{e:?}");
    let (upper, lower) = chart_and_legend(root).map_err(e)?;
    let mut chart = panel_chart(&upper, caption, true)
        .build_cartesian_2d((xlo..xhi).log_scale().base(2.0), 0.0..ymax)
        .map_err(e)?
        .set_secondary_coord((xlo..xhi).log_scale().base(2.0), 0.0..emax);
    draw_count_mesh(&mut chart, "world size (workers)", "samples / s")?;
    chart
        .configure_secondary_axes()
        .y_desc("scaling efficiency %")
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE + 1))
        .y_label_formatter(&|y| tick(*y))
        .draw()
        .map_err(e)?;
    for (i, l) in lines.iter().enumerate() {
        let c = color(i);
        let pts: Vec<(f64, f64)> = l.points.iter().filter_map(|p| p.1.map(|t| (p.0, t))).collect();
        draw_marked_line(&mut chart, &pts, c, false)?;
        let eff: Vec<(f64, f64)> = l.points.iter().filter_map(|p| p.2.map(|v| (p.0, v * 100.0))).collect();
        chart.draw_secondary_series(DashedLineSeries::new(eff.clone(), 5, 4, c.stroke_width(2))).map_err(e)?;
        chart.draw_secondary_series(eff.iter().map(|p| TriangleMarker::new(*p, 4, c.filled()))).map_err(e)?;
    }
    legend.draw(&lower).map_err(e)?;
    root.present().map_err(e)
}
