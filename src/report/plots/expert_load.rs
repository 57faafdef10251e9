//! Expert-load panels: for each configuration of a mixture-of-experts model, a heat map of the tokens each
//! expert computed per step, one row per MoE layer (and `all`, every layer summed, when there are several),
//! each cell coloured by the expert's load over its row's mean: blue below, white even, red above (2x and more
//! the deepest red).

use plotters::prelude::*;

use super::super::error::ReportError;
use super::super::expert_load::of_config;
use super::super::model::ConfigRow;
use super::{Legend, Mark, Plot, Section, Segments, WIDTH, finish, plot_err, row_chart, slug};
use crate::format;
use crate::result::LayerLoad;

const IDLE: RGBColor = RGBColor(49, 54, 149);
const EVEN: RGBColor = RGBColor(255, 255, 255);
const HOT: RGBColor = RGBColor(165, 0, 38);

fn mix(a: RGBColor, b: RGBColor, t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let c = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * t).round() as u8;
    RGBColor(c(a.0, b.0), c(a.1, b.1), c(a.2, b.2))
}

/// The colour of a load `ratio` times its row's mean: 0 blue, 1 white, 2 and above red.
pub(super) fn heat(ratio: f64) -> RGBColor {
    if !ratio.is_finite() {
        return EVEN;
    }
    if ratio <= 1.0 { mix(IDLE, EVEN, ratio) } else { mix(EVEN, HOT, ratio - 1.0) }
}

/// Each expert's load over its row's mean (all 1 for a row with no assignment).
fn ratios(l: &LayerLoad) -> Vec<f64> {
    let n = l.tokens_per_expert.len().max(1) as f64;
    let mean = l.tokens_per_expert.iter().sum::<f64>() / n;
    l.tokens_per_expert.iter().map(|&t| if mean > 0.0 { t / mean } else { 1.0 }).collect()
}

/// The heat map of one configuration; `None` when it recorded no routing.
pub(super) fn heat_map(spec: &str, c: &ConfigRow<'_>, label: &str) -> Result<Option<Plot>, ReportError> {
    let Some(load) = of_config(c) else { return Ok(None) };
    let id = format!("expert-load-{}-{}", slug(spec), slug(&c.config));
    let title = format!("Tokens per expert per step: {spec} {label}");
    let mut rows: Vec<&LayerLoad> = load.layers.iter().collect();
    if rows.len() > 1 {
        rows.push(&load.all_layers);
    }
    let experts = rows.iter().map(|l| l.tokens_per_expert.len()).max().unwrap_or(1).max(1);
    // Labels from the bottom up: the first layer on top.
    let labels: Vec<String> = rows.iter().rev().map(|l| l.layer.clone()).collect();
    let legend = Legend::new(
        vec![
            ("idle".into(), Mark::Block(heat(0.0))),
            ("even (the row's mean)".into(), Mark::Block(mix(EVEN, HOT, 0.08))),
            ("2x the mean or more".into(), Mark::Block(heat(2.0))),
        ],
        WIDTH,
    );
    let chart_height = 70 + 18 * rows.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, chart_height + legend.height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let (upper, lower) = root.split_vertically(chart_height);
        let mut chart = row_chart(&upper, &id, spec, 0.0..experts as f64, &labels, "expert")?;
        let segments = Segments::of(rows.len());
        for (i, l) in rows.iter().rev().enumerate() {
            let cells: Vec<Rectangle<(f64, SegmentValue<usize>)>> = ratios(l)
                .into_iter()
                .enumerate()
                .map(|(e, r)| {
                    let corners = [(e as f64, segments.start(i)), (e as f64 + 1.0, segments.end(i))];
                    let mut rect = Rectangle::new(corners, heat(r).filled());
                    rect.set_margin(1, 1, 0, 0);
                    rect
                })
                .collect();
            chart.draw_series(cells).map_err(plot_err(&id))?;
        }
        legend.draw(&lower).map_err(plot_err(&id))?;
        root.present().map_err(plot_err(&id))?;
    }
    let a = &load.all_layers;
    let figures = |l: &LayerLoad| {
        format!(
            "CV {} (worst step {}), busiest expert {} of the assignments, {} dropped per step",
            l.cv_mean.map_or_else(|| "-".into(), format::sig),
            l.cv_max.map_or_else(|| "-".into(), format::sig),
            l.busiest_share_mean.map_or_else(|| "-".into(), format::percent),
            format::sig(l.dropped_per_step)
        )
    };
    let note = format!("{} steps; {}: {}.", load.steps, a.layer, figures(a));
    Ok(Some(finish(id, title, Section::ExpertLoad, svg, vec![note])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_runs_from_blue_through_white_to_red() {
        assert_eq!(heat(0.0), IDLE);
        assert_eq!(heat(1.0), EVEN);
        assert_eq!(heat(2.0), HOT);
        assert_eq!(heat(5.0), HOT);
        assert_eq!(heat(f64::NAN), EVEN);
        let half = heat(0.5);
        assert!(half.0 > IDLE.0 && half.0 < EVEN.0);
    }
}
