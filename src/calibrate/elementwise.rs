//! The element-wise classes' micro-graphs and their measurement (`calibration.elementwise`), the model's
//! element-wise work term (`crate::predict::work`) reads them back through the fit.
//!
//! Measured through the backend itself (`trainbench calibrate`), the way a run executes them: a micro-graph
//! (input -> linear -> the operation stacked [`ELEMENTWISE_STACK`] times -> MSE) is trained beside the same graph
//! without the operation; the difference of their mean forward and backward phase times over [`ELEMENTWISE_STACK`] is one
//! operation's cost (with `--cpu-clock`, the phases are scaled by the process's CPU time over wall time during each
//! run). Each class is measured at the shapes and batches of `super::micro_shapes` (on a CPU 16 x 64 per sample at
//! 1,024 to 1,048,576 elements per node; on a GPU at the shapes of the layers each class stands for, to 8.4 M
//! elements), and on a GPU at fp32 and at a half precision. The fit nets each point of the per-operation
//! overhead the model adds on its own (`super::fit`), and the model interpolates between the sizes.
//!
//! Attention is measured the same way (self-attention, 4 heads over the sample's positions; causal self-attention;
//! attention to a second sequence, whose keys and values are projected apart from the queries) and charged by
//! score element at each measured shape (positions and features per head), net of its projections and score
//! products as the model prices them at that shape
//! ([`measured_attention_products`]): on a CPU its fused core costs several times its FLOPs (the development machine: 1.2 ms
//! forward at batch 64 against 0.23 ms from FLOPs). Cross-entropy is measured as a loss over 1,024 classes per
//! sample (input [1, 64] -> linear 1,024 -> the loss) against the same graph ending in the logits' mean and an
//! MSE on it; the fit adds back the model's own price of that mean (a pass over the logits each way). Its backward
//! (log-softmax's backward, the loss's scatter into zeroed logits) costs about four times softmax's. Max pooling
//! is measured as a stack of 3 x 3 poolings with stride 1 on 8 channels of 32 x 32 and priced by output element.

/// The measured attention's products at `batch` samples of `shape` (its projections and score products, as
/// `crate::predict::elementwise_work::attention_products` counts them; [`ATTENTION_HEADS`] heads).
pub fn measured_attention_products(batch: f64, shape: AttentionShape) -> Vec<[f64; 3]> {
    let t = shape.positions as f64;
    let e = (ATTENTION_HEADS as u64 * shape.head_dim) as f64;
    attention_products(batch, t, t, e, e, e, ATTENTION_HEADS as f64)
}

/// Samples per step of a measured attention point of `elements` score elements at `shape`.
pub fn attention_batch(elements: f64, shape: AttentionShape) -> f64 {
    elements / (ATTENTION_HEADS as f64 * (shape.positions * shape.positions) as f64)
}

/// The shape of the first calibrations' attention, which recorded none: 16 positions of 64 features, 4 heads.
pub const LEGACY_ATTENTION: AttentionShape =
    AttentionShape { positions: CPU_SAMPLE[0] as u64, head_dim: (CPU_SAMPLE[1] / ATTENTION_HEADS) as u64 };

use trainbench_contract::{Backend, DeviceSelector, RunPlan};
use trainbench_graph::graph::{Activation, Graph, InputKind, LossKind, PoolKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec, Precision};

use super::micro_shapes::{ATTENTION_HEADS, CPU_SAMPLE, MicroShape, POOL_SAMPLE, shapes};
use crate::hardware::wire::{AttentionShape, ElementwisePoint};
use crate::predict::elementwise_work::attention_products;
use crate::predict::price_classes::{ElementwiseClass, FirstKind};
use crate::predict::roofline::FLUSH_ELEMENTS;

/// How many copies of the operation the element-wise micro-graph stacks (more copies, a larger difference to
/// measure).
pub const ELEMENTWISE_STACK: usize = 6;

