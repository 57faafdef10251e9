//! SVG plots of a report, drawn with plotters' SVG backend (text becomes `<text>` elements: no fonts needed).
//!
//! Each plot is an SVG document whose first child is a `<title>`, so it can be found in a DOM by its title.

use plotters::prelude::*;

use super::{ConfigRow, ReportError, ReportModel, Series};

/// One drawn plot.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Identifier: file stem of the SVG and HTML element id (`throughput-resnet50`).
    pub id: String,
    /// Title, also the SVG's `<title>`.
    pub title: String,
    /// The SVG document.
    pub svg: String,
    /// One sentence saying what is plotted and how it was computed.
    pub caption: String,
    /// Which section of the report it belongs to.
    pub section: Section,
}

/// Report sections plots are grouped under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// Throughput against batch size.
    Throughput,
    /// GPU and FLOP utilisation against batch size.
    Utilization,
    /// Memory breakdown.
    Memory,
    /// Step-time distribution.
    StepTimes,
    /// Phase shares.
    Phases,
}

impl Section {
    /// Every section, in report order.
    pub const ALL: [Section; 5] =
        [Section::Throughput, Section::Utilization, Section::Memory, Section::StepTimes, Section::Phases];
    /// Section heading.
    pub fn heading(self) -> &'static str {
        match self {
            Section::Throughput => "Throughput vs batch size",
            Section::Utilization => "GPU and FLOP utilisation vs batch size",
            Section::Memory => "Memory breakdown per batch size",
            Section::StepTimes => "Step-time distribution",
            Section::Phases => "Phase shares",
        }
    }
    /// Anchor id of the section.
    pub fn anchor(self) -> &'static str {
        match self {
            Section::Throughput => "throughput",
            Section::Utilization => "utilization",
            Section::Memory => "memory",
            Section::StepTimes => "step-times",
            Section::Phases => "phases",
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

const WIDTH: u32 = 760;
const FONT: &str = "sans-serif";

/// A file-name-safe form of a name.
pub fn slug(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}

fn plot_err<E: std::fmt::Debug>(id: &str) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Plot { plot: id.to_string(), message: format!("{e:?}") }
}

/// Insert `<title>` as the first child of the SVG root.
fn with_title(svg: String, title: &str) -> String {
    let escaped = super::html::escape(title);
    match svg.find('>') {
        Some(i) => format!("{}\n<title>{escaped}</title>{}", &svg[..=i], &svg[i + 1..]),
        None => svg,
    }
}

fn finish(id: String, title: String, section: Section, svg: String) -> Plot {
    let svg = with_title(svg, &title);
    let caption = match section {
        Section::Throughput => "Steady-state samples per second (median over repeats) against the global batch size.",
        Section::Utilization => {
            "Solid: mean NVML GPU busy time; dashed: achieved FLOP/s (analysis FLOPs x throughput) over the \
             device peak. Median over repeats."
        }
        Section::Memory => {
            "Per batch size, the backend's measured breakdown (activations + workspace = allocator peak minus \
             weights, gradients and optimizer state) next to the static analysis' estimate."
        }
        Section::StepTimes => "Steady-state step times of all repeats pooled (warm-up and MSER-5 transient removed).",
        Section::Phases => "Mean share of each phase of an iteration (first repeat of each configuration).",
    };
    Plot { id, title, svg, section, caption: caption.to_string() }
}

/// Every plot of a report, in section order.
pub fn all_plots(model: &ReportModel<'_>) -> Result<Vec<Plot>, ReportError> {
    let mut plots = Vec::new();
    let specs = model.specs();
    for spec in &specs {
        let series = model.series_of(spec);
        if series.iter().any(|s| s.points.iter().any(|p| p.samples_per_s().is_some())) {
            plots.push(throughput_plot(spec, &series)?);
            plots.push(utilization_plot(spec, &series)?);
        }
        for (i, s) in series.iter().enumerate() {
            if s.points.iter().any(|p| p.first_metrics().is_some()) {
                plots.push(memory_plot(spec, i, s)?);
            }
        }
        let configs: Vec<&ConfigRow<'_>> =
            model.configs.iter().filter(|c| &c.spec == spec && !c.pooled_step_times().is_empty()).collect();
        if !configs.is_empty() {
            plots.push(step_time_plot(spec, &configs)?);
        }
    }
    let phased: Vec<&ConfigRow<'_>> = model.configs.iter().filter(|c| c.first_metrics().is_some()).collect();
    if !phased.is_empty() {
        plots.push(phase_plot(&phased)?);
    }
    plots.sort_by_key(|p| p.section);
    Ok(plots)
}

