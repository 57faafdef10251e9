//! Time-to-accuracy panels: for a spec whose runs train to a target, the evaluation curve of every repeat of
//! every configuration (accuracy, or the evaluation loss when the target is a loss) against seconds since the
//! first training step, with the target as a dashed horizontal line.

use plotters::prelude::*;

use super::super::error::ReportError;
use super::super::model::ConfigRow;
use super::{CHART_HEIGHT, FONT, LABEL_SIZE, Legend, Mark, Plot, Section, WIDTH};
use super::{chart_and_legend, color, finish, panel_chart, slug, tick};
use trainbench_contract::target::TargetMetric;

/// One curve: its label, colour and `(seconds, value)` points.
type Curve = (String, RGBColor, Vec<(f64, f64)>);

/// The evaluation curves of `configs` (those with a target) against time.
pub(super) fn time_to_target(spec: &str, configs: &[&ConfigRow<'_>]) -> Result<Plot, ReportError> {
    let id = format!("time-to-target-{}", slug(spec));
    let first_target = configs.iter().flat_map(|c| c.runs.iter()).find_map(|r| r.plan.target.clone());
    let metric = first_target.as_ref().map_or(TargetMetric::Accuracy, |t| t.metric);
    let title = format!("Evaluation {} vs time: {spec}", metric.as_str());
    let mut curves: Vec<Curve> = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        for (k, t) in c.targets().enumerate() {
            let pts: Vec<(f64, f64)> = t
                .curve
                .iter()
                .filter_map(|p| {
                    let y = match metric {
                        TargetMetric::Accuracy => p.accuracy?,
                        TargetMetric::Loss => p.loss,
                        TargetMetric::Auc => p.auc?,
                    };
                    (y.is_finite() && p.elapsed_s.is_finite()).then_some((p.elapsed_s, y))
                })
                .collect();
            let label = if k == 0 { c.config.clone() } else { String::new() };
            curves.push((label, color(i), pts));
        }
    }
    let xmax = curves.iter().flat_map(|c| c.2.iter().map(|p| p.0)).fold(0.0, f64::max).max(1e-3) * 1.05;
    let target_value = first_target.as_ref().map(|t| t.value);
    let ymax = match metric {
        TargetMetric::Accuracy | TargetMetric::Auc => 1.02,
        TargetMetric::Loss => {
            let top = curves.iter().flat_map(|c| c.2.iter().map(|p| p.1)).fold(target_value.unwrap_or(0.0), f64::max);
            (top * 1.1).max(1e-6)
        }
    };
    let mut entries: Vec<(String, Mark)> =
        curves.iter().filter(|c| !c.0.is_empty()).map(|c| (c.0.clone(), Mark::Line(c.1))).collect();
    if let Some(v) = target_value {
        entries.push((format!("target {v}"), Mark::Dashed(RGBColor(90, 90, 90))));
    }
    let legend = Legend::new(entries, WIDTH);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend.height)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| ReportError::Plot { plot: id.clone(), message: format!("{e:?}") };
        let (upper, lower) = chart_and_legend(&root).map_err(e)?;
        let mut chart = panel_chart(&upper, spec, false).build_cartesian_2d(0.0..xmax, 0.0..ymax).map_err(e)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_desc("seconds since the first step")
            .y_desc(format!("evaluation {}", metric.as_str()))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, LABEL_SIZE + 1))
            .x_label_formatter(&|x| tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .draw()
            .map_err(e)?;
        for (_, c, pts) in &curves {
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(e)?;
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled()))).map_err(e)?;
        }
        if let Some(v) = target_value {
            let grey = RGBColor(90, 90, 90);
            chart
                .draw_series(DashedLineSeries::new(vec![(0.0, v), (xmax, v)], 5, 4, grey.stroke_width(1)))
                .map_err(e)?;
        }
        legend.draw(&lower).map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(finish(id, title, Section::TimeToTarget, svg, Vec::new()))
}
