//! What the model knows about the device from a profile: the compute rate a kernel of a given size reaches
//! (the datasheet peak, or the calibrated efficiency curve), the memory bandwidth a working set of a given size
//! reaches (the datasheet's, or the calibrated curve from cache-sized to memory-sized vectors) and the
//! per-operation overhead; with a calibration of the backend's training step, the fixed cost of a node in each
//! phase, the optimizer's cost and the rate of unequal matrix products on a grid of sizes.

use trainbench_graph::Precision;

use super::PredictError;
use super::stepcost::OptimizerCost;
use crate::hardware::wire::{Calibration, HardwareFile, KernelPoint, NodePoint};

/// One measured size of an element-wise class: (elements, forward seconds, backward seconds) of one node, net of
/// the per-operation overhead.
type SizePoint = (f64, f64, f64);

/// Which efficiency curve a kernel follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelClass {
    /// Matrix products: linear, matmul, attention, recurrent gates.
    Gemm,
    /// Convolutions.
    Conv,
    /// Convolutions' backward (input and weight gradients together).
    ConvBackward,
}

/// The device as the roofline sees it.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// Peak FLOP/s at the precision predicted.
    pub peak_flop_s: f64,
    /// Memory bandwidth, bytes per second (the calibrated triad when there is one, else the datasheet).
    pub memory_bytes_s: f64,
    /// Calibrated (bytes per call, achieved bytes/s net of overhead) by working set, sorted by bytes; empty
    /// without bandwidth points (every size at `memory_bytes_s`).
    bandwidth: Vec<(f64, f64)>,
    /// Element-wise classes measured: per class, its points sorted by elements.
    elementwise: Vec<(String, Vec<SizePoint>)>,
    /// Fixed seconds per framework operation (0 in datasheet profiles).
    pub op_overhead_s: f64,
    /// Calibrated (FLOPs per call, achieved FLOP/s net of overhead) points per class, sorted by FLOPs.
    gemm: Vec<(f64, f64)>,
    conv: Vec<(f64, f64)>,
    conv_backward: Vec<(f64, f64)>,
    /// Fixed per-node costs measured through the training step, when calibrated.
    pub nodes: Option<NodeCosts>,
    /// Optimizer costs by kind, when calibrated.
    optimizers: Vec<(String, OptimizerCost)>,
    /// Unequal products' rates on a grid, when calibrated at this precision.
    grid: Option<LogGrid>,
    /// Convolutions' rates over channels and pixels (forward, backward), when calibrated at this precision.
    conv_grid: Option<(LogGrid, LogGrid)>,
    /// What layers cost inside the training step beyond their isolated kernels, per byte (0 without a
    /// calibration).
    pub in_step: super::stepcost::InStep,
    /// Whether a linear layer's bias is a pass of its own over the output (the CPU's `addmm` copies the bias
    /// into the output first; on a GPU the product's epilogue adds it).
    pub bias_pass: bool,
}

/// Fixed seconds of one node in the training step's forward and backward phases (`calibration.node`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCosts {
    /// One framework operation of a node (forward, backward).
    pub op: (f64, f64),
    /// A linear layer with bias (forward, backward), its tiny product included.
    pub linear: (f64, f64),
    /// The step's own (forward, backward), once per step.
    pub step: (f64, f64),
    /// What the first node of a kind without a measured cold start of its own costs in each phase beyond the
    /// next ones (forward, backward): the median over the measured kinds (`first-<kind>` points,
    /// [`super::firstnode`]); 0 where none was measured.
    pub first: (f64, f64),
    /// The measured kinds' own first-node costs (forward, backward), by kind.
    pub first_of: Vec<(String, (f64, f64))>,
}