/// x range on a log2 batch axis covering all batch sizes, with some room.
fn batch_range(series: &[Series<'_>]) -> (f64, f64) {
    let batches = series.iter().flat_map(|s| s.points.iter().map(|p| p.batch as f64));
    let lo = batches.clone().fold(f64::INFINITY, f64::min).max(1.0);
    let hi = batches.fold(0.0, f64::max).max(lo);
    (lo / 1.5, hi * 1.5)
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
    /// A red cross.
    Cross,
}

const LEGEND_ROW: i32 = 18;

/// Height of a legend with `rows` rows below a chart.
fn legend_height(rows: usize) -> u32 {
    if rows == 0 { 0 } else { 12 + LEGEND_ROW as u32 * rows as u32 }
}

/// Draw a legend (entries, then grey notes) into `area`, one row each, starting at the left of the plot.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(String, Mark)],
    notes: &[String],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let x = 80;
    for (i, (label, mark)) in entries.iter().enumerate() {
        let y = 6 + LEGEND_ROW * i as i32 + LEGEND_ROW / 2;
        match *mark {
            Mark::Line(c) => {
                area.draw(&PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2)))?;
                area.draw(&Circle::new((x + 11, y), 3, c.filled()))?;
            }
            Mark::Dashed(c) => {
                area.draw(&PathElement::new(vec![(x, y), (x + 7, y)], c.stroke_width(2)))?;
                area.draw(&PathElement::new(vec![(x + 15, y), (x + 22, y)], c.stroke_width(2)))?;
                area.draw(&TriangleMarker::new((x + 11, y), 4, c.filled()))?;
            }
            Mark::Block(c) => area.draw(&Rectangle::new([(x + 5, y - 6), (x + 17, y + 6)], c.filled()))?,
            Mark::Cross => area.draw(&Cross::new((x + 11, y), 5, RED.stroke_width(2)))?,
        }
        area.draw(&Text::new(label.clone(), (x + 30, y - 7), (FONT, 13).into_font()))?;
    }
    for (j, note) in notes.iter().enumerate() {
        let y = 6 + LEGEND_ROW * (entries.len() + j) as i32 + 2;
        area.draw(&Text::new(note.clone(), (x, y), (FONT, 12).into_font().color(&BLACK.mix(0.6))))?;
    }
    Ok(())
}

fn throughput_plot(spec: &str, series: &[Series<'_>]) -> Result<Plot, ReportError> {
    let id = format!("throughput-{}", slug(spec));
    let title = format!("Throughput vs batch size: {spec}");
    let ymax = series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.samples_per_s())).fold(0.0, f64::max);
    let (xlo, xhi) = batch_range(series);
    // Batch sizes that ran out of memory: a cross on the axis.
    let ooms: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().filter(|p| p.out_of_memory()).map(|p| (p.batch as f64, 0.0)))
        .collect();
    let mut legend: Vec<(String, Mark)> =
        series.iter().enumerate().map(|(i, s)| (s.label.clone(), Mark::Line(color(i)))).collect();
    if !ooms.is_empty() {
        legend.push(("out of memory".into(), Mark::Cross));
    }
    let lh = legend_height(legend.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 400 + lh)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let (upper, lower) = root.split_vertically(400);
        let mut chart = ChartBuilder::on(&upper)
            .caption(&title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xlo..xhi).log_scale().base(2.0), 0.0..(ymax * 1.1).max(1e-9))
            .map_err(plot_err(&id))?;
        chart
            .configure_mesh()
            .max_light_lines(2)
            .x_desc("batch size")
            .y_desc("samples / s")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| super::fmt_sig(*y))
            .draw()
            .map_err(plot_err(&id))?;
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            let pts: Vec<(f64, f64)> =
                s.points.iter().filter_map(|p| p.samples_per_s().map(|v| (p.batch as f64, v))).collect();
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(plot_err(&id))?;
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled()))).map_err(plot_err(&id))?;
        }
        chart.draw_series(ooms.iter().map(|p| Cross::new(*p, 6, RED.stroke_width(2)))).map_err(plot_err(&id))?;
        draw_legend(&lower, &legend, &[]).map_err(plot_err(&id))?;
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::Throughput, svg))
}

