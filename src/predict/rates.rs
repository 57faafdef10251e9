//! The coefficients the model reads, and the rates it prices with: the compute rate a kernel of a given size
//! reaches (the datasheet peak, or the calibrated efficiency curve and grids), the memory bandwidth a working set
//! of a given size reaches, the per-operation overhead, the training step's per-node and optimizer costs and the
//! element-wise classes' measured work. [`Coefficients`] is fitted from a profile's calibration by
//! `crate::calibrate::fit` (net of everything the model prices on its own) and stored in the profile, one per
//! precision ([`Fitted`], `[fitted]` of a format v2 profile); this module only looks values up, it never measures
//! or nets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_graph::Precision;

use super::conv_classes::{ConvClass, ConvClassRate};
pub use super::fresh_rates::FreshPages;
use super::price_classes::{ElementwiseClass, FirstKind, NodeKind, OptimizerKind};
use super::shaped_attention::{ShapedAttention, nearest_shape};
pub use super::size_points::{SizePoint, along_sizes};
use super::uncertainty::Uncertainty;

/// Which efficiency curve a kernel follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelClass {
    /// Matrix products: linear, matmul, attention, recurrent gates.
    Gemm,
    /// Convolutions.
    Conv,
    /// Convolutions' backward (input and weight gradients together).
    ConvBackward,
    /// A fused attention kernel's products (scaled dot-product attention): the attention curve where one was
    /// given, else the GEMM curve.
    Attention,
}

/// The coefficients of one device at each precision it has a peak for: what a format v2 profile stores under
/// `[fitted]` (written by `trainbench calibrate`; a v1 profile is fitted once, when it is loaded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fitted {
    /// At fp32.
    pub fp32: Coefficients,
    /// At fp16, where the device has an fp16 peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16: Option<Coefficients>,
    /// At bf16, where the device has a bf16 peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16: Option<Coefficients>,
}

impl Fitted {
    /// The coefficients at `precision`, where fitted.
    pub fn at(&self, precision: Precision) -> Option<&Coefficients> {
        match precision {
            Precision::Fp32 => Some(&self.fp32),
            Precision::Fp16 => self.fp16.as_ref(),
            Precision::Bf16 => self.bf16.as_ref(),
        }
    }
}

/// The device as the model sees it at one precision: every coefficient a prediction reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Coefficients {
    /// Peak FLOP/s at the precision predicted.
    pub peak_flop_s: f64,
    /// Memory bandwidth, bytes per second (the calibrated triad when there is one, else the datasheet).
    pub memory_bytes_s: f64,
    /// Calibrated (bytes per call, achieved bytes/s net of overhead) by working set, sorted by bytes; empty
    /// without bandwidth points (every size at `memory_bytes_s`).
    pub bandwidth: Vec<(f64, f64)>,
    /// Element-wise classes measured: per class, its points sorted by elements, net of the model's own prices.
    pub elementwise: Vec<(ElementwiseClass, Vec<SizePoint>)>,
    /// Attention classes measured by shape (`super::shaped_attention`); the profiles before shapes were recorded
    /// keep their attention points in `elementwise`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention_shapes: Vec<ShapedAttention>,
    /// Fixed seconds per framework operation (0 in datasheet profiles).
    pub op_overhead_s: f64,
    /// Calibrated (FLOPs per call, achieved FLOP/s net of overhead) points of products, sorted by FLOPs.
    pub gemm: Vec<(f64, f64)>,
    /// The same of convolutions.
    pub conv: Vec<(f64, f64)>,
    /// The same of convolutions' backward.
    pub conv_backward: Vec<(f64, f64)>,
    /// The same of fused attention kernels (FLOPs of their products per call); empty: along the GEMM curve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention: Vec<(f64, f64)>,
    /// Fixed per-node costs measured through the training step, when calibrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodeCosts>,
    /// Optimizer costs by kind, when calibrated.
    pub optimizers: Vec<(OptimizerKind, OptimizerCost)>,
    /// Unequal products' rates on a grid, when calibrated at this precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<LogGrid>,
    /// Convolutions' rates over channels and pixels (forward, backward), when calibrated at this precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conv_grid: Option<(LogGrid, LogGrid)>,
    /// The measured kernel classes' rates as shares of the convolution grid's ([`super::conv_classes`]); empty
    /// where none was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conv_classes: Vec<ConvClassRate>,
    /// What layers cost inside the training step beyond their isolated kernels (0 without a calibration).
    pub in_step: InStep,
    /// Whether a linear layer's bias is a pass of its own over the output (the CPU's `addmm` copies the bias
    /// into the output first; on a GPU the product's epilogue adds it).
    pub bias_pass: bool,
    /// How wrong each group of terms can be (fitted from the calibration's residuals, else the datasheet's
    /// prior); profiles fitted before it get the datasheet's.
    #[serde(default)]
    pub uncertainty: Uncertainty,
    /// What an allocation too large for the host allocator to keep costs beyond its bytes, when calibrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_pages: Option<FreshPages>,
    /// Seconds per zero element of a square root beyond a nonzero one's ([`super::terms::Term::ZeroMomentSqrt`]);
    /// 0 where not calibrated.
    #[serde(default)]
    pub zero_sqrt_s: f64,
}