/// Classes of the measured cross-entropy (one row of logits per sample).
const CE_CLASSES: usize = 1024;
/// Measured steps per micro-graph run (after 3 warm-up steps): more where a step is short and its difference
/// small; each class is measured in rounds and the median kept (`harness::per_added_node`).
fn steps(batch: usize) -> u64 {
    match batch {
        1 => 40,
        b if b >= 1024 => 5,
        _ => 12,
    }
}

/// The measured pooling window's side (stride 1, padding 1: the output the input's size).
const POOL_WINDOW: usize = 3;

/// Samples per step at which `kind` is measured on `device` (its first shape's; `super::micro_shapes`).
pub fn batches(kind: FirstKind, device: DeviceSelector) -> Vec<usize> {
    shapes(kind, device).swap_remove(0).batches
}

/// The micro-graph of `shape`: input -> linear -> `copies` x the class's operation -> MSE against a target
/// (batch normalisation over channels: input -> conv 1x1 -> the operations); for `cross_entropy`, input [1, 64]
/// -> linear [`CE_CLASSES`] -> cross-entropy (`copies` > 0), or the logits' mean -> MSE.
fn graph(class: ElementwiseClass, copies: usize, shape: &MicroShape) -> Result<Graph, String> {
    graph_of(FirstKind::Class(class), copies, false, &shape.sample)
}

/// [`graph`], with `flush` a pass over [`FLUSH_ELEMENTS`] elements of a second input just before the operations (the
/// sum of the input with itself, averaged into a second MSE; no gradient flows through it): whatever the
/// caches held of the operations' code and data is gone when they start, as in a step that moves more than the
/// caches hold. Not for `cross_entropy`. Besides the classes, `linear` (64 -> 64 linear layers) and `add` (a
/// tensor added to itself), the kinds standing in for those without a class in the first-node costs
/// ([`FirstKind`]).
pub(crate) fn graph_after(kind: FirstKind, copies: usize, flush: bool) -> Result<Graph, String> {
    graph_of(kind, copies, flush, &CPU_SAMPLE)
}

