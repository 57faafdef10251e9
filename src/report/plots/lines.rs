//! Line panels against the batch size (log2 axis): throughput and utilisation, each point the median over
//! repeats with an error bar from the smallest to the largest repeat.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::super::error::ReportError;
use super::super::model::Spread;
use super::super::model::{ConfigRow, Series};
use super::{CHART_HEIGHT, Legend, Mark, Plot, Section, WIDTH};
use super::{chart_and_legend, color, draw_count_mesh, draw_marked_line, finish, log2_range, panel_chart, slug};

/// x range on a log2 batch axis covering all batch sizes, with some room.
fn batch_range(series: &[Series<'_>]) -> (f64, f64) {
    let batches = series.iter().flat_map(|s| s.points.iter().map(|p| p.batch as f64));
    let lo = batches.clone().fold(f64::INFINITY, f64::min).max(1.0);
    let hi = batches.fold(0.0, f64::max).max(lo);
    log2_range(lo, hi)
}

/// A curve: points `(batch, spread)` and how it is drawn.
struct Curve {
    points: Vec<(f64, Spread)>,
    mark: Mark,
}

impl Curve {
    fn of<'a>(points: &[ConfigRow<'a>], mark: Mark, f: impl Fn(&ConfigRow<'a>) -> Option<Spread>) -> Self {
        Self { points: points.iter().filter_map(|p| f(p).map(|s| (p.batch as f64, s))).collect(), mark }
    }
    fn top(&self) -> f64 {
        self.points.iter().map(|(_, s)| s.max.max(s.median)).fold(0.0, f64::max)
    }
}

/// Draw a panel: a caption, a log2 batch axis against `0..ymax`, the curves with their error bars, red crosses
/// on the axis at `ooms`, and the legend below.
fn draw_panel(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    y_desc: &str,
    (xlo, xhi, ymax): (f64, f64, f64),
    curves: &[Curve],
    ooms: &[f64],
    legend: &Legend,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| format!("{e:?}");
    let (upper, lower) = chart_and_legend(root).map_err(e)?;
    let mut chart = panel_chart(&upper, caption, false)
        .build_cartesian_2d((xlo..xhi).log_scale().base(2.0), 0.0..ymax)
        .map_err(e)?;
    draw_count_mesh(&mut chart, "batch size", y_desc)?;
    for curve in curves {
        let pts: Vec<(f64, f64)> = curve.points.iter().map(|(x, s)| (*x, s.median)).collect();
        let (c, dashed) = match curve.mark {
            Mark::Dashed(c) => (c, true),
            Mark::Line(c) | Mark::Block(c) | Mark::PaleBlock(c) => (c, false),
            Mark::Cross => continue,
        };
        draw_marked_line(&mut chart, &pts, c, dashed)?;
        // Error bars: a vertical line from the smallest to the largest repeat, with caps.
        let bars: Vec<(f64, f64, f64)> = curve
            .points
            .iter()
            .filter_map(|(x, s)| s.interval().filter(|(lo, hi)| hi > lo).map(|(lo, hi)| (*x, lo, hi)))
            .collect();
        let style = c.stroke_width(1);
        chart
            .draw_series(bars.iter().map(|(x, lo, hi)| PathElement::new(vec![(*x, *lo), (*x, *hi)], style)))
            .map_err(e)?;
        for end in [1, 2] {
            chart
                .draw_series(bars.iter().map(|b| {
                    let y = if end == 1 { b.1 } else { b.2 };
                    EmptyElement::at((b.0, y)) + PathElement::new(vec![(-4, 0), (4, 0)], style)
                }))
                .map_err(e)?;
        }
    }
    chart.draw_series(ooms.iter().map(|x| Cross::new((*x, 0.0), 5, RED.stroke_width(2)))).map_err(e)?;
    legend.draw(&lower).map_err(e)?;
    root.present().map_err(e)
}

/// Throughput against batch size, one curve per series.
pub(super) fn throughput(spec: &str, series: &[Series<'_>]) -> Result<Plot, ReportError> {
    let id = format!("throughput-{}", slug(spec));
    let title = format!("Throughput vs batch size: {spec}");
    let curves: Vec<Curve> = series
        .iter()
        .enumerate()
        .map(|(i, s)| Curve::of(&s.points, Mark::Line(color(i)), ConfigRow::samples_per_s_spread))
        .collect();
    let ooms: Vec<f64> =
        series.iter().flat_map(|s| s.points.iter().filter(|p| p.out_of_memory()).map(|p| p.batch as f64)).collect();
    let mut entries: Vec<(String, Mark)> =
        series.iter().enumerate().map(|(i, s)| (s.label.clone(), Mark::Line(color(i)))).collect();
    if !ooms.is_empty() {
        entries.push(("out of memory".into(), Mark::Cross));
    }
    let legend = Legend::new(entries, WIDTH);
    let ymax = (curves.iter().map(Curve::top).fold(0.0, f64::max) * 1.1).max(1e-9);
    let (xlo, xhi) = batch_range(series);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend.height)).into_drawing_area();
        draw_panel(&root, spec, "samples / s", (xlo, xhi, ymax), &curves, &ooms, &legend)
            .map_err(|message| ReportError::Plot { plot: id.clone(), message })?;
    }
    Ok(finish(id, title, Section::Throughput, svg, Vec::new()))
}

/// GPU busy time (solid) and FLOP utilisation (dashed) against batch size, per series.
pub(super) fn utilization(spec: &str, series: &[Series<'_>]) -> Result<Plot, ReportError> {
    let id = format!("utilization-{}", slug(spec));
    let title = format!("GPU and FLOP utilisation vs batch size: {spec}");
    let mut entries = Vec::new();
    let mut curves = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let gpu = Curve::of(&s.points, Mark::Line(c), ConfigRow::gpu_utilization_spread);
        if !gpu.points.is_empty() {
            entries.push((format!("GPU busy · {}", s.label), gpu.mark));
            curves.push(gpu);
        }
        let percent = |p: &ConfigRow<'_>| -> Option<Spread> {
            p.flop_fraction_spread().map(|s| Spread {
                median: s.median * 100.0,
                min: s.min * 100.0,
                max: s.max * 100.0,
                n: s.n,
            })
        };
        let flop = Curve::of(&s.points, Mark::Dashed(c), percent);
        if !flop.points.is_empty() {
            entries.push((format!("FLOP of peak · {}", s.label), flop.mark));
            curves.push(flop);
        }
    }
    let mut notes: Vec<String> =
        series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.gpu_unavailable_reason())).collect();
    notes.sort();
    notes.dedup();
    let notes: Vec<String> =
        notes.into_iter().map(|r| format!("GPU utilisation not measured: {}.", r.trim_end_matches('.'))).collect();
    let legend = Legend::new(entries, WIDTH);
    let ymax = (curves.iter().map(Curve::top).fold(0.0, f64::max) * 1.2).clamp(1.0, 105.0);
    let (xlo, xhi) = batch_range(series);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend.height)).into_drawing_area();
        draw_panel(&root, spec, "% (GPU busy / FLOP of peak)", (xlo, xhi, ymax), &curves, &[], &legend)
            .map_err(|message| ReportError::Plot { plot: id.clone(), message })?;
    }
    Ok(finish(id, title, Section::Utilization, svg, notes))
}
