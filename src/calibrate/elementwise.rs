//! The element-wise classes' micro-graphs and their measurement (`calibration.elementwise`), the model's
//! element-wise work term (`crate::predict::work`) reads them back through the fit.
//!
//! Measured through the backend itself (`trainbench calibrate`), the way a run executes them: a micro-graph
//! (input [16, 64] -> linear -> the operation stacked [`ELEMENTWISE_STACK`] times -> MSE) is trained beside the same graph
//! without the operation; the difference of their mean forward and backward phase times over [`ELEMENTWISE_STACK`] is one
//! operation's cost (with `--cpu-clock`, the phases are scaled by the process's CPU time over wall time during each
//! run). Each class is measured at [`BATCHES`] samples per step: 1,024 elements (where a node's fixed cost is
//! most of it), 65,536 (inside a core's caches), 262,144 (about where they run out) and 1,048,576 (past them). The fit nets each point of the per-operation
//! overhead the model adds on its own (`super::fit`), and the model interpolates between the sizes.
//!
//! Attention is measured the same way (self-attention, 4 heads over the 16 positions; causal self-attention;
//! attention to a second sequence, whose keys and values are projected apart from the queries) and charged by
//! score element, net of its projections and score products as the model prices them at the measured shape
//! ([`measured_attention_products`]): on a CPU its fused core costs several times its FLOPs (the development machine: 1.2 ms
//! forward at batch 64 against 0.23 ms from FLOPs). Cross-entropy is measured as a loss over 1,024 classes per
//! sample (input [1, 64] -> linear 1,024 -> the loss) against the same graph ending in the logits' mean and an
//! MSE on it; the fit adds back the model's own price of that mean (a pass over the logits each way). Its backward
//! (log-softmax's backward, the loss's scatter into zeroed logits) costs about four times softmax's. Max pooling
//! is measured as a stack of 3 x 3 poolings with stride 1 on 8 channels of 32 x 32 and priced by output element.

/// The measured attention's products at `batch` samples (`crate::predict::elementwise_work::attention_products`).
pub fn measured_attention_products(batch: f64) -> Vec<[f64; 3]> {
    let (t, e) = (SAMPLE[0] as f64, SAMPLE[1] as f64);
    attention_products(batch, t, t, e, e, e, ATTENTION_HEADS as f64)
}

/// Samples per step of a measured attention point of `elements` score elements.
pub fn attention_batch(elements: f64) -> f64 {
    elements / (ATTENTION_HEADS * SAMPLE[0] * SAMPLE[0]) as f64
}

use trainbench_contract::{Backend, DeviceFamily, DeviceSelector, RunPlan};
use trainbench_graph::graph::{Activation, Graph, InputKind, LossKind, PoolKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec};

use crate::hardware::wire::ElementwisePoint;
use crate::predict::elementwise_work::attention_products;
use crate::predict::price_classes::{ElementwiseClass, FirstKind};
use crate::predict::roofline::FLUSH_ELEMENTS;

/// How many copies of the operation the element-wise micro-graph stacks (more copies, a larger difference to
/// measure).
pub const ELEMENTWISE_STACK: usize = 6;

/// Samples per step of the micro-graphs, one measurement each: 1,024, 65,536, 262,144 and 1,048,576 elements per
/// node (the third about where a node's input and output outgrow a core's 2 MiB L2 on the development machine).
pub const BATCHES: [usize; 4] = [1, 64, 256, 1024];
/// One sample: 16 positions of 64 features (a small Transformer's activations).
const SAMPLE: [usize; 2] = [16, 64];
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

/// Samples per step of the micro-graphs on a CUDA device: 1,024, 262,144, 2.1 M and 8.4 M elements per node (the
/// largest about 17 us of a large GPU's memory traffic per fp32 operation, twice a launch). A GPU runs
/// [`BATCHES`]' sizes in a kernel launch's fixed time (tens of microseconds, whatever the size), so the cost per
/// element they would give is a launch's noise, multiplied by a large layer's elements. Each step copies its
/// batch to the device (`super::repeated_batch`: host copies of 67 MB a step at the largest, about 0.08 s a
/// clone here at twice that size), which bounds the size: the calibration has 300 s on the GPU check.
pub const GPU_BATCHES: [usize; 4] = [1, 256, 2048, 8192];