/// [`graph_after`] over samples of `sample` (positions x features; channels x height x width for batch
/// normalisation).
fn graph_of(kind: FirstKind, copies: usize, flush: bool, sample: &[usize]) -> Result<Graph, String> {
    let e = |e: trainbench_graph::ShapeError| e.to_string();
    let class = kind.name();
    if kind == FirstKind::Class(ElementwiseClass::BatchNorm) && sample.len() == 3 {
        let mut b = GraphBuilder::new("calibrate-batch_norm");
        let x = b.input("x", sample, InputKind::Dense).map_err(e)?;
        let t = b.input("t", sample, InputKind::Dense).map_err(e)?;
        let mut y = b.conv("conv", x, trainbench_graph::ConvCfg::square(sample[0], 1, 1, 0)).map_err(e)?;
        if flush {
            flush_pass(&mut b)?;
        }
        for i in 0..copies {
            y = b.batch_norm(&format!("batch_norm{i}"), y).map_err(e)?;
        }
        b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
        return b.finish(1, "samples").map_err(e);
    }
    if kind == FirstKind::Class(ElementwiseClass::MaxPool) {
        let mut b = GraphBuilder::new("calibrate-max_pool");
        let x = b.input("x", &POOL_SAMPLE, InputKind::Dense).map_err(e)?;
        let t = b.input("t", &POOL_SAMPLE, InputKind::Dense).map_err(e)?;
        let mut y = b.conv("conv", x, trainbench_graph::ConvCfg::square(POOL_SAMPLE[0], 1, 1, 0)).map_err(e)?;
        if flush {
            flush_pass(&mut b)?;
        }
        for i in 0..copies {
            y = b.pool(&format!("max_pool{i}"), y, PoolKind::Max, POOL_WINDOW, 1, POOL_WINDOW / 2).map_err(e)?;
        }
        b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
        return b.finish(1, "samples").map_err(e);
    }
    if kind == FirstKind::Class(ElementwiseClass::CrossEntropy) {
        let mut b = GraphBuilder::new("calibrate-cross_entropy");
        let x = b.input("x", &[1, CPU_SAMPLE[1]], InputKind::Dense).map_err(e)?;
        let logits = b.linear("fc", x, CE_CLASSES, true).map_err(e)?;
        if copies > 0 {
            let t = b.input("t", &[1], InputKind::Labels { classes: CE_CLASSES }).map_err(e)?;
            b.loss("loss", LossKind::CrossEntropy, &[logits, t]).map_err(e)?;
        } else {
            // The logits' mean per sample against a target: one pass over them each way.
            let m = b.mean("mean", logits, 1).map_err(e)?;
            let t = b.input("t", &[1], InputKind::Dense).map_err(e)?;
            b.loss("loss", LossKind::Mse, &[m, t]).map_err(e)?;
        }
        return b.finish(1, "samples").map_err(e);
    }
    let mut b = GraphBuilder::new(format!("calibrate-{class}"));
    let features = sample.get(1).copied().unwrap_or(1);
    let x = b.input("x", sample, InputKind::Dense).map_err(e)?;
    let t = b.input("t", sample, InputKind::Dense).map_err(e)?;
    let mut y = b.linear("fc", x, features, true).map_err(e)?;
    // Cross-attention attends to a second sequence that needs its gradient, as an encoder's output does.
    let memory = if kind == FirstKind::Class(ElementwiseClass::AttentionCross) {
        let m = b.input("m", sample, InputKind::Dense).map_err(e)?;
        Some(b.linear("memory", m, features, true).map_err(e)?)
    } else {
        None
    };
    if flush {
        flush_pass(&mut b)?;
    }
    for i in 0..copies {
        let name = format!("{class}{i}");
        y = match kind {
            FirstKind::Class(ElementwiseClass::Dropout) => b.dropout(&name, y, 0.1),
            FirstKind::Class(ElementwiseClass::LayerNorm) => b.layer_norm(&name, y, 1e-5),
            FirstKind::Class(ElementwiseClass::BatchNorm) => b.batch_norm(&name, y),
            FirstKind::Class(ElementwiseClass::Softmax) => b.softmax(&name, y),
            FirstKind::Class(ElementwiseClass::Relu) => b.act(&name, y, Activation::Relu),
            FirstKind::Class(ElementwiseClass::Attention) => b.attention(&name, y, y, ATTENTION_HEADS, false),
            FirstKind::Class(ElementwiseClass::AttentionCausal) => b.attention(&name, y, y, ATTENTION_HEADS, true),
            FirstKind::Class(ElementwiseClass::AttentionCross) => {
                b.attention(&name, y, memory.unwrap_or(y), ATTENTION_HEADS, false)
            }
            FirstKind::Class(ElementwiseClass::Gelu) => b.act(&name, y, Activation::Gelu),
            FirstKind::Linear => b.linear(&name, y, features, true),
            FirstKind::Add => b.add_nodes(&name, &[y, y]),
            // Max pooling and cross-entropy have graphs of their own, built above.
            FirstKind::Class(other @ (ElementwiseClass::MaxPool | ElementwiseClass::CrossEntropy)) => {
                return Err(format!("element-wise class `{}` has no stacked graph", other.name()));
            }
        }
        .map_err(e)?;
    }
    b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
    b.finish(1, "samples").map_err(e)
}

/// A pass over [`FLUSH_ELEMENTS`] elements of an input of its own, summed with itself and averaged into a second MSE (no
/// gradient flows through it): what the caches held before it is gone after it.
pub(crate) fn flush_pass(b: &mut GraphBuilder) -> Result<(), String> {
    let e = |e: trainbench_graph::ShapeError| e.to_string();
    let f = b.input("flush_input", &[1, FLUSH_ELEMENTS], InputKind::Dense).map_err(e)?;
    let sum = b.add_nodes("flush", &[f, f]).map_err(e)?;
    let m = b.mean("flush_mean", sum, 1).map_err(e)?;
    let t = b.input("flush_target", &[1], InputKind::Dense).map_err(e)?;
    b.loss("flush_loss", LossKind::Mse, &[m, t]).map_err(e)?;
    Ok(())
}