impl NodeCosts {
    /// The first-node cost (forward, backward) of a node of `kind` (its element-wise class, else its operation):
    /// the class's own where measured; a linear layer's or a product's the measured `linear`; another operation
    /// without a class of its own the measured `add` (a plain element-wise kernel); else the median.
    pub fn first_of(&self, kind: &str) -> (f64, f64) {
        let measured = |k: &str| self.first_of.iter().find(|(class, _)| class == k).map(|(_, cost)| *cost);
        let stand_in = match kind {
            "linear" | "matmul" => "linear",
            _ => "add",
        };
        measured(kind).or_else(|| measured(stand_in)).unwrap_or(self.first)
    }

    fn of(c: &Calibration) -> Option<Self> {
        let get = |class: &str| c.node.iter().find(|p| p.class == class).map(|p| (p.forward_s, p.backward_s));
        let firsts: Vec<&NodePoint> = c.node.iter().filter(|p| p.class.starts_with("first-")).collect();
        let median = |f: fn(&NodePoint) -> f64| {
            crate::stats::median(&firsts.iter().map(|p| f(p)).collect::<Vec<_>>()).unwrap_or(0.0)
        };
        Some(Self {
            op: get("elementwise")?,
            linear: get("linear")?,
            step: get("step").unwrap_or((0.0, 0.0)),
            first: (median(|p| p.forward_s), median(|p| p.backward_s)),
            first_of: firsts
                .iter()
                .map(|p| (p.class.trim_start_matches("first-").to_string(), (p.forward_s, p.backward_s)))
                .collect(),
        })
    }
}

/// Framework operations of an attention node (as the roofline counts them).
const ATTENTION_OPS: f64 = 10.0;