/// Samples per step of the measured max-pooling graphs (its samples are larger: 8 channels of 32 x 32).
const POOL_BATCHES: [usize; 4] = [1, 8, 32, 64];
/// [`POOL_BATCHES`] on a CUDA device (up to 8.4 M elements per node), as [`GPU_BATCHES`].
const GPU_POOL_BATCHES: [usize; 4] = [1, 32, 256, 1024];
/// One sample of the max-pooling graphs: 8 channels of 32 x 32 pixels, pooled 3 x 3 with stride 1 and padding
/// 1 (the output the input's size).
const POOL_SAMPLE: [usize; 3] = [8, 32, 32];
/// The measured pooling window's side.
const POOL_WINDOW: usize = 3;

/// Samples per step at which `kind` is measured on `device`.
pub fn batches(kind: FirstKind, device: DeviceSelector) -> [usize; 4] {
    let gpu = device.family() == DeviceFamily::Cuda;
    match (kind == FirstKind::Class(ElementwiseClass::MaxPool), gpu) {
        (true, false) => POOL_BATCHES,
        (true, true) => GPU_POOL_BATCHES,
        (false, false) => BATCHES,
        (false, true) => GPU_BATCHES,
    }
}

/// Heads of the measured attention (self-attention over the sample's 16 positions of 64 features: 4 x 16 x 16
/// scores per sample, 65,536 at batch 64).
pub const ATTENTION_HEADS: usize = 4;

/// The micro-graph: input -> linear -> `copies` x the class's operation -> MSE against a target; for
/// `cross_entropy`, input [1, 64] -> linear [`CE_CLASSES`] -> cross-entropy (`copies` > 0), or the logits' mean
/// -> MSE.
fn graph(class: ElementwiseClass, copies: usize) -> Result<Graph, String> {
    graph_after(FirstKind::Class(class), copies, false)
}