/// The run plan of a micro-graph at `batch` samples per step: SGD, the steps [`steps`] gives, fp32.
pub(crate) fn plan(device: DeviceSelector, cpu_threads: Option<u32>, batch: usize) -> RunPlan {
    let sgd = OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.0, weight_decay: 0.0, nesterov: false };
    super::harness::plan(device, cpu_threads, batch, sgd, steps(batch))
}

/// Elements one node of `class` works on per sample of `shape`: attention's scores, cross-entropy's logits,
/// else the node's output.
fn elements_per_sample(class: ElementwiseClass, shape: &MicroShape) -> usize {
    match class {
        ElementwiseClass::Attention | ElementwiseClass::AttentionCausal | ElementwiseClass::AttentionCross => {
            let t = shape.sample.first().copied().unwrap_or(1);
            ATTENTION_HEADS * t * t
        }
        ElementwiseClass::CrossEntropy => CE_CLASSES,
        ElementwiseClass::MaxPool
        | ElementwiseClass::Dropout
        | ElementwiseClass::LayerNorm
        | ElementwiseClass::BatchNorm
        | ElementwiseClass::Softmax
        | ElementwiseClass::Relu
        | ElementwiseClass::Gelu => shape.sample.iter().product(),
    }
}

/// Measure every class of [`ElementwiseClass::ALL`] the backend runs on `device`, at each of its shapes and
/// their batches (`super::micro_shapes`) and at each of `precisions` (fp32 first; the half precisions on a GPU,
/// whose kernels move half the bytes); the classes it refuses are returned as `(class, reason)` beside the
/// points.
pub fn measure(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    precisions: &[Precision],
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> (Vec<ElementwisePoint>, Vec<(String, String)>) {
    let (mut points, mut skipped) = (Vec::new(), Vec::new());
    for &precision in precisions {
        'classes: for class in ElementwiseClass::ALL {
            for shape in shapes(FirstKind::Class(class), device) {
                let (base, with) = match (graph(class, 0, &shape), graph(class, ELEMENTWISE_STACK, &shape)) {
                    (Ok(b), Ok(w)) => (b, w),
                    (Err(e), _) | (_, Err(e)) => {
                        skipped.push((class.name().to_string(), e));
                        continue 'classes;
                    }
                };
                // The cross-entropy graph has one loss, the others `ELEMENTWISE_STACK` copies of the operation.
                let copies = if class == ElementwiseClass::CrossEntropy { 1.0 } else { ELEMENTWISE_STACK as f64 };
                for &batch in &shape.batches {
                    let plan = RunPlan { precision, ..plan(device, cpu_threads, batch) };
                    match super::harness::per_added_node(backend, &plan, (&base, &with), copies, cpu_clock) {
                        Ok(m) => points.push(ElementwisePoint {
                            op: class,
                            elements: (batch * elements_per_sample(class, &shape)) as f64,
                            forward_s: m.forward,
                            backward_s: m.backward,
                            precision: (precision != Precision::Fp32).then_some(precision),
                            attention_shape: class.is_attention().then(|| shape.attention()),
                        }),
                        Err(e) => {
                            skipped.push((format!("{} at {}", class.name(), precision.as_str()), e.to_string()));
                            continue 'classes;
                        }
                    }
                }
            }
        }
    }
    (points, skipped)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::predict::elementwise_work::class_of;

    use super::*;

    #[test]
    fn every_class_builds_and_maps_back_from_its_graph_at_every_shape() {
        for device in [DeviceSelector::Cpu, DeviceSelector::Cuda(Some(0))] {
            for c in ElementwiseClass::ALL.into_iter().filter(|c| *c != ElementwiseClass::CrossEntropy) {
                for shape in shapes(FirstKind::Class(c), device) {
                    let class = c.name();
                    let g = graph(c, ELEMENTWISE_STACK, &shape).unwrap();
                    if c == ElementwiseClass::MaxPool || c == ElementwiseClass::AttentionCross {
                        assert_eq!(g.nodes.iter().filter_map(|n| class_of(&n.op)).count(), ELEMENTWISE_STACK);
                        continue;
                    }
                    let classes: Vec<ElementwiseClass> = g.nodes.iter().filter_map(|n| class_of(&n.op)).collect();
                    assert_eq!(classes, vec![c; ELEMENTWISE_STACK], "{class} {shape:?}");
                    assert!(graph(c, 0, &shape).unwrap().nodes.iter().all(|n| class_of(&n.op).is_none()));
                }
            }
        }
    }

    #[test]
    fn the_stand_ins_of_the_first_node_costs_build_and_the_losses_have_no_stack() {
        let cpu = |c| shapes(FirstKind::Class(c), DeviceSelector::Cpu).swap_remove(0);
        assert!(graph_after(FirstKind::Linear, 1, true).is_ok() && graph_after(FirstKind::Add, 1, true).is_ok());
        let (ce, pool) = (ElementwiseClass::CrossEntropy, ElementwiseClass::MaxPool);
        assert!(graph(ce, 1, &cpu(ce)).is_ok() && graph(pool, 1, &cpu(pool)).is_ok());
    }

    #[test]
    fn the_mock_backend_measures_every_class() {
        let mut mock = trainbench_contract::mock::MockBackend::new(Default::default());
        let (points, skipped) = measure(&mut mock, DeviceSelector::Cpu, &[Precision::Fp32], None, false);
        assert!(skipped.is_empty(), "{skipped:?}");
        let batches = super::super::micro_shapes::CPU_BATCHES.len();
        // Attention: the first calibrations' shape, then two more of two batches each.
        let per_class = |c: ElementwiseClass| if c.is_attention() { batches + 4 } else { batches };
        let classes: Vec<ElementwiseClass> = points.iter().map(|p| p.op).collect();
        let expected: Vec<ElementwiseClass> =
            ElementwiseClass::ALL.iter().flat_map(|c| vec![*c; per_class(*c)]).collect();
        assert_eq!(classes, expected);
        let sizes: Vec<f64> = points.iter().take(batches).map(|p| p.elements).collect();
        assert_eq!(sizes, [1024.0, 65536.0, 262144.0, 1048576.0]);
        assert!(
            points
                .iter()
                .filter(|p| p.op != ElementwiseClass::MaxPool)
                .filter(|p| p.attention_shape.is_none_or(|s| s == LEGACY_ATTENTION))
                .all(|p| sizes.contains(&p.elements)),
            "attention's scores and cross-entropy's logits are as many as the others' outputs"
        );
        let pool: Vec<f64> = points.iter().filter(|p| p.op == ElementwiseClass::MaxPool).map(|p| p.elements).collect();
        assert_eq!(pool, [8192.0, 65536.0, 262144.0, 524288.0], "outputs: 8 x 32 x 32 per sample");
        assert!(points.iter().all(|p| p.precision.is_none()), "fp32 is written as no precision");
        let attention: Vec<_> = points.iter().filter_map(|p| p.attention_shape).collect();
        assert_eq!(attention.len(), 3 * (batches + 4), "each attention point records its shape");
        assert_eq!(attention.iter().filter(|s| **s == LEGACY_ATTENTION).count(), 3 * batches);
    }

    #[test]
    fn a_half_precisions_points_say_so_and_come_after_the_fp32_ones() {
        let mut mock = trainbench_contract::mock::MockBackend::new(Default::default());
        let (points, skipped) =
            measure(&mut mock, DeviceSelector::Cpu, &[Precision::Fp32, Precision::Bf16], None, false);
        assert!(skipped.is_empty(), "{skipped:?}");
        let (fp32, bf16) = points.split_at(points.len() / 2);
        assert!(
            fp32.iter().all(|p| p.precision.is_none()) && bf16.iter().all(|p| p.precision == Some(Precision::Bf16))
        );
        let same = |p: &ElementwisePoint| (p.op, p.elements as u64, p.attention_shape.map(|s| s.positions));
        assert_eq!(fp32.iter().map(same).collect::<Vec<_>>(), bf16.iter().map(same).collect::<Vec<_>>());
    }
}