fn utilization_plot(spec: &str, series: &[Series<'_>]) -> Result<Plot, ReportError> {
    let id = format!("utilization-{}", slug(spec));
    let title = format!("GPU and FLOP utilisation vs batch size: {spec}");
    let (xlo, xhi) = batch_range(series);
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().flat_map(|p| [p.gpu_utilization_percent(), p.flop_fraction().map(|f| f * 100.0)]))
        .flatten()
        .fold(0.0, f64::max);
    let ymax = (top * 1.2).clamp(1.0, 105.0);
    let mut legend = Vec::new();
    let mut curves: Vec<(Vec<(f64, f64)>, Mark)> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let gpu: Vec<(f64, f64)> =
            s.points.iter().filter_map(|p| p.gpu_utilization_percent().map(|v| (p.batch as f64, v))).collect();
        if !gpu.is_empty() {
            legend.push((format!("GPU busy · {}", s.label), Mark::Line(c)));
            curves.push((gpu, Mark::Line(c)));
        }
        let flop: Vec<(f64, f64)> =
            s.points.iter().filter_map(|p| p.flop_fraction().map(|v| (p.batch as f64, v * 100.0))).collect();
        if !flop.is_empty() {
            legend.push((format!("FLOP of peak · {}", s.label), Mark::Dashed(c)));
            curves.push((flop, Mark::Dashed(c)));
        }
    }
    let mut notes: Vec<String> =
        series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.gpu_unavailable_reason())).collect();
    notes.sort();
    notes.dedup();
    let notes: Vec<String> = notes.into_iter().map(|r| format!("GPU utilisation not measured: {r}")).collect();
    let lh = legend_height(legend.len() + notes.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 400 + lh)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let (upper, lower) = root.split_vertically(400);
        let mut chart = ChartBuilder::on(&upper)
            .caption(&title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xlo..xhi).log_scale().base(2.0), 0.0..ymax)
            .map_err(plot_err(&id))?;
        chart
            .configure_mesh()
            .max_light_lines(2)
            .x_desc("batch size")
            .y_desc("% (GPU busy / FLOP of peak)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(plot_err(&id))?;
        for (pts, mark) in &curves {
            match *mark {
                Mark::Dashed(c) => {
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 6, 4, c.stroke_width(2)))
                        .map_err(plot_err(&id))?;
                    chart
                        .draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 5, c.filled())))
                        .map_err(plot_err(&id))?;
                }
                Mark::Line(c) | Mark::Block(c) => {
                    chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(plot_err(&id))?;
                    chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled()))).map_err(plot_err(&id))?;
                }
                Mark::Cross => {}
            }
        }
        draw_legend(&lower, &legend, &notes).map_err(plot_err(&id))?;
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::Utilization, svg))
}

/// Memory categories of the stacked bars: (legend, colour index).
const MEMORY_PARTS: [&str; 4] = ["weights", "gradients", "optimizer state", "activations + workspace"];

