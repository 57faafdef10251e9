//! SVG plots of a report as compact panels for a grid of small multiples, drawn with plotters' SVG backend
//! (text becomes `<text>` elements: no fonts needed). One file per kind of chart: `lines.rs` (throughput and
//! utilisation against batch size, with error bars over repeats), `bars.rs` (stacked memory and phase bars),
//! `boxes.rs` (step-time distributions), `scaling.rs` (throughput and scaling efficiency against world size),
//! `predicted.rs` (predicted against measured step times, data / compute / comm shares of both), `target.rs`
//! (evaluation curves of runs with a training target), `expert_load.rs` (MoE tokens per expert per layer); this
//! file holds what they share, the legend included.
//!
//! Each plot is an SVG document whose first child is a `<title>`, so it can be found in a DOM by its title.

mod bars;
mod boxes;
mod expert_load;
mod lines;
mod predicted;
mod scaling;
mod target;

use plotters::coord::Shift;
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordusize};
use plotters::prelude::*;

use super::error::ReportError;
use super::model::ReportModel;
use crate::format;

/// One drawn plot.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Identifier: file stem of the SVG and HTML element id (`throughput-resnet50`).
    pub id: String,
    /// Title, also the SVG's `<title>`.
    pub title: String,
    /// The SVG document.
    pub svg: String,
    /// Notes about this plot alone (what was not measured and why), shown under it.
    pub notes: Vec<String>,
    /// Which section of the report it belongs to.
    pub section: Section,
}

/// Report sections plots are grouped under, each a grid with one panel per spec (memory: per series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// Throughput against batch size.
    Throughput,
    /// Throughput and scaling efficiency against world size (reports with data-parallel runs).
    Scaling,
    /// GPU and FLOP utilisation against batch size.
    Utilization,
    /// Phase shares.
    Phases,
    /// Predicted against measured step times and shares (runs that recorded a prediction).
    Predicted,
    /// Memory breakdown.
    Memory,
    /// Step-time distribution.
    StepTimes,
    /// Evaluation curves of runs with a training target.
    TimeToTarget,
    /// Tokens per expert per MoE layer (runs of mixture-of-experts models that recorded their routing).
    ExpertLoad,
}

