//! Predicted against measured, per spec: a scatter of each configuration's predicted step time against its
//! measured median (log axes, the y = x line and a +-25% band), and PAI's stacked data / compute / comm shares
//! per configuration, the measured bar above the predicted one.

use plotters::prelude::*;

use super::super::error::ReportError;
use super::super::predicted::{PredictedRow, SHARE_PARTS};
use super::{CHART_HEIGHT, FONT, LABEL_SIZE, Legend, Mark, Plot, Section, WIDTH};
use super::{chart_and_legend, color, finish, panel_chart, slug, stacked_rows, tick};

/// The band drawn around y = x: predictions within 25% of the measurement.
const BAND: f64 = 0.25;

/// Axis range (milliseconds) covering every point with a margin, on a log scale.
fn range_ms(rows: &[&PredictedRow]) -> (f64, f64) {
    let all = rows.iter().flat_map(|r| [r.measured_s, r.predicted_s]).filter(|v| v.is_finite() && *v > 0.0);
    let lo = all.clone().fold(f64::INFINITY, f64::min) * 1e3;
    let hi = all.fold(0.0, f64::max) * 1e3;
    if !(lo.is_finite() && hi > 0.0) {
        return (0.1, 10.0);
    }
    (lo / 2.0, hi * 2.0)
}

/// A log axis' tick label: only values whose leading digit is 1, 2 or 5 are labelled, so a decade holds three.
fn log_tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let lead = (v / 10f64.powf(v.log10().floor())).round();
    if [1.0, 2.0, 5.0, 10.0].contains(&lead) { tick(v) } else { String::new() }
}

/// Predicted against measured step time for one spec's configurations.
pub(super) fn scatter(spec: &str, rows: &[&PredictedRow], labels: &[String]) -> Result<Plot, ReportError> {
    let id = format!("predicted-{}", slug(spec));
    let title = format!("Predicted vs measured step time: {spec}");
    let (lo, hi) = range_ms(rows);
    let legend = Legend::new(
        vec![
            ("configuration".into(), Mark::Line(color(0))),
            ("y = x".into(), Mark::Dashed(color(7))),
            (format!("±{:.0}%", BAND * 100.0), Mark::PaleBlock(color(2))),
        ],
        WIDTH,
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend.height)).into_drawing_area();
        draw(&root, spec, (lo, hi), rows, labels, &legend)
            .map_err(|message| ReportError::Plot { plot: id.clone(), message })?;
    }
    let outside = rows.iter().filter(|r| r.error.abs() > BAND).count();
    let notes = if outside > 0 {
        vec![format!("{outside} of {} configuration(s) outside the ±25% band.", rows.len())]
    } else {
        Vec::new()
    };
    Ok(finish(id, title, Section::Predicted, svg, notes))
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    (lo, hi): (f64, f64),
    rows: &[&PredictedRow],
    labels: &[String],
    legend: &Legend,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| format!("{e:?}");
    let (upper, lower) = chart_and_legend(root).map_err(e)?;
    let mut chart = panel_chart(&upper, caption, false)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(e)?;
    // No grid (the band and the diagonal are the reference); ticks labelled at 1, 2 and 5 of each decade.
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("measured median step (ms)")
        .y_desc("predicted step (ms)")
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE + 1))
        .x_label_formatter(&|x| log_tick(*x))
        .y_label_formatter(&|y| log_tick(*y))
        .draw()
        .map_err(e)?;
    // The band: between y = (1 - 25%) x and y = (1 + 25%) x, sampled along the axis (straight on log axes).
    let xs: Vec<f64> = (0..=32).map(|i| lo * (hi / lo).powf(f64::from(i) / 32.0)).collect();
    let mut band: Vec<(f64, f64)> = xs.iter().map(|x| (*x, (x * (1.0 + BAND)).min(hi))).collect();
    band.extend(xs.iter().rev().map(|x| (*x, (x * (1.0 - BAND)).max(lo))));
    chart.draw_series(std::iter::once(Polygon::new(band, color(2).mix(0.25).filled()))).map_err(e)?;
    chart.draw_series(DashedLineSeries::new(vec![(lo, lo), (hi, hi)], 5, 4, color(7).stroke_width(1))).map_err(e)?;
    let pts: Vec<(f64, f64)> = rows.iter().map(|r| (r.measured_s * 1e3, r.predicted_s * 1e3)).collect();
    chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, color(0).filled()))).map_err(e)?;
    let font = (FONT, LABEL_SIZE - 2).into_font();
    chart
        .draw_series(
            pts.iter().zip(labels).map(|(p, l)| EmptyElement::at(*p) + Text::new(l.clone(), (6, -14), font.clone())),
        )
        .map_err(e)?;
    legend.draw(&lower).map_err(e)?;
    root.present().map_err(e)
}

/// Data / compute / comm shares of one spec's configurations: per configuration the measured bar (with the
/// time no phase accounts for, `other`) above the predicted one.
pub(super) fn shares(spec: &str, rows: &[&PredictedRow], labels: &[String]) -> Result<Plot, ReportError> {
    let id = format!("predicted-shares-{}", slug(spec));
    let title = format!("Data, compute and comm shares, measured and predicted: {spec}");
    let parts: Vec<(String, RGBColor)> =
        SHARE_PARTS.iter().zip([color(0), color(1), color(3), color(5)]).map(|(n, c)| (n.to_string(), c)).collect();
    let bars: Vec<(String, Vec<f64>)> = rows
        .iter()
        .zip(labels)
        .flat_map(|(r, l)| {
            [
                (format!("{l} measured"), r.measured_shares.to_vec()),
                (format!("{l} predicted"), r.predicted_shares.to_vec()),
            ]
        })
        .collect();
    let svg = stacked_rows(&id, spec, &bars, &parts, "share of the iteration (%)")?;
    Ok(finish(id, title, Section::Predicted, svg, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_label_one_two_and_five() {
        let labelled: Vec<String> =
            [0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 2.0, 4.0, 50.0].iter().map(|v| log_tick(*v)).collect();
        assert_eq!(labelled, ["0.1", "0.2", "", "0.5", "", "1", "2", "", "50"]);
    }
}