/// Measured and estimated breakdown of one configuration, bytes per category of [`MEMORY_PARTS`].
/// A measured breakdown without an allocator peak has no activations + workspace figure; it is drawn as 0 and
/// the plot says so.
fn memory_parts(c: &ConfigRow<'_>) -> (Option<[u64; 4]>, Option<[u64; 4]>) {
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

fn memory_plot(spec: &str, index: usize, s: &Series<'_>) -> Result<Plot, ReportError> {
    let id = format!("memory-{}-{index}", slug(spec));
    let title = format!("Memory breakdown per batch size: {spec} ({})", s.label);
    // Bars: for each batch size, measured then estimated.
    let mut bars: Vec<(String, [u64; 4])> = Vec::new();
    for p in &s.points {
        let (measured, estimate) = memory_parts(p);
        if let Some(m) = measured {
            bars.push((format!("b{} measured", p.batch), m));
        }
        if let Some(e) = estimate {
            bars.push((format!("b{} estimated", p.batch), e));
        }
    }
    let max_total = bars.iter().map(|(_, v)| v.iter().sum::<u64>()).max().unwrap_or(0);
    let (unit, div) = if max_total >= 1 << 30 {
        ("GiB", (1u64 << 30) as f64)
    } else if max_total >= 1 << 20 {
        ("MiB", (1u64 << 20) as f64)
    } else {
        ("KiB", 1024.0)
    };
    let ymax = (max_total as f64 / div * 1.08).max(1e-9);
    let n = bars.len().max(1);
    let labels: Vec<String> = bars.iter().map(|(l, _)| l.clone()).collect();
    let mut svg = String::new();
    {
        let notes: Vec<String> = if s
            .points
            .iter()
            .any(|p| p.first_metrics().is_some_and(|m| m.memory.measured.activations_and_workspace_bytes.is_none()))
        {
            vec!["measured activations + workspace: not available (the backend reports no allocator peak)".into()]
        } else {
            Vec::new()
        };
        let lh = legend_height(MEMORY_PARTS.len() + notes.len());
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 420 + lh)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let (upper, lower) = root.split_vertically(420);
        let mut chart = ChartBuilder::on(&upper)
            .caption(&title, (FONT, 16))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((0..n.saturating_sub(1)).into_segmented(), 0.0..ymax)
            .map_err(plot_err(&id))?;
        let label_fmt = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .max_light_lines(2)
            .disable_x_mesh()
            .y_desc(format!("memory ({unit})"))
            .x_labels(n)
            .x_label_formatter(&label_fmt)
            .x_label_style((FONT, 11))
            .draw()
            .map_err(plot_err(&id))?;
        for part in 0..MEMORY_PARTS.len() {
            let c = color(part);
            let rects: Vec<Rectangle<(SegmentValue<usize>, f64)>> = bars
                .iter()
                .enumerate()
                .map(|(i, (_, v))| {
                    let below: u64 = v[..part].iter().sum();
                    let y0 = below as f64 / div;
                    let y1 = (below + v[part]) as f64 / div;
                    let mut r =
                        Rectangle::new([(SegmentValue::Exact(i), y0), (SegmentValue::Exact(i + 1), y1)], c.filled());
                    r.set_margin(0, 0, 8, 8);
                    r
                })
                .collect();
            chart.draw_series(rects).map_err(plot_err(&id))?;
        }
        let legend: Vec<(String, Mark)> =
            MEMORY_PARTS.iter().enumerate().map(|(k, n)| (n.to_string(), Mark::Block(color(k)))).collect();
        draw_legend(&lower, &legend, &notes).map_err(plot_err(&id))?;
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::Memory, svg))
}

