//! What the backend's own training step costs beyond its kernels, measured by training micro-graphs through the
//! backend (`trainbench calibrate`) and read back by the model:
//!
//! - **Per node** (`calibration.node`): the fixed cost of one graph node in the forward and in the backward phase
//!   (dispatch, autograd recording, the autograd engine's node in backward, the backend's per-node work). A
//!   stack of [`NODE_STACK`] ReLUs (class `elementwise`) or linear layers (class `linear`) on 8 elements per sample
//!   at batch 1 is trained beside the graph without the stack; the difference of the mean phase times over
//!   [`NODE_STACK`] is one node's cost. The graph without the stack (input -> linear -> MSE) less its linear layer
//!   and its loss is the step's own fixed cost (class `step`). A 4-element add timed alone (`op_overhead_us`)
//!   misses most of this (autograd's per-node work in the backward above all).
//! - **Optimizer** (`calibration.optimizer`): the optimizer phase of a graph of many small tensors, of one linear
//!   layer of 8 x 8 and of one of 1 M, 4 M and 16.8 M parameters, per optimizer kind (SGD, SGD with momentum, with
//!   momentum and weight decay, Adam). The model solves the small layer, the many-tensor graph and the 1 M one for
//!   the step's own cost (the phase's fixed work: the gradients' norm read back, the optimizer's call), a per-tensor
//!   and a per-parameter cost, and reads the per-parameter cost by the parameter count between the large points
//!   (Adam on a CPU makes about seven passes over its state, allocating temporaries, where one pass was assumed). The largest point's state no
//!   longer fits a CPU's caches: past 4 M parameters the per-parameter cost still rose by half to two times (SGD
//!   with momentum 0.7 -> 1.2 ns, Adam net of its fresh temporaries 2.3 -> 3.3 ns, one core of an EPYC VM).
//!
//! - **Layers in the step** (`calibration.node`, classes `conv`, `linear-wide` and `embedding-bag`): a stack of
//!   [`LAYERS`] convolutions (16 channels, 3 x 3, 16 x 16 pixels), linear layers (256 x 256 on 16 rows per sample)
//!   or embedding bags (64 x 8 tables, 2 ids a sample, each added to a running sum) at batch 64,
//!   against the graph without the stack, per layer. The model compares each with its own price of that layer from the
//!   isolated-kernel grids (`super::fit`): what a layer inside a training step costs beyond the same kernel timed
//!   in a loop (a fresh output, a cold input), per byte the layer moves, charged to the layers of that class by their
//!   bytes.
//!
//! The differential measurement itself is [`super::harness`]'s.

use trainbench_contract::{Backend, DeviceSelector};
use trainbench_graph::graph::{Activation, BagMode, Graph, InputKind, LossKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec};

use super::harness::{MeasureError, ROUNDS, StepPhases, median_phases, per_added_node, phases, plan};
use crate::hardware::wire::{NodePoint, OptimizerPoint};
use crate::predict::layer::LOSS_OPS;
use crate::predict::price_classes::{NodeClass, OptimizerKind};

/// Nodes in the measured per-node stacks: 16, so that the difference to the graph without them is well above the
/// run-to-run noise of a step of a few tens of microseconds.
pub const NODE_STACK: usize = 16;
/// Features per sample of the node micro-graphs.
const FEATURES: usize = 8;
/// Linear layers (of [`FEATURES`] x [`FEATURES`]) of the many-tensor optimizer graph: 2 tensors each.
const MANY: usize = 32;
/// Sides of the single large linear layers of the optimizer graphs (1,049,600, 4,196,352 and 16,781,312
/// parameters: a weight of side x side and a bias of side).
const LARGE: [usize; 3] = [1024, 2048, 4096];
/// Side of the single small linear layer of the optimizer graphs (72 parameters in 2 tensors): the phase's own
/// cost, beside the many-tensor graph's per-tensor one.
const SMALL: usize = FEATURES;