/// The distinct values of one coordinate, ascending: a grid's axis.
fn axis(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// Values measured on a full grid of sizes (each axis sorted, ascending): multilinear interpolation of the log
/// value in log sizes, clamped to the grid's ends.
#[derive(Debug, Clone, PartialEq)]
pub struct LogGrid {
    axes: Vec<Vec<f64>>,
    /// Log values, row-major over the axes (the last axis varies fastest).
    log_value: Vec<f64>,
}

impl LogGrid {
    /// The grid through `points` (coordinates, value), when they cover every combination of their coordinates
    /// with positive values.
    pub fn new(points: &[(Vec<f64>, f64)]) -> Option<Self> {
        let dims = points.first()?.0.len();
        let axes: Vec<Vec<f64>> = (0..dims).map(|d| axis(points.iter().map(|p| p.0[d]))).collect();
        let mut log_value = vec![f64::NAN; axes.iter().map(Vec::len).product()];
        for (coords, value) in points {
            let mut idx = 0;
            for (a, x) in axes.iter().zip(coords) {
                idx = idx * a.len() + a.iter().position(|v| v == x)?;
            }
            log_value[idx] = value.ln();
        }
        if axes.iter().any(|a| a.first().is_none_or(|x| *x <= 0.0)) || log_value.iter().any(|r| !r.is_finite()) {
            return None;
        }
        Some(Self { axes, log_value })
    }

    /// The value at `coords` (one per axis).
    pub fn value(&self, coords: &[f64]) -> f64 {
        // Per axis: the lower index and the weight of the upper one, in log size.
        let locate = |a: &Vec<f64>, x: f64| -> (usize, f64) {
            if a.len() < 2 || x <= a[0] {
                return (0, 0.0);
            }
            let last = a.len() - 1;
            if x >= a[last] {
                return (last - 1, 1.0);
            }
            let i = a.partition_point(|v| *v <= x) - 1;
            (i, (x.ln() - a[i].ln()) / (a[i + 1].ln() - a[i].ln()))
        };
        let q: Vec<(usize, f64)> = self.axes.iter().zip(coords).map(|(a, &x)| locate(a, x)).collect();
        let mut acc = 0.0;
        for corner in 0..1usize << q.len() {
            let (mut w, mut idx) = (1.0, 0);
            for (d, &(i, t)) in q.iter().enumerate() {
                let upper = corner >> d & 1 == 1;
                let len = self.axes[d].len();
                idx = idx * len + if upper { (i + 1).min(len - 1) } else { i };
                w *= if upper { t } else { 1.0 - t };
            }
            if w > 0.0 {
                acc += w * self.log_value[idx];
            }
        }
        acc.exp()
    }
}

/// Rates (FLOP/s net of overhead) of `[m x k] x [k x n]` products over m, k, n, at one precision.
fn gemm_grid(c: &Calibration, precision: Precision, overhead_s: f64) -> Option<LogGrid> {
    let points: Vec<(Vec<f64>, f64)> = c
        .gemm_shapes
        .iter()
        .filter(|p| p.precision == precision && p.seconds > 0.0)
        .map(|p| {
            let flops = 2.0 * (p.m * p.k * p.n) as f64;
            (vec![p.m as f64, p.k as f64, p.n as f64], flops / net_of_overhead(p.seconds, overhead_s))
        })
        .collect();
    LogGrid::new(&points)
}

/// Rates (FLOP/s net of overhead) of 3 x 3 convolutions over channels and output pixels, forward and backward
/// (the backward's work is twice the forward's), at one precision.
fn conv_grids(c: &Calibration, precision: Precision, overhead_s: f64) -> Option<(LogGrid, LogGrid)> {
    let pts: Vec<_> =
        c.conv_shapes.iter().filter(|p| p.precision == precision && p.forward_s > 0.0 && p.backward_s > 0.0).collect();
    let flops = |p: &crate::hardware::wire::ConvShapePoint| {
        2.0 * (p.pixels * p.channels * p.channels * p.kernel * p.kernel) as f64
    };
    let grid = |backward: bool| {
        let mut points: Vec<(Vec<f64>, f64)> = pts
            .iter()
            .map(|p| {
                let (work, s) = if backward { (2.0 * flops(p), p.backward_s) } else { (flops(p), p.forward_s) };
                (vec![p.channels as f64, p.pixels as f64], work / net_of_overhead(s, overhead_s))
            })
            .collect();
        // The largest pixel counts are measured for the fewer channels only: a channel count without them keeps
        // the rate of its largest measured size.
        let pixels = axis(points.iter().map(|p| p.0[1]));
        let channels = axis(points.iter().map(|p| p.0[0]));
        for &c in &channels {
            let largest =
                points.iter().filter(|p| p.0[0] == c).max_by(|a, b| a.0[1].total_cmp(&b.0[1])).map(|p| (p.0[1], p.1));
            if let Some((measured, rate)) = largest {
                for &px in pixels.iter().filter(|&&px| px > measured) {
                    points.push((vec![c, px], rate));
                }
            }
        }
        LogGrid::new(&points)
    };
    Some((grid(false)?, grid(true)?))
}

impl DeviceModel {
    /// The model of `profile`'s device at `precision`; refuses a precision the profile has no peak for.
    pub fn new(profile: &HardwareFile, precision: Precision) -> Result<Self, PredictError> {
        let p = &profile.device.peak_tflops;
        let peak = match precision {
            Precision::Fp32 => Some(p.fp32),
            Precision::Fp16 => p.fp16,
            Precision::Bf16 => p.bf16,
        }
        .ok_or_else(|| PredictError::NoPeak { profile: profile.name.clone(), precision: precision.as_str() })?;
        let cal = profile.calibration.as_ref();
        let overhead = cal.map_or(0.0, |c| c.op_overhead_us * 1e-6);
        let memory = cal.map_or(profile.device.memory_bandwidth_gbs, |c| c.triad_gbs) * 1e9;
        let curve = |points: fn(&Calibration) -> &Vec<KernelPoint>| {
            cal.map(|c| curve(points(c), precision, overhead)).unwrap_or_default()
        };
        let mut bandwidth: Vec<(f64, f64)> = cal
            .map(|c| {
                c.bandwidth
                    .iter()
                    .filter(|p| p.bytes > 0.0 && p.seconds > 0.0)
                    .map(|p| (p.bytes, p.bytes / net_of_overhead(p.seconds, overhead)))
                    .collect()
            })
            .unwrap_or_default();
        bandwidth.sort_by(|a, b| a.0.total_cmp(&b.0));
        let nodes = cal.and_then(NodeCosts::of);
        let fixed = nodes.as_ref().map_or((overhead, overhead), |n| n.op);
        // The measured totals, netted below once the model can price what they hold.
        let mut elementwise: Vec<(String, Vec<SizePoint>)> = Vec::new();
        for p in cal.map(|c| c.elementwise.as_slice()).unwrap_or_default().iter().filter(|p| p.elements > 0.0) {
            let point = (p.elements, p.forward_s, p.backward_s);
            match elementwise.iter_mut().find(|(c, _)| *c == p.op) {
                Some((_, points)) => points.push(point),
                None => elementwise.push((p.op.clone(), vec![point])),
            }
        }
        for (_, points) in &mut elementwise {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let optimizers = cal
            .map(|c| {
                super::stepcost::OPTIMIZERS
                    .iter()
                    .filter_map(|k| OptimizerCost::of(&c.optimizer, k).map(|o| ((*k).to_string(), o)))
                    .collect()
            })
            .unwrap_or_default();
        let grid = cal.and_then(|c| gemm_grid(c, precision, overhead));
        let mut model = Self {
            in_step: super::stepcost::InStep::default(),
            bias_pass: profile.device.kind == crate::hardware::wire::DeviceKind::Cpu,
            nodes,
            optimizers,
            grid,
            conv_grid: cal.and_then(|c| conv_grids(c, precision, overhead)),
            peak_flop_s: peak * 1e12,
            memory_bytes_s: memory,
            bandwidth,
            elementwise,
            op_overhead_s: overhead,
            gemm: curve(|c| &c.gemm),
            conv: curve(|c| &c.conv),
            conv_backward: curve(|c| &c.conv_backward),
        };
        model.net_elementwise_of_priced_costs(fixed);
        if let Some(c) = cal.filter(|_| precision == Precision::Fp32) {
            model.in_step = super::stepcost::in_step_excess(c, &model);
        }
        Ok(model)
    }

    /// The element-wise points hold each call's measured total: net of what the model prices on its own, never
    /// negative. Every class: one operation's fixed cost (`fixed`, forward and backward). Attention: its ten
    /// operations and its projections and score products as `roofline` prices them at each measured shape (on the
    /// product grid, else along the GEMM curve as six kernels; backward twice the forward's work). Cross-entropy,
    /// measured beyond the logits' mean and an MSE on it: the model's own price of those added back (the mean
    /// reads the logits, its backward writes their gradient; four operations).
    fn net_elementwise_of_priced_costs(&mut self, fixed: (f64, f64)) {
        let mut classes = std::mem::take(&mut self.elementwise);
        for (class, points) in &mut classes {
            for (elements, ef, eb) in points.iter_mut() {
                let (priced_f, priced_b) = if class.starts_with("attention") {
                    let products = self.measured_attention_products_s(*elements);
                    (products + ATTENTION_OPS * fixed.0, 2.0 * products + ATTENTION_OPS * fixed.1)
                } else {
                    fixed
                };
                *ef = (*ef - priced_f).max(0.0);
                *eb = (*eb - priced_b).max(0.0);
                if class == "cross_entropy" {
                    let mean = self.memory_s(4.0 * *elements);
                    *ef += mean + 4.0 * fixed.0;
                    *eb += mean + 4.0 * fixed.1;
                }
            }
        }
        self.elementwise = classes;
    }

    /// Seconds of the projections and score products of the measured attention of `elements` score elements, as
    /// `roofline` prices them (on the product grid, else along the GEMM curve as six kernels).
    fn measured_attention_products_s(&self, elements: f64) -> f64 {
        let shapes = super::elementwise::measured_attention_products(super::elementwise::attention_batch(elements));
        if self.grid.is_some() {
            shapes.iter().map(|&[m, k, n]| self.gemm_s(m, k, n)).sum()
        } else {
            let flops: f64 = shapes.iter().map(|&[m, k, n]| 2.0 * m * k * n).sum();
            let kernels = shapes.len() as f64;
            kernels * self.compute_s(KernelClass::Gemm, flops / kernels)
        }
    }

    /// Seconds of `flops` of work in one kernel of `class`: along the calibrated curve (log-log
    /// interpolation between measured sizes, flat beyond them) or at peak without one.
    pub fn compute_s(&self, class: KernelClass, flops: f64) -> f64 {
        if flops <= 0.0 {
            return 0.0;
        }
        let conv = if self.conv.is_empty() { &self.gemm } else { &self.conv };
        let curve = match class {
            KernelClass::Gemm => &self.gemm,
            KernelClass::Conv => conv,
            KernelClass::ConvBackward if self.conv_backward.is_empty() => conv,
            KernelClass::ConvBackward => &self.conv_backward,
        };
        flops / interpolate(curve, flops).unwrap_or(self.peak_flop_s)
    }

    /// Seconds of one `[m x k] x [k x n]` product: at the calibrated grid's rate, else along the GEMM curve by
    /// its FLOPs.
    pub fn gemm_s(&self, m: f64, k: f64, n: f64) -> f64 {
        let flops = 2.0 * m * k * n;
        match &self.grid {
            Some(g) if flops > 0.0 => flops / g.value(&[m, k, n]),
            _ => self.compute_s(KernelClass::Gemm, flops),
        }
    }

    /// Seconds of a convolution of `flops` (forward; backward: its input and weight gradients, `flops` being
    /// theirs) with `channels` (the geometric mean of in and out) over `pixels` output pixels, on the calibrated
    /// grid; `None` without one.
    pub fn conv_grid_s(&self, backward: bool, channels: f64, pixels: f64, flops: f64) -> Option<f64> {
        let (f, b) = self.conv_grid.as_ref()?;
        let g = if backward { b } else { f };
        Some(if flops > 0.0 { flops / g.value(&[channels, pixels]) } else { 0.0 })
    }

    /// Whether unequal products have a calibrated grid.
    pub fn has_grid(&self) -> bool {
        self.grid.is_some()
    }

    /// Seconds of one step of the optimizer `kind` (`stepcost::optimizer_kind`) over `tensors` tensors of
    /// `parameters` parameters, when that kind was calibrated.
    pub fn optimizer_s(&self, kind: &str, tensors: f64, parameters: f64) -> Option<f64> {
        self.optimizers.iter().find(|(k, _)| k == kind).map(|(_, c)| c.seconds(tensors, parameters))
    }

    /// Seconds of the element-wise work of a node of `class` on `elements` elements, (forward, backward), when the
    /// class was measured.
    pub fn elementwise_s(&self, class: &str, elements: f64) -> Option<(f64, f64)> {
        let (_, points) = self.elementwise.iter().find(|(c, _)| c == class)?;
        Some(along_sizes(points, elements))
    }

    /// Seconds of the element-wise work of `elements` elements of `class` beyond a call's fixed cost, (forward,
    /// backward): the cost per element between the two smallest measured sizes (with one size, its cost per
    /// element), for operations that run inside another node's kernel loop (a recurrent cell's gates).
    pub fn elementwise_marginal_s(&self, class: &str, elements: f64) -> Option<(f64, f64)> {
        let (_, points) = self.elementwise.iter().find(|(c, _)| c == class)?;
        let per = match (points.first(), points.get(1)) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                (((b.1 - a.1) / (b.0 - a.0)).max(0.0), ((b.2 - a.2) / (b.0 - a.0)).max(0.0))
            }
            (Some(a), _) => (a.1 / a.0, a.2 / a.0),
            _ => return None,
        };
        Some((per.0 * elements, per.1 * elements))
    }

    /// Seconds to move `bytes` through device memory: at the bandwidth measured for a working set of that size
    /// (log-log interpolation, flat beyond the measured sizes), else at `memory_bytes_s`.
    pub fn memory_s(&self, bytes: f64) -> f64 {
        self.memory_in_s(bytes, 0.0)
    }

    /// Seconds to move `bytes` that lie in a working set of `working_set` bytes: at the bandwidth measured for
    /// the larger of the two (a backward pass reads tensors saved across the whole step, not the layer's own few
    /// hundred KiB still in cache).
    pub fn memory_in_s(&self, bytes: f64, working_set: f64) -> f64 {
        if bytes <= 0.0 {
            return 0.0;
        }
        bytes / interpolate(&self.bandwidth, bytes.max(working_set)).unwrap_or(self.memory_bytes_s)
    }
}