/// Fixed seconds of one node in the training step's forward and backward phases (`calibration.node`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeCosts {
    /// One framework operation of a node (forward, backward).
    pub op: (f64, f64),
    /// A linear layer with bias (forward, backward), its tiny product included.
    pub linear: (f64, f64),
    /// The step's own (forward, backward), once per step.
    pub step: (f64, f64),
    /// What the first node of a kind without a measured cold start of its own costs in each phase beyond the
    /// next ones (forward, backward): the median over the measured kinds; 0 where none was measured.
    pub first: (f64, f64),
    /// The measured kinds' own first-node costs (forward, backward), by kind.
    pub first_of: Vec<(FirstKind, (f64, f64))>,
}

impl NodeCosts {
    /// The first-node cost (forward, backward) of a node of `kind`: the kind's own where measured; a linear
    /// layer's or a product's the measured `linear`; another operation without a class of its own the measured
    /// `add` (a plain element-wise kernel); else the median.
    pub fn first_of(&self, kind: NodeKind) -> (f64, f64) {
        let measured = |k: FirstKind| self.first_of.iter().find(|(m, _)| *m == k).map(|(_, cost)| *cost);
        let own = match kind {
            NodeKind::Class(c) => Some(FirstKind::Class(c)),
            NodeKind::Op("linear") => Some(FirstKind::Linear),
            NodeKind::Op("add") => Some(FirstKind::Add),
            NodeKind::Op(_) => None,
        };
        let stand_in = match kind {
            NodeKind::Op("linear" | "matmul") => FirstKind::Linear,
            _ => FirstKind::Add,
        };
        own.and_then(measured).or_else(|| measured(stand_in)).unwrap_or(self.first)
    }
}

/// A plain convolution's size as the convolution grid reads it, and its kernel class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvSize {
    /// The geometric mean of its input and output channels.
    pub channels: f64,
    /// Output pixels per image.
    pub image_pixels: f64,
    /// Images.
    pub batch: f64,
    /// Kernel side, stride and direction.
    pub class: ConvClass,
}

/// A convolution grid's rate at `channels`, `image_pixels` output pixels per image and `batch` images: by all three
/// on a grid with the batch as its own axis, else by channels and the batch's output pixels together.
pub fn conv_grid_rate(grid: &LogGrid, channels: f64, image_pixels: f64, batch: f64) -> f64 {
    if grid.dims() == 3 {
        grid.value(&[channels, image_pixels, batch])
    } else {
        grid.value(&[channels, image_pixels * batch])
    }
}