/// Elements of the largest tensor of a measured optimizer graph of `tensors` tensors holding `parameters`: the
/// weight of a large graph's one linear layer (side x side beside a bias of side), else the many-tensor graph's
/// equal layers' weights.
pub fn largest_optimizer_tensor(tensors: u64, parameters: u64) -> f64 {
    if tensors == 2 {
        // side^2 + side = parameters: side is the integer part of the square root.
        let side = (parameters as f64).sqrt().floor();
        side * side
    } else {
        (FEATURES * FEATURES) as f64
    }
}
/// The optimizer measured for `kind`.
pub fn optimizer_spec(kind: OptimizerKind) -> OptimizerSpec {
    match kind {
        OptimizerKind::Sgd => OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.0, weight_decay: 0.0, nesterov: false },
        OptimizerKind::SgdMomentum => {
            OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.9, weight_decay: 0.0, nesterov: false }
        }
        OptimizerKind::SgdMomentumDecay => {
            OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.9, weight_decay: 5e-4, nesterov: false }
        }
        OptimizerKind::Adam => OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
    }
}

/// A node stacked by the per-node micro-graphs: ReLUs (class `elementwise`) or linear layers with bias (class
/// `linear`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackedNode {
    /// A ReLU: one framework operation.
    Elementwise,
    /// A linear layer with bias.
    Linear,
}

impl StackedNode {
    /// The class its point is recorded under.
    pub fn class(self) -> NodeClass {
        match self {
            Self::Elementwise => NodeClass::Elementwise,
            Self::Linear => NodeClass::Linear,
        }
    }
}

/// input [`FEATURES`] -> linear -> `stack` x `node` -> MSE (`stack` = 0: the base graph).
fn node_graph(node: StackedNode, stack: usize) -> Result<Graph, MeasureError> {
    let e = MeasureError::Graph;
    let name = if stack == 0 { "base".to_string() } else { node.class().name() };
    let mut b = GraphBuilder::new(format!("calibrate-node-{name}"));
    let x = b.input("x", &[FEATURES], InputKind::Dense).map_err(e)?;
    let t = b.input("t", &[FEATURES], InputKind::Dense).map_err(e)?;
    let mut y = b.linear("fc", x, FEATURES, true).map_err(e)?;
    for i in 0..stack {
        let name = format!("{name}{i}");
        y = match node {
            StackedNode::Linear => b.linear(&name, y, FEATURES, true),
            StackedNode::Elementwise => b.act(&name, y, Activation::Relu),
        }
        .map_err(e)?;
    }
    b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
    b.finish(1, "samples").map_err(e)
}

/// The per-node classes measured; `step` is derived from the base graph.
const NODE_CLASSES: [StackedNode; 2] = [StackedNode::Elementwise, StackedNode::Linear];

/// Layers in the stacks of [`layer_graph`].
pub const LAYERS: usize = 4;
/// Samples per step of the layer stacks.
const LAYER_BATCH: usize = 64;
/// Rows per sample of the linear stack (positions of a sequence: 1,024 rows per product at [`LAYER_BATCH`], as a
/// sequence model's layers have).
const LINEAR_ROWS: usize = 16;

/// A layer stack timed in the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerClass {
    /// 16 -> 16 channels, 3 x 3, on 16 x 16 pixels at batch 64 (`conv`).
    Conv,
    /// 4 -> 4 channels, 3 x 3, on 4 x 4 pixels at batch 1, where a convolution's fixed cost is most of it
    /// (`conv-small`).
    ConvSmall,
    /// 256 -> 256 linear layers on 16 rows per sample at batch 64 (`linear-wide`).
    LinearWide,
    /// Embedding bags of [`BAG_ROWS`] x [`FEATURES`] summing [`BAG_SIZE`] ids per sample at batch 64, each added
    /// to the running sum (`embedding-bag`).
    EmbeddingBag,
}

impl LayerClass {
    /// The class its point is recorded under.
    pub fn class(self) -> NodeClass {
        match self {
            Self::Conv => NodeClass::Conv,
            Self::ConvSmall => NodeClass::ConvSmall,
            Self::LinearWide => NodeClass::LinearWide,
            Self::EmbeddingBag => NodeClass::EmbeddingBag,
        }
    }