/// A node's (forward, backward) seconds at `elements` from measured (elements, forward, backward) points sorted by
/// elements: linear between two measured sizes; at the per-element cost of the largest beyond it; below the
/// smallest, along the line through the two smallest (toward the node's fixed cost, at most the smallest's
/// cost), or, with one point only, its per-element cost.
fn along_sizes(points: &[SizePoint], elements: f64) -> (f64, f64) {
    let (Some(&first), Some(&last)) = (points.first(), points.last()) else {
        return (0.0, 0.0);
    };
    let scaled = |p: SizePoint| (p.1 * elements / p.0, p.2 * elements / p.0);
    if elements >= last.0 {
        return scaled(last);
    }
    if elements <= first.0 {
        let Some(&second) = points.get(1) else {
            return scaled(first);
        };
        // Along the line through the two smallest sizes (its intercept is the node's fixed part), never above
        // the smallest's cost nor below zero.
        let toward = |t0: f64, t1: f64| {
            let slope = (t1 - t0) / (second.0 - first.0);
            (t0 + slope * (elements - first.0)).clamp(0.0, t0)
        };
        return (toward(first.1, second.1), toward(first.2, second.2));
    }
    let i = points.partition_point(|p| p.0 <= elements);
    let (a, b) = (points[i - 1], points[i]);
    let t = (elements - a.0) / (b.0 - a.0);
    (a.1 + t * (b.1 - a.1), a.2 + t * (b.2 - a.2))
}