/// The model's optimizer cost for one kind: seconds per step, per tensor and, by parameter count, per parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptimizerCost {
    /// Seconds of the phase's own work once per step, whatever the model (0 where the calibration measured no
    /// small graph to tell it from the tensors').
    #[serde(default)]
    pub per_step_s: f64,
    /// Seconds per parameter tensor.
    pub per_tensor_s: f64,
    /// (parameters, seconds per parameter) of the large graphs, sorted by parameters.
    pub per_parameter: Vec<(f64, f64)>,
}

impl OptimizerCost {
    /// Seconds of one step over `tensors` tensors holding `parameters` parameters: the step's own cost (where there
    /// is a tensor to step), per-parameter cost log-log interpolated between the measured sizes, flat beyond them.
    pub fn seconds(&self, tensors: f64, parameters: f64) -> f64 {
        let per = interpolate(&self.per_parameter, parameters).unwrap_or(0.0);
        let step = if tensors > 0.0 { self.per_step_s } else { 0.0 };
        step + tensors * self.per_tensor_s + parameters * per
    }
}

/// What a layer costs inside the training step beyond its isolated kernel, per byte it moves, per phase:
/// convolutions and linear layers; 0 where not measured. The excess is the memory around the kernel (a freshly
/// allocated output touched for the first time, an input no longer in cache). An embedding bag's is per call:
/// libtorch's bag makes its offsets' bag map, sorts the ids for the backward and zeroes a gradient table, many
/// operations the model's count of three forward and one backward does not hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InStep {
    /// Convolutions (forward, backward), seconds per byte.
    pub conv: (f64, f64),
    /// Convolutions (forward, backward), seconds per call.
    pub conv_fixed: (f64, f64),
    /// Linear layers (forward, backward), seconds per byte.
    pub linear: (f64, f64),
    /// Embedding bags (forward, backward), seconds per call (0 in a profile fitted before it was measured).
    #[serde(default)]
    pub bag_fixed: (f64, f64),
}