impl Section {
    /// Every section, in report order.
    pub const ALL: [Section; 9] = [
        Section::Throughput,
        Section::Scaling,
        Section::Utilization,
        Section::Phases,
        Section::Predicted,
        Section::Memory,
        Section::StepTimes,
        Section::TimeToTarget,
        Section::ExpertLoad,
    ];
    /// Section heading.
    pub fn heading(self) -> &'static str {
        match self {
            Section::Throughput => "Throughput vs batch size",
            Section::Scaling => "Scaling vs world size",
            Section::Utilization => "GPU and FLOP utilisation vs batch size",
            Section::Phases => "Phase shares",
            Section::Predicted => "Predicted vs measured",
            Section::Memory => "Memory breakdown per batch size",
            Section::StepTimes => "Step-time distribution",
            Section::TimeToTarget => "Time to accuracy",
            Section::ExpertLoad => "Expert load",
        }
    }
    /// Anchor id of the section.
    pub fn anchor(self) -> &'static str {
        match self {
            Section::Throughput => "throughput",
            Section::Scaling => "scaling",
            Section::Utilization => "utilization",
            Section::Phases => "phases",
            Section::Predicted => "predicted",
            Section::Memory => "memory",
            Section::StepTimes => "step-times",
            Section::TimeToTarget => "time-to-target",
            Section::ExpertLoad => "expert-load",
        }
    }
    /// One sentence saying what the section's plots show and how they were computed.
    pub fn description(self) -> &'static str {
        match self {
            Section::Throughput => {
                "Steady-state samples per second against the global batch size: points are the median over \
                 repeats, error bars span the smallest to the largest repeat; a red cross marks a batch size \
                 that ran out of memory."
            }
            Section::Scaling => {
                "Data-parallel runs per strategy: solid, steady-state samples per second (left axis); dashed, \
                 scaling efficiency (right axis), the samples per second over the world size times those of the \
                 world-size-1 configuration of the same sweep (medians over repeats), which each line starts from."
            }
            Section::Utilization => {
                "Solid: mean NVML GPU busy time; dashed: achieved FLOP/s (analysis FLOPs x throughput) over the \
                 device peak. Median over repeats, error bars from the smallest to the largest repeat."
            }
            Section::Phases => {
                "Share of each phase of an iteration per configuration (data, forward, backward, comm, \
                 optimizer, other; median over repeats)."
            }
            Section::Predicted => {
                "The performance model's prediction each run recorded (T_data + T_compute + T_comm on the hardware \
                 profile of its machine) against what it measured: left, predicted step time against the measured \
                 median (log axes; dashed, y = x; shaded, within 25%); right, PAI's data / compute / comm shares \
                 of the iteration per configuration, measured (with the time no phase accounts for) above predicted."
            }
            Section::Memory => {
                "Per batch size, the backend's measured breakdown (activations + workspace = allocator peak \
                 minus weights, gradients and optimizer state; left bar) next to the static analysis' estimate \
                 (pale right bar)."
            }
            Section::StepTimes => {
                "Steady-state step times of all repeats pooled (warm-up and MSER-5 transient removed): the box \
                 spans the quartiles, the thick mark is the median, whiskers reach the furthest step within 1.5 \
                 IQR of the box, dots are the steps beyond (far ones are counted at the right edge, +n)."
            }
            Section::TimeToTarget => {
                "Runs with a training target: each evaluation of the held-out split (accuracy, or loss for a loss \
                 target) against seconds since the first training step, evaluations included, one line per \
                 repeat; the dashed line is the target."
            }
            Section::ExpertLoad => {
                "Mixture-of-experts runs (first repeat of each configuration): the tokens each expert computed per \
                 measured step, one row per MoE layer (and `all`, every layer summed per expert), each cell \
                 coloured by the expert's load over its row's mean (blue idle, white even, red twice the mean or \
                 more); the table gives each layer's coefficient of variation, busiest share, drops and \
                 load-balancing loss."
            }
        }
    }
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Width of a panel, pixels; the HTML grid scales panels to its column width.
const WIDTH: u32 = 420;
/// Height of the chart part of a line or memory panel (its legend comes below).
const CHART_HEIGHT: u32 = 260;
const FONT: &str = "sans-serif";
/// Font size of a panel's caption (plotters draws sizes at 1/1.24 of the number given: 18 is 14.5 px).
const CAPTION_SIZE: u32 = 18;
/// Font size of axis labels and legends (11.3 px).
const LABEL_SIZE: u32 = 14;

/// The two parts of a panel whose legend comes below its chart, `root` filled white first: the chart's area
/// (the top [`CHART_HEIGHT`] pixels) and the legend's.
type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;
fn chart_and_legend<'b>(root: &Area<'b>) -> Result<(Area<'b>, Area<'b>), DrawingAreaErrorKind<std::io::Error>> {
    root.fill(&WHITE)?;
    Ok(root.split_vertically(CHART_HEIGHT))
}

/// A chart builder on `area` with every panel's caption font, margins and axis label areas; `right_axis` leaves
/// room for a secondary y axis on the right.
fn panel_chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: impl AsRef<str>,
    right_axis: bool,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder.caption(caption, (FONT, CAPTION_SIZE)).margin(8).x_label_area_size(40).y_label_area_size(52);
    if right_axis {
        builder.right_y_label_area_size(44);
    } else {
        builder.margin_right(16);
    }
    builder
}

/// A chart of values against a log2 count axis (batch size, world size).
type CountChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, RangedCoordf64>>;

/// Draw the mesh of a [`CountChart`]: light lines, the axes described as `x_desc` and `y_desc`, counts below.
fn draw_count_mesh(chart: &mut CountChart<'_, '_>, x_desc: &str, y_desc: &str) -> Result<(), String> {
    chart
        .configure_mesh()
        .max_light_lines(1)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE + 1))
        .x_label_formatter(&|x| count_tick(*x))
        .y_label_formatter(&|y| tick(*y))
        .draw()
        .map_err(|e| format!("{e:?}"))
}

/// Draw `pts` on a [`CountChart`] in colour `c`: a solid line with dots, or (`dashed`) a dashed line with
/// triangles.
fn draw_marked_line(
    chart: &mut CountChart<'_, '_>,
    pts: &[(f64, f64)],
    c: RGBColor,
    dashed: bool,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| format!("{e:?}");
    if dashed {
        chart.draw_series(DashedLineSeries::new(pts.to_vec(), 5, 4, c.stroke_width(2))).map_err(e)?;
        chart.draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 4, c.filled()))).map_err(e)?;
    } else {
        chart.draw_series(LineSeries::new(pts.to_vec(), c.stroke_width(2))).map_err(e)?;
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled()))).map_err(e)?;
    }
    Ok(())
}