    /// Nodes a stacked layer adds to [`layer_graph`]: one, or an embedding bag and its add to the running sum.
    pub fn nodes_per_layer(self) -> usize {
        match self {
            Self::Conv | Self::ConvSmall | Self::LinearWide => 1,
            Self::EmbeddingBag => 2,
        }
    }

    /// The prefix of the stacked layers' names in [`layer_graph`] (each of a layer's
    /// [`nodes_per_layer`](Self::nodes_per_layer) nodes).
    pub fn layer_prefix(self) -> &'static str {
        match self {
            Self::Conv | Self::ConvSmall => "conv",
            Self::LinearWide => "wide",
            Self::EmbeddingBag => "bag",
        }
    }
}

/// Rows of the stacked embedding bags' tables (a DLRM smoke model's).
const BAG_ROWS: usize = 64;
/// Ids per sample each stacked embedding bag sums.
const BAG_SIZE: usize = 2;

/// The layer-stack micro-graph of `class` (`conv`: input [16, 16, 16] -> `stack` x conv 16 -> 16 3 x 3 ->
/// flatten -> linear 10 -> MSE; `conv-small`: the same with 4 channels of 4 x 4 pixels, where a convolution's
/// fixed cost is most of it; `linear-wide`: input [16, 256] -> linear 256 -> `stack` x linear 256 -> MSE;
/// `embedding-bag`: ids [2] -> a bag, then `stack` x (a bag of the same ids added to the sum) -> linear -> MSE).
pub fn layer_graph(class: LayerClass, stack: usize) -> Result<Graph, MeasureError> {
    let e = MeasureError::Graph;
    let mut b = GraphBuilder::new(format!("calibrate-layer-{}", class.class().name()));
    let conv = |c: usize, hw: usize, b: &mut GraphBuilder| -> Result<_, MeasureError> {
        let x = b.input("x", &[c, hw, hw], InputKind::Dense).map_err(e)?;
        let mut y = x;
        for i in 0..stack {
            y = b.conv(&format!("conv{i}"), y, trainbench_graph::ConvCfg::square(c, 3, 1, 1)).map_err(e)?;
        }
        let f = b.flatten("flat", y).map_err(e)?;
        let y = b.linear("fc", f, 10, true).map_err(e)?;
        Ok((y, b.input("t", &[10], InputKind::Dense).map_err(e)?))
    };
    let (y, t) = match class {
        LayerClass::Conv => conv(16, 16, &mut b)?,
        LayerClass::ConvSmall => conv(4, 4, &mut b)?,
        LayerClass::EmbeddingBag => {
            let ids = b.input("ids", &[BAG_SIZE], InputKind::Tokens { vocab: BAG_ROWS }).map_err(e)?;
            let mut y = b.embedding_bag("table", ids, BAG_ROWS, FEATURES, BagMode::Sum).map_err(e)?;
            for i in 0..stack {
                let bag = b.embedding_bag(&format!("bag{i}"), ids, BAG_ROWS, FEATURES, BagMode::Sum).map_err(e)?;
                y = b.add_nodes(&format!("bag{i}-sum"), &[y, bag]).map_err(e)?;
            }
            let y = b.linear("fc", y, FEATURES, true).map_err(e)?;
            (y, b.input("t", &[FEATURES], InputKind::Dense).map_err(e)?)
        }
        LayerClass::LinearWide => {
            let x = b.input("x", &[LINEAR_ROWS, 256], InputKind::Dense).map_err(e)?;
            let mut y = b.linear("fc", x, 256, true).map_err(e)?;
            for i in 0..stack {
                y = b.linear(&format!("wide{i}"), y, 256, true).map_err(e)?;
            }
            (y, b.input("t", &[LINEAR_ROWS, 256], InputKind::Dense).map_err(e)?)
        }
    };
    b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
    b.finish(1, "samples").map_err(e)
}

/// The layer stacks measured, by class.
pub const LAYER_CLASSES: [LayerClass; 4] =
    [LayerClass::Conv, LayerClass::ConvSmall, LayerClass::LinearWide, LayerClass::EmbeddingBag];

