//! The fit: a profile's measured points turned into the coefficients the model reads
//! ([`crate::predict::rates::Fitted`], one [`Coefficients`] per precision). Rates net of the per-call overhead the
//! model adds on its own; the grids of products and convolutions; the per-node costs and the median first-node
//! cost; the optimizer costs solved per tensor and per parameter; the element-wise points net of what the model
//! prices on its own (attention's products and operations, cross-entropy's base graph); and the in-step excess of
//! convolutions, linear layers and embedding bags, each measured layer stack less the model's price of it. The fit prices
//! micro-graphs with the whole model (every term on): a coefficient means the same whichever terms a prediction
//! then switches off. It runs when `trainbench calibrate` writes a profile (format v2 stores its result) and when
//! a version 1 profile is loaded (`crate::hardware::load`), never per prediction.

use trainbench_graph::Precision;

use super::elementwise::{LEGACY_ATTENTION, attention_batch, measured_attention_products};
use super::stepcost::{LAYERS, LayerClass, largest_optimizer_tensor, layer_batch, layer_graph, optimizer_spec};
use crate::hardware::wire::{AttentionShape, Calibration, ElementwisePoint, HardwareFile, KernelPoint, OptimizerPoint};
use crate::predict::layer::ATTENTION_OPS;
use crate::predict::price_classes::{ElementwiseClass, FirstKind, NodeClass, OptimizerKind};
use crate::predict::product_rates::ProductRates;
use crate::predict::rates::{
    Coefficients, Fitted, FreshPages, InStep, KernelClass, LogGrid, NodeCosts, OptimizerCost, SizePoint,
};
use crate::predict::roofline::{self, Rates};
use crate::predict::shaped_attention::ShapedAttention;
use crate::predict::terms::Terms;

/// Framework operations of the cross-entropy point's base graph beyond the logits (their mean, and the MSE on
/// it: difference, square, mean), which the measured difference lacks and the fit adds back.
const CROSS_ENTROPY_BASE_OPS: f64 = 4.0;

/// Bytes per logit the cross-entropy point's base graph moves in its mean (the logits read, fp32).
const CROSS_ENTROPY_BASE_BYTES: f64 = 4.0;

/// The coefficients of `profile`'s device at every precision it has a peak for.
pub fn fitted(profile: &HardwareFile) -> Fitted {
    let peaks = &profile.device.peak_tflops;
    Fitted {
        fp32: coefficients(profile, Precision::Fp32, peaks.fp32),
        fp16: peaks.fp16.map(|peak| coefficients(profile, Precision::Fp16, peak)),
        bf16: peaks.bf16.map(|peak| coefficients(profile, Precision::Bf16, peak)),
    }
}