/// A file-name-safe form of a name.
pub fn slug(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}

fn plot_err<E: std::fmt::Debug>(id: &str) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Plot { plot: id.to_string(), message: format!("{e:?}") }
}

/// Insert `<title>` as the first child of the SVG root.
fn with_title(svg: String, title: &str) -> String {
    let escaped = super::escape::escape(title);
    match svg.find('>') {
        Some(i) => format!("{}\n<title>{escaped}</title>{}", &svg[..=i], &svg[i + 1..]),
        None => svg,
    }
}

fn finish(id: String, title: String, section: Section, svg: String, notes: Vec<String>) -> Plot {
    let svg = with_title(svg, &title);
    Plot { id, title, svg, section, notes }
}

/// Every plot of a report, in section order, then spec order.
pub fn all_plots(model: &ReportModel<'_>) -> Result<Vec<Plot>, ReportError> {
    let mut plots = Vec::new();
    let predictions = super::predicted::table(model);
    for spec in &model.specs() {
        let series = model.series_of(spec);
        if series.iter().any(|s| s.points.iter().any(|p| p.samples_per_s().is_some())) {
            plots.push(lines::throughput(spec, &series)?);
        }
        if model.configs_of(spec).any(|c| c.world_size > 1)
            && let Some(p) = scaling::scaling(model, spec)?
        {
            plots.push(p);
            if let Some(p) = scaling::held(model, spec)? {
                plots.push(p);
            }
        }
        if series.iter().any(|s| s.points.iter().any(|p| p.gpu_utilization_percent().or(p.flop_fraction()).is_some())) {
            plots.push(lines::utilization(spec, &series)?);
        }
        for (i, s) in series.iter().enumerate() {
            if s.points.iter().any(|p| p.first_metrics().is_some()) {
                plots.push(bars::memory(spec, i, s)?);
            }
        }
        let configs: Vec<_> = model.configs_of(spec).filter(|c| c.first_metrics().is_some()).collect();
        if !configs.is_empty() {
            plots.push(bars::phases(spec, &configs, model.varying)?);
        }
        let predicted: Vec<_> = predictions.rows_of(spec).collect();
        if !predicted.is_empty() {
            let labels: Vec<String> = predicted
                .iter()
                .map(|r| {
                    model
                        .configs_of(spec)
                        .find(|c| c.config == r.config)
                        .map_or_else(|| r.config.clone(), |c| c.short_label(model.varying))
                })
                .collect();
            plots.push(predicted::scatter(spec, &predicted, &labels)?);
            plots.push(predicted::shares(spec, &predicted, &labels)?);
        }
        let timed: Vec<_> = model.configs_of(spec).filter(|c| !c.pooled_step_times().is_empty()).collect();
        if !timed.is_empty() {
            plots.push(boxes::step_times(spec, &timed, model.varying)?);
        }
        let targeted: Vec<_> = model.configs_of(spec).filter(|c| c.targets().next().is_some()).collect();
        if !targeted.is_empty() {
            plots.push(target::time_to_target(spec, &targeted)?);
        }
        for c in model.configs_of(spec) {
            if let Some(p) = expert_load::heat_map(spec, c, &c.short_label(model.varying))? {
                plots.push(p);
            }
        }
    }
    plots.sort_by_key(|p| p.section); // stable: spec order within a section
    Ok(plots)
}

/// How an entry of a legend is drawn.
#[derive(Debug, Clone, Copy)]
enum Mark {
    /// A solid line with a dot.
    Line(RGBColor),
    /// A dashed line with a triangle.
    Dashed(RGBColor),
    /// A filled square.
    Block(RGBColor),
    /// A pale filled square.
    PaleBlock(RGBColor),
    /// A red cross.
    Cross,
}

/// A legend laid out left to right, wrapping into rows, below a chart.
struct Legend {
    /// Entries with their top-left corner.
    placed: Vec<(String, Mark, (i32, i32))>,
    /// Height in pixels.
    height: u32,
}

const LEGEND_ROW: i32 = 18;
const LEGEND_LEFT: i32 = 12;

/// Approximate width of a label in pixels: sans-serif glyphs average about 0.6 of the drawn font size.
fn text_width(s: &str) -> i32 {
    (s.chars().count() as f64 * LABEL_SIZE as f64 / 1.24 * 0.6).ceil() as i32
}