/// [`graph`], with `flush` a pass over [`FLUSH_ELEMENTS`] elements of a second input just before the operations (the
/// sum of the input with itself, averaged into a second MSE; no gradient flows through it): whatever the
/// caches held of the operations' code and data is gone when they start, as in a step that moves more than the
/// caches hold. Not for `cross_entropy`. Besides the classes, `linear` (64 -> 64 linear layers) and `add` (a
/// tensor added to itself), the kinds standing in for those without a class in the first-node costs
/// ([`FirstKind`]).
pub(crate) fn graph_after(kind: FirstKind, copies: usize, flush: bool) -> Result<Graph, String> {
    let e = |e: trainbench_graph::ShapeError| e.to_string();
    let class = kind.name();
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
        let x = b.input("x", &[1, SAMPLE[1]], InputKind::Dense).map_err(e)?;
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
    let x = b.input("x", &SAMPLE, InputKind::Dense).map_err(e)?;
    let t = b.input("t", &SAMPLE, InputKind::Dense).map_err(e)?;
    let mut y = b.linear("fc", x, SAMPLE[1], true).map_err(e)?;
    // Cross-attention attends to a second sequence that needs its gradient, as an encoder's output does.
    let memory = if kind == FirstKind::Class(ElementwiseClass::AttentionCross) {
        let m = b.input("m", &SAMPLE, InputKind::Dense).map_err(e)?;
        Some(b.linear("memory", m, SAMPLE[1], true).map_err(e)?)
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
            FirstKind::Linear => b.linear(&name, y, SAMPLE[1], true),
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

/// The run plan of a micro-graph at `batch` samples per step: SGD, the steps [`steps`] gives.
pub(crate) fn plan(device: DeviceSelector, cpu_threads: Option<u32>, batch: usize) -> RunPlan {
    let sgd = OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.0, weight_decay: 0.0, nesterov: false };
    super::harness::plan(device, cpu_threads, batch, sgd, steps(batch))
}

/// Elements one node of `class` works on per sample: attention's scores, cross-entropy's logits, else the
/// node's output.
fn elements_per_sample(class: ElementwiseClass) -> usize {
    match class {
        ElementwiseClass::Attention | ElementwiseClass::AttentionCausal | ElementwiseClass::AttentionCross => {
            ATTENTION_HEADS * SAMPLE[0] * SAMPLE[0]
        }
        ElementwiseClass::CrossEntropy => CE_CLASSES,
        ElementwiseClass::MaxPool => POOL_SAMPLE.iter().product::<usize>(),
        ElementwiseClass::Dropout
        | ElementwiseClass::LayerNorm
        | ElementwiseClass::BatchNorm
        | ElementwiseClass::Softmax
        | ElementwiseClass::Relu
        | ElementwiseClass::Gelu => SAMPLE[0] * SAMPLE[1],
    }
}

/// Measure every class of [`ElementwiseClass::ALL`] the backend runs on `device`, at each of [`batches`]; the classes it
/// refuses are returned as `(class, reason)` beside the points.
pub fn measure(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> (Vec<ElementwisePoint>, Vec<(String, String)>) {
    let (mut points, mut skipped) = (Vec::new(), Vec::new());
    'classes: for class in ElementwiseClass::ALL {
        let (base, with) = match (graph(class, 0), graph(class, ELEMENTWISE_STACK)) {
            (Ok(b), Ok(w)) => (b, w),
            (Err(e), _) | (_, Err(e)) => {
                skipped.push((class.name().to_string(), e));
                continue;
            }
        };
        // The cross-entropy graph has one loss, the others `ELEMENTWISE_STACK` copies of the operation.
        let copies = if class == ElementwiseClass::CrossEntropy { 1.0 } else { ELEMENTWISE_STACK as f64 };
        for batch in batches(FirstKind::Class(class), device) {
            let plan = plan(device, cpu_threads, batch);
            match super::harness::per_added_node(backend, &plan, (&base, &with), copies, cpu_clock) {
                Ok(m) => points.push(ElementwisePoint {
                    op: class,
                    elements: (batch * elements_per_sample(class)) as f64,
                    forward_s: m.forward,
                    backward_s: m.backward,
                }),
                Err(e) => {
                    skipped.push((class.name().to_string(), e.to_string()));
                    continue 'classes;
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
    fn every_class_builds_and_maps_back_from_its_graph() {
        for c in ElementwiseClass::ALL.into_iter().filter(|c| *c != ElementwiseClass::CrossEntropy) {
            let class = c.name();
            let g = graph(c, ELEMENTWISE_STACK).unwrap();
            if c == ElementwiseClass::MaxPool || c == ElementwiseClass::AttentionCross {
                assert_eq!(g.nodes.iter().filter_map(|n| class_of(&n.op)).count(), ELEMENTWISE_STACK);
                continue;
            }
            let classes: Vec<ElementwiseClass> = g.nodes.iter().filter_map(|n| class_of(&n.op)).collect();
            assert_eq!(classes, vec![c; ELEMENTWISE_STACK], "{class}");
            assert!(graph(c, 0).unwrap().nodes.iter().all(|n| class_of(&n.op).is_none()));
        }
    }

    #[test]
    fn the_stand_ins_of_the_first_node_costs_build_and_the_losses_have_no_stack() {
        assert!(graph_after(FirstKind::Linear, 1, true).is_ok() && graph_after(FirstKind::Add, 1, true).is_ok());
        assert!(graph(ElementwiseClass::CrossEntropy, 1).is_ok() && graph(ElementwiseClass::MaxPool, 1).is_ok());
    }

    #[test]
    fn the_mock_backend_measures_every_class() {
        let mut mock = trainbench_contract::mock::MockBackend::new(Default::default());
        let (points, skipped) = measure(&mut mock, DeviceSelector::Cpu, None, false);
        assert!(skipped.is_empty(), "{skipped:?}");
        let classes: Vec<ElementwiseClass> = points.iter().map(|p| p.op).collect();
        let expected: Vec<ElementwiseClass> = ElementwiseClass::ALL.iter().flat_map(|c| [*c; BATCHES.len()]).collect();
        assert_eq!(classes, expected);
        let sizes: Vec<f64> = points.iter().take(BATCHES.len()).map(|p| p.elements).collect();
        assert_eq!(sizes, [1024.0, 65536.0, 262144.0, 1048576.0]);
        assert!(
            points.iter().filter(|p| p.op != ElementwiseClass::MaxPool).all(|p| sizes.contains(&p.elements)),
            "attention's scores and cross-entropy's logits are as many as the others' outputs"
        );
        let pool: Vec<f64> = points.iter().filter(|p| p.op == ElementwiseClass::MaxPool).map(|p| p.elements).collect();
        assert_eq!(pool, [8192.0, 65536.0, 262144.0, 524288.0], "outputs: 8 x 32 x 32 per sample");
    }
}