/// The coefficients of `profile`'s device at `precision`, whose peak is `peak` TFLOP/s.
pub fn coefficients(profile: &HardwareFile, precision: Precision, peak: f64) -> Coefficients {
    let bias_pass = profile.device.kind == crate::hardware::wire::DeviceKind::Cpu;
    let Some(c) = profile.calibration.as_ref() else {
        return Coefficients::datasheet(peak * 1e12, profile.device.memory_bandwidth_gbs * 1e9, bias_pass);
    };
    let overhead = c.op_overhead_us * 1e-6;
    let memory = c.triad_gbs * 1e9;
    let mut bandwidth: Vec<(f64, f64)> = c
        .bandwidth
        .iter()
        .filter(|p| p.bytes > 0.0 && p.seconds > 0.0)
        .map(|p| (p.bytes, p.bytes / net_of_overhead(p.seconds, overhead)))
        .collect();
    bandwidth.sort_by(|a, b| a.0.total_cmp(&b.0));
    let nodes = node_costs(c);
    let fixed = nodes.as_ref().map_or((overhead, overhead), |n| n.op);
    // The measured totals, netted below once the model can price what they hold.
    let (elementwise, attention_shapes) = measured_elementwise(c, precision);
    let fresh_pages = c.fresh_memory.as_ref().filter(|f| f.seconds_per_byte > 0.0).map(|f| FreshPages {
        reused_up_to_bytes: f.reused_up_to_bytes,
        seconds_per_byte: f.seconds_per_byte,
        cycled: f.cycled.clone(),
    });
    let optimizers = OptimizerKind::ALL
        .into_iter()
        .filter_map(|k| optimizer_cost(&c.optimizer, k, fresh_pages.as_ref()).map(|o| (k, o)))
        .collect();
    let net = |s| net_of_overhead(s, overhead);
    let conv_grid = super::fit_conv::conv_grids(c, precision, net);
    let mut model = Coefficients {
        in_step: InStep::default(),
        bias_pass,
        nodes,
        optimizers,
        grid: gemm_grid(c, precision, overhead),
        conv_classes: conv_grid
            .as_ref()
            .map(|g| super::fit_conv::conv_class_rates(c, precision, net, g))
            .unwrap_or_default(),
        conv_grid,
        peak_flop_s: peak * 1e12,
        memory_bytes_s: memory,
        bandwidth,
        elementwise,
        attention_shapes,
        op_overhead_s: overhead,
        gemm: curve(&c.gemm, precision, overhead),
        conv: curve(&c.conv, precision, overhead),
        conv_backward: curve(&c.conv_backward, precision, overhead),
        attention: curve(&c.attention, precision, overhead),
        uncertainty: Default::default(),
        fresh_pages,
        zero_sqrt_s: c.zero_sqrt_s_per_element.unwrap_or(0.0),
    };
    net_elementwise_of_priced_costs(&mut model, fixed);
    if precision == Precision::Fp32 {
        model.in_step = in_step_excess(c, &model);
    }
    model.uncertainty = super::fit_uncertainty::of(c, &model);
    model
}

/// The element-wise points `precision`'s coefficients read, per class: its own, else the other half
/// precision's (the same bytes moved), else the fp32 ones (written without a precision). Attention points with a
/// shape go apart, one entry per class and shape; those without one (the first calibrations') stay with the
/// other classes. Every list sorted by elements; totals as measured (netted by the caller).
fn measured_elementwise(
    c: &Calibration,
    precision: Precision,
) -> (Vec<(ElementwiseClass, Vec<SizePoint>)>, Vec<ShapedAttention>) {
    let at = |p: &ElementwisePoint| p.precision.unwrap_or(Precision::Fp32);
    let other_half = match precision {
        Precision::Fp16 => Some(Precision::Bf16),
        Precision::Bf16 => Some(Precision::Fp16),
        Precision::Fp32 => None,
    };
    let (mut plain, mut shaped): (Vec<(ElementwiseClass, Vec<SizePoint>)>, Vec<ShapedAttention>) = Default::default();
    for class in ElementwiseClass::ALL {
        let of_class = |wanted: Precision| -> Vec<&ElementwisePoint> {
            c.elementwise.iter().filter(|p| p.op == class && p.elements > 0.0 && at(p) == wanted).collect()
        };
        let chosen = [Some(precision), other_half, Some(Precision::Fp32)]
            .into_iter()
            .flatten()
            .map(of_class)
            .find(|points| !points.is_empty())
            .unwrap_or_default();
        for p in chosen {
            let point = (p.elements, p.forward_s, p.backward_s);
            match p.attention_shape {
                Some(shape) => {
                    let (t, d) = (shape.positions as f64, shape.head_dim as f64);
                    match shaped.iter_mut().find(|s| s.class == class && s.positions == t && s.head_dim == d) {
                        Some(s) => s.points.push(point),
                        None => shaped.push(ShapedAttention { class, positions: t, head_dim: d, points: vec![point] }),
                    }
                }
                None => match plain.iter_mut().find(|(k, _)| *k == class) {
                    Some((_, points)) => points.push(point),
                    None => plain.push((class, vec![point])),
                },
            }
        }
    }
    let by_elements = |points: &mut Vec<SizePoint>| points.sort_by(|a, b| a.0.total_cmp(&b.0));
    plain.iter_mut().for_each(|(_, points)| by_elements(points));
    shaped.iter_mut().for_each(|s| by_elements(&mut s.points));
    (plain, shaped)
}