/// An axis tick: at most three significant digits, no trailing zeros, thousands as `k` and millions as `M`.
fn tick(v: f64) -> String {
    let a = v.abs();
    let (v, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format::sig(v);
    let s =
        if s.contains('.') && !s.contains('e') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    format!("{s}{suffix}")
}

impl Legend {
    fn new(entries: Vec<(String, Mark)>, width: u32) -> Self {
        let right = width as i32 - LEGEND_LEFT;
        let (mut x, mut y) = (LEGEND_LEFT, 4);
        let mut placed = Vec::new();
        for (label, mark) in entries {
            let w = 24 + text_width(&label) + 14;
            if x > LEGEND_LEFT && x + w > right {
                x = LEGEND_LEFT;
                y += LEGEND_ROW;
            }
            placed.push((label, mark, (x, y)));
            x += w;
        }
        let height = if placed.is_empty() { 0 } else { (y + LEGEND_ROW + 4) as u32 };
        Self { placed, height }
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        for (label, mark, (x, top)) in &self.placed {
            let (x, y) = (*x, top + LEGEND_ROW / 2);
            match *mark {
                Mark::Line(c) => {
                    area.draw(&PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)))?;
                    area.draw(&Circle::new((x + 9, y), 3, c.filled()))?;
                }
                Mark::Dashed(c) => {
                    area.draw(&PathElement::new(vec![(x, y), (x + 5, y)], c.stroke_width(2)))?;
                    area.draw(&PathElement::new(vec![(x + 13, y), (x + 18, y)], c.stroke_width(2)))?;
                    area.draw(&TriangleMarker::new((x + 9, y), 4, c.filled()))?;
                }
                Mark::Block(c) => area.draw(&Rectangle::new([(x + 3, y - 5), (x + 13, y + 5)], c.filled()))?,
                Mark::PaleBlock(c) => {
                    area.draw(&Rectangle::new([(x + 3, y - 5), (x + 13, y + 5)], c.mix(0.4).filled()))?
                }
                Mark::Cross => area.draw(&Cross::new((x + 9, y), 4, RED.stroke_width(2)))?,
            }
            area.draw(&Text::new(label.clone(), (x + 24, y - 6), (FONT, LABEL_SIZE).into_font()))?;
        }
        Ok(())
    }
}

/// A segmented axis of `n` categories (batch sizes, configurations): plotters' segments on `0..n - 1`, one per
/// category. A single category gets three segments, its bar spanning them all and its label on the middle one:
/// one segment on `0..0` has no span, so its bar's edges would map onto one pixel and its margins make its width
/// negative.
#[derive(Debug, Clone, Copy)]
struct Segments {
    n: usize,
}

impl Segments {
    fn of(n: usize) -> Self {
        Self { n: n.max(1) }
    }
    /// The axis' range.
    fn range(self) -> std::ops::Range<usize> {
        if self.n == 1 { 0..2 } else { 0..self.n - 1 }
    }
    /// Ticks to ask the mesh for (one per segment).
    fn ticks(self) -> usize {
        if self.n == 1 { 3 } else { self.n }
    }
    /// The near edge of category `i`.
    fn start(self, i: usize) -> SegmentValue<usize> {
        SegmentValue::Exact(if self.n == 1 { 0 } else { i })
    }
    /// The far edge of category `i`.
    fn end(self, i: usize) -> SegmentValue<usize> {
        if self.n == 1 { SegmentValue::Last } else { SegmentValue::Exact(i + 1) }
    }
    /// The centre of category `i`.
    fn mid(self, i: usize) -> SegmentValue<usize> {
        SegmentValue::CenterOf(if self.n == 1 { 1 } else { i })
    }
    /// The tick label of a segment: its category's label at its centre, nothing at its edges.
    fn label(self, labels: &[String], v: &SegmentValue<usize>) -> String {
        match v {
            SegmentValue::CenterOf(j) if self.n == 1 => (*j == 1).then(|| labels.first().cloned()).flatten(),
            SegmentValue::CenterOf(j) => labels.get(*j).cloned(),
            _ => None,
        }
        .unwrap_or_default()
    }
}