/// Achieved rate net of the per-call overhead, per measured size, at `precision`.
fn curve(points: &[KernelPoint], precision: Precision, overhead_s: f64) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.precision == precision && p.flops > 0.0 && p.seconds > 0.0)
        .map(|p| (p.flops, p.flops / net_of_overhead(p.seconds, overhead_s)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// A call's seconds without the per-operation overhead the model adds on its own; a call that took less than
/// twice the overhead says little about the rate and is counted at its total time.
fn net_of_overhead(seconds: f64, overhead_s: f64) -> f64 {
    if seconds > 2.0 * overhead_s { seconds - overhead_s } else { seconds }
}

/// The rate at `flops` on a curve of (flops, rate): log-log linear between points, the end value outside.
pub fn interpolate(curve: &[(f64, f64)], flops: f64) -> Option<f64> {
    let first = curve.first()?;
    let last = curve.last()?;
    if flops <= first.0 {
        return Some(first.1);
    }
    if flops >= last.0 {
        return Some(last.1);
    }
    let i = curve.partition_point(|p| p.0 <= flops);
    let (a, b) = (curve[i - 1], curve[i]);
    if b.0 <= a.0 {
        return Some(a.1);
    }
    let t = (flops.ln() - a.0.ln()) / (b.0.ln() - a.0.ln());
    Some((a.1.ln() + t * (b.1.ln() - a.1.ln())).exp())
}