/// The distinct values of one coordinate, ascending: a grid's axis.
pub fn axis(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// Values measured on a full grid of sizes (each axis sorted, ascending): multilinear interpolation of the log
/// value in log sizes, clamped to the grid's ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogGrid {
    /// The sizes along each axis, ascending.
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

    /// Whether the grid is one [`LogGrid::new`] builds: every axis ascending above 0, a finite value for every
    /// combination of them.
    pub fn is_well_formed(&self) -> bool {
        let cells: usize = self.axes.iter().map(Vec::len).product();
        !self.axes.is_empty()
            && self.axes.iter().all(|a| !a.is_empty() && a[0] > 0.0 && a.windows(2).all(|w| w[0] < w[1]))
            && self.axes.iter().flatten().all(|x| x.is_finite())
            && self.log_value.len() == cells
            && self.log_value.iter().all(|v| v.is_finite())
    }

    /// The grid's number of axes.
    pub fn dims(&self) -> usize {
        self.axes.len()
    }

    /// The same grid with every value multiplied by `factor` (above 0).
    pub fn scaled(&self, factor: f64) -> Self {
        let shift = factor.ln();
        Self { axes: self.axes.clone(), log_value: self.log_value.iter().map(|v| v + shift).collect() }
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

impl Coefficients {
    /// The datasheet device: its peak at the precision and its memory bandwidth, nothing calibrated.
    pub fn datasheet(peak_flop_s: f64, memory_bytes_s: f64, bias_pass: bool) -> Self {
        Self {
            peak_flop_s,
            memory_bytes_s,
            bandwidth: Vec::new(),
            elementwise: Vec::new(),
            attention_shapes: Vec::new(),
            op_overhead_s: 0.0,
            gemm: Vec::new(),
            conv: Vec::new(),
            conv_backward: Vec::new(),
            attention: Vec::new(),
            nodes: None,
            optimizers: Vec::new(),
            grid: None,
            conv_grid: None,
            conv_classes: Vec::new(),
            in_step: InStep::default(),
            bias_pass,
            uncertainty: Uncertainty::datasheet(),
            fresh_pages: None,
            zero_sqrt_s: 0.0,
        }
    }

    /// These coefficients with the rate choices of `terms` that are off taken away: no product or convolution
    /// grid, one bandwidth for every working set, no measured optimizer costs.
    pub fn under(mut self, terms: &super::terms::Terms) -> Self {
        use super::terms::Term;
        if !terms.on(Term::ProductGrid) {
            self.grid = None;
        }
        if !terms.on(Term::ConvGrid) {
            self.conv_grid = None;
        }
        if !terms.on(Term::ConvClasses) {
            self.conv_classes.clear();
        }
        if !terms.on(Term::WorkingSetBandwidth) {
            self.bandwidth.clear();
        }
        if !terms.on(Term::MeasuredOptimizer) {
            self.optimizers.clear();
        }
        self
    }

    /// What is wrong with coefficients read from a file, where something is: a rate not positive, a curve or
    /// a class's sizes out of order, a grid whose values do not fill its axes (the lookups assume each).
    pub fn problem(&self) -> Option<String> {
        let ascending = |xs: &mut dyn Iterator<Item = f64>| {
            let v: Vec<f64> = xs.collect();
            v.iter().all(|x| x.is_finite()) && v.windows(2).all(|w| w[0] <= w[1])
        };
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let curves = [("gemm", &self.gemm), ("conv", &self.conv), ("conv_backward", &self.conv_backward)];
        let grids = [self.grid.as_ref(), self.conv_grid.as_ref().map(|g| &g.0), self.conv_grid.as_ref().map(|g| &g.1)];
        if !positive(self.peak_flop_s) || !positive(self.memory_bytes_s) {
            Some("peak_flop_s and memory_bytes_s must be above 0".into())
        } else if let Some((name, _)) = curves
            .iter()
            .chain([&("bandwidth", &self.bandwidth)])
            .find(|(_, c)| !ascending(&mut c.iter().map(|p| p.0)) || !c.iter().all(|p| positive(p.1)))
        {
            Some(format!("`{name}` must list positive rates by ascending size"))
        } else if let Some(class) = self
            .elementwise
            .iter()
            .map(|(c, points)| (*c, points))
            .chain(self.attention_shapes.iter().map(|s| (s.class, &s.points)))
            .find(|(_, points)| !ascending(&mut points.iter().map(|p| p.0)))
            .map(|(c, _)| c)
        {
            Some(format!("the sizes of `{}` must ascend", class.name()))
        } else if let Some((kind, _)) =
            self.optimizers.iter().find(|(_, c)| !ascending(&mut c.per_parameter.iter().map(|p| p.0)))
        {
            Some(format!("the sizes of `{}` must ascend", kind.name()))
        } else if grids.into_iter().flatten().any(|g| !g.is_well_formed()) {
            Some("a grid's axes must ascend above 0 and its values fill them".into())
        } else if self.conv_classes.iter().any(|c| {
            let by_channels = c.by_channels.iter().flat_map(|s| [s.channels, s.forward, s.backward]);
            !positive(c.forward) || !positive(c.backward) || !by_channels.into_iter().all(positive)
        }) {
            Some("a convolution class's shares of the grid's rate, and its channel counts, must be above 0".into())
        } else if self.conv_classes.iter().any(|c| !ascending(&mut c.by_channels.iter().map(|s| s.channels))) {
            Some("a convolution class's channel counts must ascend".into())
        } else {
            None
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
            KernelClass::Attention if self.attention.is_empty() => &self.gemm,
            KernelClass::Attention => &self.attention,
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
    /// theirs) of `size` on the calibrated grid (by channels, pixels per image and batch; on a grid measured
    /// without the batch apart, by channels and output pixels), at its kernel class's share of the grid's rate;
    /// `None` without a grid, or for a transposed convolution without a measured class.
    pub fn conv_grid_s(&self, backward: bool, size: ConvSize, flops: f64) -> Option<f64> {
        let (f, b) = self.conv_grid.as_ref()?;
        let rate = conv_grid_rate(if backward { b } else { f }, size.channels, size.image_pixels, size.batch);
        let (forward_share, backward_share) =
            super::conv_classes::share(&self.conv_classes, size.class, size.channels)?;
        let rate = rate * if backward { backward_share } else { forward_share };
        Some(if flops > 0.0 { flops / rate } else { 0.0 })
    }

    /// Whether unequal products have a calibrated grid.
    pub fn has_grid(&self) -> bool {
        self.grid.is_some()
    }

    /// Seconds of one step of the optimizer `kind` over `tensors` tensors of
    /// `parameters` parameters, when that kind was calibrated.
    pub fn optimizer_s(&self, kind: OptimizerKind, tensors: f64, parameters: f64) -> Option<f64> {
        self.optimizers.iter().find(|(k, _)| *k == kind).map(|(_, c)| c.seconds(tensors, parameters))
    }

    /// Seconds of the element-wise work of a node of `class` on `elements` elements, (forward, backward), when the
    /// class was measured.
    pub fn elementwise_s(&self, class: ElementwiseClass, elements: f64) -> Option<(f64, f64)> {
        let (_, points) = self.elementwise.iter().find(|(c, _)| *c == class)?;
        Some(along_sizes(points, elements))
    }

    /// Seconds of the element-wise work of `elements` elements of `class` beyond a call's fixed cost, (forward,
    /// backward): the cost per element between the two smallest measured sizes (with one size, its cost per
    /// element), for operations that run inside another node's kernel loop (a recurrent cell's gates).
    pub fn elementwise_marginal_s(&self, class: ElementwiseClass, elements: f64) -> Option<(f64, f64)> {
        let (_, points) = self.elementwise.iter().find(|(c, _)| *c == class)?;
        let per = match (points.first(), points.get(1)) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                (((b.1 - a.1) / (b.0 - a.0)).max(0.0), ((b.2 - a.2) / (b.0 - a.0)).max(0.0))
            }
            (Some(a), _) => (a.1 / a.0, a.2 / a.0),
            _ => return None,
        };
        Some((per.0 * elements, per.1 * elements))
    }

    /// Seconds of the core of an attention node of `class` on `elements` score elements, (forward, backward),
    /// at the measured shape of that class nearest `positions` query positions of `head_dim` features per head
    /// (`super::shaped_attention`); `None` when the class has no shaped points.
    pub fn attention_s(
        &self,
        class: ElementwiseClass,
        elements: f64,
        positions: f64,
        head_dim: f64,
    ) -> Option<(f64, f64)> {
        nearest_shape(&self.attention_shapes, class, positions, head_dim).map(|s| along_sizes(&s.points, elements))
    }

    /// Seconds to move `bytes` through device memory: at the bandwidth measured for a working set of that size
    /// (log-log interpolation, flat beyond the measured sizes), else at `memory_bytes_s`.
    pub fn memory_s(&self, bytes: f64) -> f64 {
        self.memory_in_s(bytes, 0.0)
    }

    /// Whether a GRU applies its hidden weight as one product per time step, its gradient made and summed at every
    /// step: libtorch's native CPU kernels, the device whose linear layers pay the bias pass (`bias_pass` is set
    /// from the device kind); cuDNN's recurrent kernels on a GPU make the weights' gradient once over every step,
    /// as oneDNN's LSTM does on a CPU (`layer::rnn_weight_gradient_steps`).
    pub fn rnn_weight_gradient_per_step(&self) -> bool {
        self.bias_pass
    }

    /// Seconds to move `bytes` over and over a working set of `working_set` bytes (which may be smaller: several
    /// passes over the same tensors), at the bandwidth measured for that working set.
    pub fn memory_at_s(&self, bytes: f64, working_set: f64) -> f64 {
        if bytes <= 0.0 {
            return 0.0;
        }
        bytes / interpolate(&self.bandwidth, working_set).unwrap_or(self.memory_bytes_s)
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