/// A log2 axis' range for values from `lo` to `hi` (batch sizes, world sizes): a margin of 1.5x either side,
/// or, where the values span less than 2x (a single batch size), 2x either side, so the axis holds at least
/// two octaves, its ticks fall on powers of two and the points sit inside it.
fn log2_range(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = (lo.max(1e-9), hi.max(lo));
    if hi < 2.0 * lo { (lo / 2.0, hi * 2.0) } else { (lo / 1.5, hi * 1.5) }
}

/// The tick label of a log2 axis of counts: whole values only (a light tick between powers of two, 9.6 or
/// 11.2, has no label rather than a rounded one).
fn count_tick(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 * x.abs().max(1.0) { format!("{x:.0}") } else { String::new() }
}

/// The coordinates of a chart with one row per configuration: a linear x axis, one segment per row.
type RowCoord = Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordusize>>;

/// A horizontal chart on `area` with one row per label (phase bars, step-time boxes): `x` on the x axis, described
/// as `x_desc`, rows named by `labels` from the bottom up, its caption and mesh drawn.
fn row_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    id: &str,
    caption: &str,
    x: std::ops::Range<f64>,
    labels: &[String],
    x_desc: &str,
) -> Result<ChartContext<'a, SVGBackend<'b>, RowCoord>, ReportError> {
    let segments = Segments::of(labels.len());
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, CAPTION_SIZE))
        .margin(8)
        .margin_right(16)
        .x_label_area_size(40)
        .y_label_area_size(label_area_width(labels))
        .build_cartesian_2d(x, segments.range().into_segmented())
        .map_err(plot_err(id))?;
    let label_fmt = |v: &SegmentValue<usize>| segments.label(labels, v);
    chart
        .configure_mesh()
        .max_light_lines(1)
        .disable_y_mesh()
        .x_desc(x_desc)
        .y_labels(segments.ticks())
        .y_label_formatter(&label_fmt)
        .x_label_formatter(&|x| tick(*x))
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE + 1))
        .draw()
        .map_err(plot_err(id))?;
    Ok(chart)
}

/// One stacked horizontal bar of a [`stacked_rows`] panel: its label and one value per part (any unit: each bar
/// is scaled to 100%).
type StackedRow = (String, Vec<f64>);

/// A panel of stacked horizontal bars, each scaled to 100% (phase shares, data / compute / comm shares): one row
/// per entry of `rows`, the first on top, one colour per part; parts below 0.05% in every row are left out of the
/// legend.
fn stacked_rows(
    id: &str,
    caption: &str,
    rows: &[StackedRow],
    parts: &[(String, RGBColor)],
    x_desc: &str,
) -> Result<String, ReportError> {
    let shown: Vec<usize> =
        (0..parts.len()).filter(|k| rows.iter().any(|(_, v)| v.get(*k).is_some_and(|x| *x >= 0.0005))).collect();
    let legend = Legend::new(shown.iter().map(|k| (parts[*k].0.clone(), Mark::Block(parts[*k].1))).collect(), WIDTH);
    let labels: Vec<String> = rows.iter().rev().map(|(l, _)| l.clone()).collect();
    let chart_height = 70 + 22 * rows.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, chart_height + legend.height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(id))?;
        let (upper, lower) = root.split_vertically(chart_height);
        let mut chart = row_chart(&upper, id, caption, 0.0..100.0, &labels, x_desc)?;
        let segments = Segments::of(rows.len());
        for (k, (_, c)) in parts.iter().enumerate() {
            let rects: Vec<Rectangle<(f64, SegmentValue<usize>)>> = rows
                .iter()
                .rev()
                .enumerate()
                .map(|(i, (_, v))| {
                    let total: f64 = v.iter().sum::<f64>().max(1e-12);
                    let x0 = v.iter().take(k).sum::<f64>() / total * 100.0;
                    let x1 = x0 + v.get(k).copied().unwrap_or(0.0) / total * 100.0;
                    let mut r = Rectangle::new([(x0, segments.start(i)), (x1, segments.end(i))], c.filled());
                    r.set_margin(4, 4, 0, 0);
                    r
                })
                .collect();
            chart.draw_series(rects).map_err(plot_err(id))?;
        }
        legend.draw(&lower).map_err(plot_err(id))?;
        root.present().map_err(plot_err(id))?;
    }
    Ok(svg)
}

fn label_area_width(labels: &[String]) -> u32 {
    labels.iter().map(|l| text_width(l)).max().unwrap_or(40).clamp(40, WIDTH as i32 / 2) as u32 + 12
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