fn step_time_plot(spec: &str, configs: &[&ConfigRow<'_>]) -> Result<Plot, ReportError> {
    let id = format!("step-times-{}", slug(spec));
    let title = format!("Step-time distribution: {spec}");
    let boxes: Vec<(String, Quartiles)> = configs
        .iter()
        .map(|c| {
            let ms: Vec<f64> = c.pooled_step_times().iter().map(|s| s * 1e3).collect();
            (c.label(), Quartiles::new(&ms))
        })
        .collect();
    let xmax = boxes.iter().map(|(_, q)| q.values()[4] as f64).fold(0.0, f64::max);
    let xmin = boxes.iter().map(|(_, q)| q.values()[0] as f64).fold(f64::INFINITY, f64::min).min(xmax);
    let pad = ((xmax - xmin) * 0.1).max(xmax * 0.02).max(1e-6);
    let n = boxes.len();
    let height = 110 + 34 * n as u32;
    let labels: Vec<String> = boxes.iter().map(|(l, _)| l.clone()).collect();
    let label_width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(10) as u32 * 7 + 10;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH.max(label_width + 400), height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width)
            .build_cartesian_2d(
                ((xmin - pad).max(0.0) as f32)..((xmax + pad) as f32),
                (0..n.saturating_sub(1)).into_segmented(),
            )
            .map_err(plot_err(&id))?;
        let label_fmt = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .max_light_lines(2)
            .disable_y_mesh()
            .x_desc("step time (ms); box = quartiles, whiskers = 1.5 IQR")
            .y_labels(n)
            .y_label_formatter(&label_fmt)
            .y_label_style((FONT, 11))
            .draw()
            .map_err(plot_err(&id))?;
        chart
            .draw_series(boxes.iter().enumerate().map(|(i, (_, q))| {
                Boxplot::new_horizontal(SegmentValue::CenterOf(i), q).width(18).style(color(i).stroke_width(2))
            }))
            .map_err(plot_err(&id))?;
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::StepTimes, svg))
}

/// Phase names of the stacked bars.
const PHASES: [&str; 6] = ["data", "forward", "backward", "comm", "optimizer", "other"];

fn phase_plot(configs: &[&ConfigRow<'_>]) -> Result<Plot, ReportError> {
    let id = "phase-shares".to_string();
    let title = "Phase shares of an iteration".to_string();
    let rows: Vec<(String, [f64; 6], bool)> = configs
        .iter()
        .filter_map(|c| {
            let p = &c.first_metrics()?.phases;
            let shares =
                [p.data.share, p.forward.share, p.backward.share, p.comm.share, p.optimizer.share, p.other.share];
            let label = if p.synchronised { c.label() } else { format!("{} (not synchronised)", c.label()) };
            Some((label, shares.map(|s| if s.is_finite() { s.max(0.0) } else { 0.0 }), p.synchronised))
        })
        .collect();
    let n = rows.len();
    let height = 130 + 30 * n as u32;
    let labels: Vec<String> = rows.iter().map(|(l, _, _)| l.clone()).collect();
    let label_width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(10) as u32 * 7 + 10;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH.max(label_width + 420), height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(&id))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width)
            .margin_right(120)
            .build_cartesian_2d(0.0..100.0, (0..n.saturating_sub(1)).into_segmented())
            .map_err(plot_err(&id))?;
        let label_fmt = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .max_light_lines(2)
            .disable_y_mesh()
            .x_desc("share of the iteration (%)")
            .y_labels(n)
            .y_label_formatter(&label_fmt)
            .y_label_style((FONT, 11))
            .draw()
            .map_err(plot_err(&id))?;
        for (k, name) in PHASES.iter().enumerate() {
            let c = color(k);
            let rects: Vec<Rectangle<(f64, SegmentValue<usize>)>> = rows
                .iter()
                .enumerate()
                .map(|(i, (_, shares, _))| {
                    let total: f64 = shares.iter().sum::<f64>().max(1e-12);
                    let x0 = shares[..k].iter().sum::<f64>() / total * 100.0;
                    let x1 = x0 + shares[k] / total * 100.0;
                    let mut r =
                        Rectangle::new([(x0, SegmentValue::Exact(i)), (x1, SegmentValue::Exact(i + 1))], c.filled());
                    r.set_margin(5, 5, 0, 0);
                    r
                })
                .collect();
            chart.draw_series(rects).map_err(plot_err(&id))?;
            // Legend in the right margin, outside the bars.
            let (w, _) = root.dim_in_pixel();
            let (x, y) = (w as i32 - 110, 50 + 20 * k as i32);
            root.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], c.filled())).map_err(plot_err(&id))?;
            root.draw(&Text::new(*name, (x + 18, y), (FONT, 13).into_font())).map_err(plot_err(&id))?;
        }
        root.present().map_err(plot_err(&id))?;
    }
    Ok(finish(id, title, Section::Phases, svg))
}