/// Samples per step of a layer stack: one for the fixed-cost one.
pub fn layer_batch(class: LayerClass) -> usize {
    match class {
        LayerClass::ConvSmall => 1,
        LayerClass::Conv | LayerClass::LinearWide | LayerClass::EmbeddingBag => LAYER_BATCH,
    }
}

/// Measure the layer stacks ([`LAYER_CLASSES`]): seconds per layer in each phase.
pub fn measure_layers(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> Result<Vec<NodePoint>, MeasureError> {
    let mut points = Vec::new();
    for class in LAYER_CLASSES {
        let steps = if layer_batch(class) == 1 { 40 } else { 15 };
        let plan = plan(device, cpu_threads, layer_batch(class), optimizer_spec(OptimizerKind::Sgd), steps);
        let (base, with) = (layer_graph(class, 0)?, layer_graph(class, LAYERS)?);
        let m = per_added_node(backend, &plan, (&base, &with), LAYERS as f64, cpu_clock)?;
        points.push(NodePoint { class: class.class(), forward_s: m.forward, backward_s: m.backward });
    }
    Ok(points)
}

/// Measure the fixed per-node costs (`elementwise`, `linear`) and the step's own (`step`).
pub fn measure_nodes(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> Result<Vec<NodePoint>, MeasureError> {
    let plan = plan(device, cpu_threads, 1, optimizer_spec(OptimizerKind::Sgd), 60);
    let base = node_graph(StackedNode::Elementwise, 0)?;
    let mut base_rounds = Vec::new();
    let mut per_class: Vec<Vec<StepPhases>> = vec![Vec::new(); NODE_CLASSES.len()];
    for _ in 0..ROUNDS {
        let b = phases(backend, &plan, &base, cpu_clock)?;
        base_rounds.push(b);
        for (i, class) in NODE_CLASSES.iter().enumerate() {
            let w = phases(backend, &plan, &node_graph(*class, NODE_STACK)?, cpu_clock)?;
            let per = |a: f64, b: f64| ((a - b) / NODE_STACK as f64).max(0.0);
            per_class[i].push(StepPhases {
                forward: per(w.forward, b.forward),
                backward: per(w.backward, b.backward),
                optimizer: 0.0,
            });
        }
    }
    let mut points: Vec<NodePoint> = NODE_CLASSES
        .iter()
        .zip(&per_class)
        .map(|(class, rounds)| {
            let m = median_phases(rounds);
            NodePoint { class: class.class(), forward_s: m.forward, backward_s: m.backward }
        })
        .collect();
    // The base graph less its linear layer and its loss (priced per operation at the element-wise cost).
    let base = median_phases(&base_rounds);
    let (lin, elem) = (&points[1], &points[0]);
    points.push(NodePoint {
        class: NodeClass::Step,
        forward_s: (base.forward - lin.forward_s - LOSS_OPS.0 * elem.forward_s).max(0.0),
        backward_s: (base.backward - lin.backward_s - LOSS_OPS.1 * elem.backward_s).max(0.0),
    });
    Ok(points)
}

/// input -> `MANY` linear layers of `FEATURES` -> MSE (many small tensors), or input -> one linear layer of
/// `side` x `side` -> MSE (one large weight).
fn optimizer_graph(side: Option<usize>) -> Result<Graph, MeasureError> {
    let e = MeasureError::Graph;
    let mut b = GraphBuilder::new("calibrate-optimizer");
    let f = side.unwrap_or(FEATURES);
    let x = b.input("x", &[f], InputKind::Dense).map_err(e)?;
    let t = b.input("t", &[f], InputKind::Dense).map_err(e)?;
    let mut y = x;
    for i in 0..if side.is_some() { 1 } else { MANY } {
        y = b.linear(&format!("fc{i}"), y, f, true).map_err(e)?;
    }
    b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
    b.finish(1, "samples").map_err(e)
}

/// Measure the optimizer phase per kind of [`OptimizerKind::ALL`] on the many-tensor graph, the small one-layer graph
/// and the large ones.
pub fn measure_optimizers(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> Result<Vec<OptimizerPoint>, MeasureError> {
    let mut points = Vec::new();
    for kind in OptimizerKind::ALL {
        for side in [None, Some(SMALL)].into_iter().chain(LARGE.map(Some)) {
            let graph = optimizer_graph(side)?;
            let steps = if side.is_some_and(|s| s > SMALL) { 10 } else { 40 };
            let plan = plan(device, cpu_threads, 1, optimizer_spec(kind), steps);
            let mut rounds = Vec::new();
            for _ in 0..ROUNDS {
                rounds.push(phases(backend, &plan, &graph, cpu_clock)?);
            }
            let tensors = trainbench_graph::params::graph_tensors(&graph).iter().filter(|(_, d)| d.trainable()).count();
            let parameters = trainbench_graph::analysis::analyze(&graph).parameters;
            points.push(OptimizerPoint {
                kind,
                tensors: tensors as u64,
                parameters,
                seconds: median_phases(&rounds).optimizer,
            });
        }
    }
    Ok(points)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_graphs_hold_what_they_measure() {
        let a = trainbench_graph::analysis::analyze(&optimizer_graph(Some(1024)).unwrap());
        assert_eq!(a.parameters, 1024 * 1024 + 1024);
        for side in LARGE {
            let large = trainbench_graph::analysis::analyze(&optimizer_graph(Some(side)).unwrap());
            assert_eq!(largest_optimizer_tensor(2, large.parameters), (side * side) as f64);
        }
        let small = trainbench_graph::analysis::analyze(&optimizer_graph(Some(SMALL)).unwrap());
        assert_eq!(small.parameters, 72);
        assert_eq!(largest_optimizer_tensor(2, small.parameters), 64.0);
        let many = optimizer_graph(None).unwrap();
        let tensors = trainbench_graph::params::graph_tensors(&many).iter().filter(|(_, d)| d.trainable()).count();
        assert_eq!(tensors, 2 * MANY);
        let stacked = node_graph(StackedNode::Linear, NODE_STACK).unwrap();
        assert_eq!(stacked.nodes.len(), node_graph(StackedNode::Linear, 0).unwrap().nodes.len() + NODE_STACK);
    }

    #[test]
    fn every_measured_optimizer_stands_for_its_kind() {
        for kind in OptimizerKind::ALL {
            assert_eq!(OptimizerKind::of(&optimizer_spec(kind)), kind);
        }
        assert!(matches!(optimizer_spec(OptimizerKind::Adam), OptimizerSpec::Adam { .. }));
    }

    #[test]
    fn the_mock_backend_measures_nodes_and_optimizers() {
        let mut mock = trainbench_contract::mock::MockBackend::new(Default::default());
        let layers = measure_layers(&mut mock, DeviceSelector::Cpu, None, false).unwrap();
        assert_eq!(layers.iter().map(|p| p.class).collect::<Vec<_>>(), LAYER_CLASSES.map(LayerClass::class));
        for class in LAYER_CLASSES {
            let stacked = layer_graph(class, LAYERS).unwrap();
            let per_layer = class.nodes_per_layer();
            assert_eq!(stacked.nodes.len(), layer_graph(class, 0).unwrap().nodes.len() + per_layer * LAYERS);
            let prefixed = stacked.nodes.iter().filter(|n| n.name.starts_with(class.layer_prefix())).count();
            assert_eq!(prefixed, per_layer * LAYERS, "{class:?}");
        }
        let nodes = measure_nodes(&mut mock, DeviceSelector::Cpu, None, false).unwrap();
        let classes = [NodeClass::Elementwise, NodeClass::Linear, NodeClass::Step];
        assert_eq!(nodes.iter().map(|p| p.class).collect::<Vec<_>>(), classes);
        let opt = measure_optimizers(&mut mock, DeviceSelector::Cpu, None, false).unwrap();
        assert_eq!(opt.len(), OptimizerKind::ALL.len() * (2 + LARGE.len()));
        assert!(opt.iter().all(|p| p.seconds >= 0.0 && p.tensors >= 2));
    }
}