/// The per-node costs of a calibration (`None` without the `elementwise` and `linear` classes).
fn node_costs(c: &Calibration) -> Option<NodeCosts> {
    let classes: Vec<(NodeClass, &crate::hardware::wire::NodePoint)> = c.node.iter().map(|p| (p.class, p)).collect();
    let get = |class: NodeClass| classes.iter().find(|(k, _)| *k == class).map(|(_, p)| (p.forward_s, p.backward_s));
    let firsts: Vec<(FirstKind, (f64, f64))> = classes
        .iter()
        .filter_map(|(k, p)| match k {
            NodeClass::First(kind) => Some((*kind, (p.forward_s, p.backward_s))),
            _ => None,
        })
        .collect();
    let median = |f: fn(&(f64, f64)) -> f64| {
        crate::stats::median(&firsts.iter().map(|(_, p)| f(p)).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let (Some(op), Some(linear)) = (get(NodeClass::Elementwise), get(NodeClass::Linear)) else {
        return None;
    };
    Some(NodeCosts {
        op,
        linear,
        step: get(NodeClass::Step).unwrap_or((0.0, 0.0)),
        first: (median(|p| p.0), median(|p| p.1)),
        first_of: firsts,
    })
}

/// The element-wise points hold each call's measured total: net of what the model prices on its own, never
/// negative. Every class: one operation's fixed cost (`fixed`, forward and backward). Attention: its operations
/// (the forward count in both phases, as the model's calibrated fixed costs count a node's backward: one backward
/// node per forward operation) and its projections and score products as the model prices them at each measured
/// shape (on the product grid, else along the GEMM curve as six kernels; backward twice the forward's work).
/// Cross-entropy, measured beyond the logits' mean and an MSE on it: the model's own price of those added back
/// (the mean reads the logits, its backward writes their gradient; four operations).
fn net_elementwise_of_priced_costs(model: &mut Coefficients, fixed: (f64, f64)) {
    let mut classes = std::mem::take(&mut model.elementwise);
    for (class, points) in &mut classes {
        let shape = class.is_attention().then_some(LEGACY_ATTENTION);
        net_points(model, *class, shape, points, fixed);
    }
    let mut shaped = std::mem::take(&mut model.attention_shapes);
    for s in &mut shaped {
        let shape = AttentionShape { positions: s.positions as u64, head_dim: s.head_dim as u64 };
        net_points(model, s.class, Some(shape), &mut s.points, fixed);
    }
    model.elementwise = classes;
    model.attention_shapes = shaped;
}

/// [`net_elementwise_of_priced_costs`] of one class's points (`shape`: an attention's measured shape).
fn net_points(
    model: &Coefficients,
    class: ElementwiseClass,
    shape: Option<AttentionShape>,
    points: &mut [SizePoint],
    fixed: (f64, f64),
) {
    for (elements, ef, eb) in points.iter_mut() {
        let (priced_f, priced_b) = match shape {
            Some(shape) => {
                let products = measured_attention_products_s(model, *elements, shape);
                (products + ATTENTION_OPS.0 * fixed.0, 2.0 * products + ATTENTION_OPS.0 * fixed.1)
            }
            None => fixed,
        };
        *ef = (*ef - priced_f).max(0.0);
        *eb = (*eb - priced_b).max(0.0);
        if class == ElementwiseClass::CrossEntropy {
            let mean = model.memory_s(CROSS_ENTROPY_BASE_BYTES * *elements);
            *ef += mean + CROSS_ENTROPY_BASE_OPS * fixed.0;
            *eb += mean + CROSS_ENTROPY_BASE_OPS * fixed.1;
        }
    }
}

/// Seconds of the projections and score products of the measured attention of `elements` score elements at
/// `shape`, as the model prices them (on the product grid, else along the GEMM curve as six kernels).
fn measured_attention_products_s(model: &Coefficients, elements: f64, shape: AttentionShape) -> f64 {
    let shapes = measured_attention_products(attention_batch(elements, shape), shape);
    if model.has_grid() {
        shapes.iter().map(|&[m, k, n]| model.gemm_s(m, k, n)).sum()
    } else {
        let flops: f64 = shapes.iter().map(|&[m, k, n]| 2.0 * m * k * n).sum();
        let kernels = shapes.len() as f64;
        kernels * model.compute_s(KernelClass::Gemm, flops / kernels)
    }
}

/// The optimizer cost of `kind` from the measured points: the many-tensor graph (the most tensors), the small
/// one-layer graph (fewer parameters than it, where measured) and the large one-layer graphs. With the small graph,
/// it, the many-tensor graph and the smallest large one are solved for the phase's own cost per step, a per-tensor
/// and a per-parameter cost; without it (a profile calibrated before it was measured) the other two for a per-tensor
/// and a per-parameter cost, the step's own cost 0. Every large graph then gives its per-parameter cost net of the
/// step's and its tensors'. Each point is first netted of the fresh pages of the temporaries the optimizer allocates
/// per tensor (`fresh`: the model prices those apart, by each model's own tensor sizes, as the fresh-pages term).
/// `None` without a many-tensor and a large point of the kind.
pub fn optimizer_cost(
    points: &[OptimizerPoint],
    kind: OptimizerKind,
    fresh: Option<&FreshPages>,
) -> Option<OptimizerCost> {
    let temporaries = crate::predict::fresh_pages::optimizer_temporaries(&optimizer_spec(kind));
    let net = |p: &OptimizerPoint| {
        let bytes = largest_optimizer_tensor(p.tensors, p.parameters) * crate::predict::fresh_pages::PARAMETER_BYTES;
        let fresh_s = fresh.map_or(0.0, |f| temporaries * f.seconds(bytes));
        (p.seconds - fresh_s).max(0.0)
    };
    let v: Vec<&OptimizerPoint> = points.iter().filter(|p| p.kind == kind && p.tensors > 0).collect();
    let many = *v.iter().max_by_key(|p| (p.tensors, std::cmp::Reverse(p.parameters)))?;
    let mut large: Vec<&OptimizerPoint> =
        v.iter().copied().filter(|p| p.tensors < many.tensors && p.parameters > many.parameters).collect();
    large.sort_by_key(|p| p.parameters);
    let small = v
        .iter()
        .copied()
        .filter(|p| p.tensors < many.tensors && p.parameters < many.parameters)
        .min_by_key(|p| p.parameters);
    let first = *large.first()?;
    // Each point: step + tensors x per tensor + parameters x per parameter = its seconds.
    let row = |p: &OptimizerPoint| [1.0, p.tensors as f64, p.parameters as f64, net(p)];
    let three = small.and_then(|s| solve3([row(s), row(many), row(first)])).filter(|x| x.iter().all(|v| *v >= 0.0));
    let (per_step_s, per_tensor_s) = match three {
        Some([step, tensor, _]) => (step, tensor),
        None => {
            let (tm, pm, sm) = (many.tensors as f64, many.parameters as f64, net(many));
            let (tl, pl, sl) = (first.tensors as f64, first.parameters as f64, net(first));
            let det = tm * pl - tl * pm;
            if det.abs() < f64::EPSILON {
                return None;
            }
            (0.0, ((sm * pl - sl * pm) / det).max(0.0))
        }
    };
    let mut per_parameter: Vec<(f64, f64)> = large
        .iter()
        .map(|p| {
            let rest = net(p) - per_step_s - p.tensors as f64 * per_tensor_s;
            (p.parameters as f64, (rest / p.parameters as f64).max(0.0))
        })
        .collect();
    per_parameter.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(OptimizerCost { per_step_s, per_tensor_s, per_parameter })
}

/// The solution of three linear equations `a x + b y + c z = d` given as rows `[a, b, c, d]` (Cramer's rule);
/// `None` where they are singular.
fn solve3(m: [[f64; 4]; 3]) -> Option<[f64; 3]> {
    let det = |c: [usize; 3]| {
        let e = |r: usize, k: usize| m[r][c[k]];
        e(0, 0) * (e(1, 1) * e(2, 2) - e(1, 2) * e(2, 1)) - e(0, 1) * (e(1, 0) * e(2, 2) - e(1, 2) * e(2, 0))
            + e(0, 2) * (e(1, 0) * e(2, 1) - e(1, 1) * e(2, 0))
    };
    let d = det([0, 1, 2]);
    (d.abs() > f64::EPSILON * m.iter().flatten().map(|v| v.abs()).fold(1.0, f64::max))
        .then(|| [det([3, 1, 2]) / d, det([0, 3, 2]) / d, det([0, 1, 3]) / d])
}

/// The in-step excess of a calibration: each measured layer stack's time per layer, less the model's fixed cost
/// and kernel time for that layer (`base`: the model without the excess), over the layer phase's bytes; never
/// negative.
fn in_step_excess(c: &Calibration, base: &Coefficients) -> InStep {
    // The calibration's layers run at the precision's own rates (no TF32 or FP8 products).
    let no_tensor_rates = ProductRates::default();
    let plain = Rates { device: base, products: &no_tensor_rates };
    // (bytes, excess seconds) per layer and phase of one measured stack.
    let measured = |class: LayerClass| -> Option<[(f64, f64); 2]> {
        let point = c.node.iter().find(|p| p.class == class.class())?;
        let g = layer_graph(class, LAYERS).ok()?;
        let analysis = trainbench_graph::analysis::analyze(&g);
        let sgd = optimizer_spec(OptimizerKind::Sgd);
        let step = roofline::step(&g, &analysis, layer_batch(class), Precision::Fp32, &sgd, plain, &Terms::all());
        let stacked: Vec<_> = step.layers.iter().filter(|l| l.name.starts_with(class.layer_prefix())).collect();
        if stacked.is_empty() {
            return None;
        }
        // Per layer of the stack (an embedding bag's layer is its bag and its add to the sum).
        let n = LAYERS as f64;
        let mean = |f: fn(&roofline::PhaseCost) -> f64, backward: bool| {
            stacked.iter().map(|l| f(if backward { &l.backward } else { &l.forward })).sum::<f64>() / n
        };
        let excess = |measured: f64, backward: bool| {
            (mean(|p| p.bytes, backward), (measured - mean(|p| p.time_s, backward)).max(0.0))
        };
        Some([excess(point.forward_s, false), excess(point.backward_s, true)])
    };
    let per_byte = |(bytes, excess): (f64, f64)| if bytes > 0.0 { excess / bytes } else { 0.0 };
    let mut f = InStep::default();
    if let Some([fw, bw]) = measured(LayerClass::LinearWide) {
        f.linear = (per_byte(fw), per_byte(bw));
    }
    // An embedding bag's excess is its calls' own work, not its bytes: per call.
    if let Some([(_, fw), (_, bw)]) = measured(LayerClass::EmbeddingBag) {
        f.bag_fixed = (fw, bw);
    }
    match (measured(LayerClass::Conv), measured(LayerClass::ConvSmall)) {
        (Some(large), Some(small)) => {
            // excess = fixed + per byte x bytes, through the two stacks; neither part negative.
            let solve = |(b1, e1): (f64, f64), (b2, e2): (f64, f64)| {
                let slope = if b2 > b1 { ((e2 - e1) / (b2 - b1)).max(0.0) } else { 0.0 };
                let fixed = (e1 - slope * b1).max(0.0);
                (fixed, if fixed > 0.0 { slope } else { per_byte((b2, e2)) })
            };
            let (ff, fb) = solve(small[0], large[0]);
            let (bf, bb) = solve(small[1], large[1]);
            f.conv_fixed = (ff, bf);
            f.conv = (fb, bb);
        }
        (Some([fw, bw]), None) => f.conv = (per_byte(fw), per_byte(bw)),
        _ => {}
    }
    f
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_and_per_parameter_costs_are_solved_back() {
        // 2 us per tensor, 1 ns per parameter up to 1 M, 2 ns at 4 M.
        let point = |tensors: u64, parameters: u64, per: f64| OptimizerPoint {
            kind: OptimizerKind::Adam,
            tensors,
            parameters,
            seconds: tensors as f64 * 2e-6 + parameters as f64 * per,
        };
        let points = vec![point(64, 2304, 1e-9), point(2, 1_049_600, 1e-9), point(2, 4_196_352, 2e-9)];
        let c = optimizer_cost(&points, OptimizerKind::Adam, None).unwrap();
        assert!((c.per_tensor_s - 2e-6).abs() < 1e-12, "{c:?}");
        assert_eq!(c.per_step_s, 0.0, "no small graph: no step cost of its own");
        assert!((c.seconds(10.0, 1_049_600.0) - (20e-6 + 1_049_600.0 * 1e-9)).abs() < 1e-9);
        assert!((c.seconds(2.0, 4_196_352.0) - points[2].seconds).abs() < 1e-9);
        // Between the sizes, between the costs; other kinds are not guessed.
        let mid = c.seconds(0.0, 2e6) / 2e6;
        assert!(mid > 1e-9 && mid < 2e-9);
        assert!(optimizer_cost(&points, OptimizerKind::Sgd, None).is_none());
    }

    #[test]
    fn the_small_graph_gives_the_phases_own_cost_apart_from_its_tensors() {
        // 15 us per step, 2 us per tensor, 1 ns per parameter up to 1 M, 2 ns at 4 M; the small graph listed last.
        let point = |tensors: u64, parameters: u64, per: f64| OptimizerPoint {
            kind: OptimizerKind::Sgd,
            tensors,
            parameters,
            seconds: 15e-6 + tensors as f64 * 2e-6 + parameters as f64 * per,
        };
        let points =
            vec![point(64, 2304, 1e-9), point(2, 1_049_600, 1e-9), point(2, 4_196_352, 2e-9), point(2, 72, 1e-9)];
        let c = optimizer_cost(&points, OptimizerKind::Sgd, None).unwrap();
        assert!((c.per_step_s - 15e-6).abs() < 1e-12 && (c.per_tensor_s - 2e-6).abs() < 1e-12, "{c:?}");
        assert!((c.per_parameter[0].1 - 1e-9).abs() < 1e-15 && (c.per_parameter[1].1 - 2e-9).abs() < 1e-15, "{c:?}");
        // Every measured point is priced back; a model of 4 tensors pays the step's cost once.
        for p in &points {
            assert!((c.seconds(p.tensors as f64, p.parameters as f64) - p.seconds).abs() < 1e-12, "{p:?}");
        }
        assert!((c.seconds(4.0, 100.0) - (15e-6 + 8e-6 + 100e-9)).abs() < 1e-12);
        // Read without the small graph, the step's cost spreads over the per-tensor and per-parameter costs.
        let two = optimizer_cost(&points[..3], OptimizerKind::Sgd, None).unwrap();
        assert_eq!(two.per_step_s, 0.0);
        assert!(two.seconds(4.0, 100.0) < c.seconds(4.0, 100.0) * 0.7, "{two:?}");
    }

    #[test]
    fn the_fresh_pages_of_the_optimizer_temporaries_are_netted_from_each_point() {
        // Adam allocates 2 temporaries per tensor; only the 4096 x 4096 weight (64 MiB) is above the 32 MiB kept.
        let fresh = FreshPages { reused_up_to_bytes: 32.0 * 1048576.0, seconds_per_byte: 0.4e-9, cycled: Vec::new() };
        let weight_bytes = 4096.0 * 4096.0 * 4.0;
        let point = |tensors: u64, parameters: u64, extra: f64| OptimizerPoint {
            kind: OptimizerKind::Adam,
            tensors,
            parameters,
            seconds: tensors as f64 * 2e-6 + parameters as f64 * 3e-9 + extra,
        };
        let large = 4096 * 4096 + 4096;
        let points = vec![point(64, 2304, 0.0), point(2, 1_049_600, 0.0), point(2, large, 2.0 * weight_bytes * 0.4e-9)];
        let c = optimizer_cost(&points, OptimizerKind::Adam, Some(&fresh)).unwrap();
        let per_large = c.per_parameter.last().unwrap().1;
        assert!((per_large - 3e-9).abs() < 1e-15, "{c:?}");
        // Without the fresh pages the temporaries stay in the per-parameter cost.
        let raw = optimizer_cost(&points, OptimizerKind::Adam, None).unwrap();
        assert!(raw.per_parameter.last().unwrap().1 > per_large * 1.5, "{raw:?}");
    }

    #[test]
    fn every_precision_with_a_peak_is_fitted_and_a_datasheet_profile_fits_to_its_figures() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml"))
                .unwrap();
        let profile: HardwareFile = toml::from_str(&text).unwrap();
        let f = fitted(&profile);
        assert_eq!(f.bf16.is_some(), profile.device.peak_tflops.bf16.is_some());
        assert!(f.fp16.is_none() && f.fp32.nodes.is_some() && !f.fp32.elementwise.is_empty());
        // The uncertainty fitted from the calibration's own residuals, within reason.
        let u = f.fp32.uncertainty;
        for s in [u.compute, u.memory, u.elementwise] {
            assert!((super::super::fit_uncertainty::FLOOR..1.0).contains(&s), "{u:?}");
        }
        assert_eq!(u.fixed, super::super::fit_uncertainty::FIXED_SIGMA);
        let mut datasheet = profile;
        datasheet.calibration = None;
        let f = fitted(&datasheet);
        assert_eq!(f.fp32.peak_flop_s, datasheet.device.peak_tflops.fp32 * 1e12);
        assert!(f.fp32.nodes.is_none() && f.fp32.elementwise.is_empty());
    }

    #[test]
    fn each_precision_reads_its_own_element_wise_points_then_the_other_halfs_then_fp32_and_attention_keeps_its_shapes()
    {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml"))
                .unwrap();
        let mut profile: HardwareFile = toml::from_str(&text).unwrap();
        profile.device.peak_tflops.fp16 = Some(profile.device.peak_tflops.fp32 * 2.0);
        let c = profile.calibration.as_mut().unwrap();
        let relu_fp32: Vec<ElementwisePoint> =
            c.elementwise.iter().filter(|p| p.op == ElementwiseClass::Relu).cloned().collect();
        assert!(!relu_fp32.is_empty());
        // bf16 ReLU ten times dearer; one attention shape beside the first calibrations' unshaped one.
        c.elementwise.extend(relu_fp32.iter().map(|p| ElementwisePoint {
            precision: Some(Precision::Bf16),
            forward_s: p.forward_s * 10.0,
            ..p.clone()
        }));
        let shape = AttentionShape { positions: 1024, head_dim: 64 };
        c.elementwise.push(ElementwisePoint {
            op: ElementwiseClass::Attention,
            elements: 4.0 * 1024.0 * 1024.0,
            forward_s: 1.0,
            backward_s: 2.0,
            precision: None,
            attention_shape: Some(shape),
        });
        let f = fitted(&profile);
        let relu = |c: &Coefficients| c.elementwise_s(ElementwiseClass::Relu, 1e6).unwrap().0;
        let (fp32, bf16, fp16) = (relu(&f.fp32), relu(f.bf16.as_ref().unwrap()), relu(f.fp16.as_ref().unwrap()));
        assert!(bf16 > 5.0 * fp32, "bf16 reads its own points: {bf16} against {fp32}");
        assert_eq!(fp16, bf16, "fp16 reads bf16's, the same bytes moved");
        assert_eq!(f.fp32.attention_shapes.len(), 1);
        let s = &f.fp32.attention_shapes[0];
        assert_eq!((s.class, s.positions, s.head_dim), (ElementwiseClass::Attention, 1024.0, 64.0));
        // Net of the products the model prices at that shape, below the measured second, above nothing.
        assert!(s.points[0].1 < 1.0 && s.points[0].1 > 0.5, "{:?}", s.points);
        assert!(f.fp32.elementwise.iter().any(|(c, _)| *c == ElementwiseClass::Attention), "the unshaped points stay");
    }

    #[test]
    fn an_embedding_bag_stack_gives_a_per_call_excess_that_each_bag_of_a_graph_pays() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml"))
                .unwrap();
        let mut profile: HardwareFile = toml::from_str(&text).unwrap();
        let before = fitted(&profile).fp32;
        assert_eq!(before.in_step.bag_fixed, (0.0, 0.0), "not measured: nothing");
        let g = layer_graph(LayerClass::EmbeddingBag, LAYERS).unwrap();
        let a = trainbench_graph::analysis::analyze(&g);
        let sgd = optimizer_spec(OptimizerKind::Sgd);
        let no_tensor_rates = ProductRates::default();
        let step = |c: &Coefficients| {
            let rates = Rates { device: c, products: &no_tensor_rates };
            roofline::step(&g, &a, 64, Precision::Fp32, &sgd, rates, &Terms::all())
        };
        // The model's own price of a layer of the stack (a bag and its add), and a measurement 20 us forward and
        // 40 us backward above it.
        let stacked = step(&before);
        let layer = stacked.layers.iter().filter(|l| l.name.starts_with("bag"));
        let (pf, pb) = layer.fold((0.0, 0.0), |(f, b), l| (f + l.forward.time_s, b + l.backward.time_s));
        let (pf, pb) = (pf / LAYERS as f64, pb / LAYERS as f64);
        let point = crate::hardware::wire::NodePoint {
            class: NodeClass::EmbeddingBag,
            forward_s: pf + 20e-6,
            backward_s: pb + 40e-6,
        };
        profile.calibration.as_mut().unwrap().node.push(point);
        let after = fitted(&profile).fp32;
        let (f, b) = after.in_step.bag_fixed;
        assert!((f - 20e-6).abs() < 1e-12 && (b - 40e-6).abs() < 1e-12, "the excess per call: {:?}", after.in_step);
        // Every bag of a graph pays it once per phase; nothing else moves.
        let with = step(&after);
        for (l0, l1) in stacked.layers.iter().zip(&with.layers) {
            let op = g.nodes.iter().find(|n| n.name == l0.name).map(|n| &n.op);
            let bag = matches!(op, Some(trainbench_graph::graph::Op::EmbeddingBag { .. }));
            let (df, db) = (l1.forward.time_s - l0.forward.time_s, l1.backward.time_s - l0.backward.time_s);
            let (ef, eb) = if bag { (f, b) } else { (0.0, 0.0) };
            assert!((df - ef).abs() < 1e-12 && (db - eb).abs() < 1e-12, "{}: {df} {db}", l0.name);
        }
    }
}
