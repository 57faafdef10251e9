//! Box-plot panels: the steady-state step-time distribution of each configuration of a spec, repeats pooled.
//! Tukey's box plot: the box spans the quartiles, the whiskers reach the furthest step within 1.5 IQR of the
//! box (the same fences as the result's outlier count), dots mark the steps beyond them; steps far beyond every
//! whisker are counted at the right edge instead of stretching the axis.

use plotters::prelude::*;

use super::super::error::ReportError;
use super::super::model::ConfigRow;
use super::super::model::Varying;
use super::{FONT, LABEL_SIZE, Plot, Section, WIDTH};
use super::{Segments, color, finish, plot_err, row_chart, slug, text_width};
use crate::stats::{quantile_sorted, sorted};

/// The five figures of one box, and the steps beyond its whiskers, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
struct TukeyBox {
    low: f64,
    q1: f64,
    median: f64,
    q3: f64,
    high: f64,
    outliers: Vec<f64>,
}

impl TukeyBox {
    /// The box of some samples; `None` when there are none.
    fn of(samples: &[f64]) -> Option<Self> {
        let s = sorted(samples);
        let (q1, median, q3) = (quantile_sorted(&s, 0.25)?, quantile_sorted(&s, 0.5)?, quantile_sorted(&s, 0.75)?);
        let (lo_fence, hi_fence) = (q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1));
        let inside = || s.iter().copied().filter(|x| (lo_fence..=hi_fence).contains(x));
        let low = inside().next().unwrap_or(q1);
        let high = inside().next_back().unwrap_or(q3);
        let outliers = s.iter().copied().filter(|x| !(lo_fence..=hi_fence).contains(x)).collect();
        Some(Self { low, q1, median, q3, high, outliers })
    }
    fn min(&self) -> f64 {
        self.outliers.iter().copied().fold(self.low, f64::min)
    }
    fn max(&self) -> f64 {
        self.outliers.iter().copied().fold(self.high, f64::max)
    }
}

/// Step-time distributions of one spec: a horizontal box per configuration, the first configuration on top,
/// coloured like its series in the throughput panel.
pub(super) fn step_times(spec: &str, configs: &[&ConfigRow<'_>], varying: Varying) -> Result<Plot, ReportError> {
    let id = format!("step-times-{}", slug(spec));
    let title = format!("Step-time distribution: {spec}");
    let mut series = Vec::new();
    let mut rows: Vec<(String, TukeyBox, RGBColor)> = Vec::new();
    for c in configs {
        let key = c.series_key();
        let i = series.iter().position(|k| *k == key).unwrap_or_else(|| {
            series.push(key);
            series.len() - 1
        });
        let ms: Vec<f64> = c.pooled_step_times().iter().map(|s| s * 1e3).collect();
        if let Some(b) = TukeyBox::of(&ms) {
            rows.push((c.short_label(varying), b, color(i)));
        }
    }
    rows.reverse(); // the y axis counts upwards: the first configuration goes on top
    // The axis ends a little beyond the longest whisker, or the furthest outlier if that is not much further:
    // a few very slow steps (a busy host) would otherwise squeeze every box into a sliver. Outliers beyond the
    // axis are counted at its right edge.
    let whiskers = rows.iter().map(|(_, b, _)| b.high).fold(0.0, f64::max);
    let furthest = rows.iter().map(|(_, b, _)| b.max()).fold(0.0, f64::max);
    let clipped = furthest > whiskers * 1.5;
    let xmax = if clipped { whiskers * 1.15 } else { furthest };
    let xmin = rows.iter().map(|(_, b, _)| b.min()).fold(f64::INFINITY, f64::min).min(xmax);
    let pad = ((xmax - xmin) * 0.05).max(xmax * 0.02).max(1e-6);
    let lo = (xmin - pad).max(0.0);
    // Room at the right for the counts of the outliers beyond the axis.
    let hi = if clipped { xmax + (xmax - lo) * 0.15 } else { xmax + pad };
    let n = rows.len().max(1);
    let labels: Vec<String> = rows.iter().map(|(l, _, _)| l.clone()).collect();
    let height = 80 + 24 * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let mut chart = row_chart(&root, &id, spec, lo..hi, &labels, "step time (ms)")?;
        let segment = chart.plotting_area().dim_in_pixel().1 / n as u32;
        let segments = Segments::of(n);
        let inset = segment.saturating_sub(14) / 2;
        for (i, (_, b, c)) in rows.iter().enumerate() {
            let mid = segments.mid(i);
            let line = c.stroke_width(1);
            let mut body = Rectangle::new([(b.q1, segments.start(i)), (b.q3, segments.end(i))], c.mix(0.25).filled());
            body.set_margin(inset, inset, 0, 0);
            let mut frame = Rectangle::new([(b.q1, segments.start(i)), (b.q3, segments.end(i))], c.stroke_width(1));
            frame.set_margin(inset, inset, 0, 0);
            chart.plotting_area().draw(&body).map_err(plot_err(&id))?;
            chart.plotting_area().draw(&frame).map_err(plot_err(&id))?;
            let whiskers =
                [vec![(b.low, mid.clone()), (b.q1, mid.clone())], vec![(b.q3, mid.clone()), (b.high, mid.clone())]];
            for w in whiskers {
                chart.plotting_area().draw(&PathElement::new(w, line)).map_err(plot_err(&id))?;
            }
            for (x, half, style) in [(b.low, 4, line), (b.high, 4, line), (b.median, 7, c.stroke_width(3))] {
                let tick = EmptyElement::at((x, mid.clone())) + PathElement::new(vec![(0, -half), (0, half)], style);
                chart.plotting_area().draw(&tick).map_err(plot_err(&id))?;
            }
            let (shown, beyond): (Vec<f64>, Vec<f64>) = b.outliers.iter().partition(|x| **x <= xmax);
            chart
                .draw_series(shown.iter().map(|x| Circle::new((*x, mid.clone()), 2, c.stroke_width(1))))
                .map_err(plot_err(&id))?;
            if !beyond.is_empty() {
                let label = format!("+{} ›", beyond.len());
                let offset = -(text_width(&label) + 6);
                let note = EmptyElement::at((hi, mid.clone()))
                    + Text::new(label, (offset, -6), (FONT, LABEL_SIZE).into_font().color(c));
                chart.plotting_area().draw(&note).map_err(plot_err(&id))?;
            }
        }
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::StepTimes, svg, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whiskers_stop_at_the_furthest_step_inside_the_fences() {
        let mut xs: Vec<f64> = (1..=20).map(f64::from).collect();
        xs.push(100.0);
        let b = TukeyBox::of(&xs).unwrap_or_else(|| TukeyBox {
            low: 0.0,
            q1: 0.0,
            median: 0.0,
            q3: 0.0,
            high: 0.0,
            outliers: Vec::new(),
        });
        assert_eq!((b.low, b.q1, b.median, b.q3, b.high), (1.0, 6.0, 11.0, 16.0, 20.0));
        assert_eq!(b.outliers, vec![100.0]);
        assert_eq!((b.min(), b.max()), (1.0, 100.0));
        assert_eq!(TukeyBox::of(&[]), None);
    }
}
