//! What the backend's own training step costs beyond its kernels, measured by training micro-graphs through the
//! backend (`trainbench calibrate`) and read back by the model:
//!
//! - **Per node** (`calibration.node`): the fixed cost of one graph node in the forward and in the backward phase
//!   (dispatch, autograd recording, the autograd engine's node in backward, the backend's per-node work). A
//!   stack of [`STACK`] ReLUs (class `elementwise`) or linear layers (class `linear`) on 8 elements per sample
//!   at batch 1 is trained beside the graph without the stack; the difference of the mean phase times over
//!   [`STACK`] is one node's cost. The graph without the stack (input -> linear -> MSE) less its linear layer
//!   and its loss is the step's own fixed cost (class `step`). A 4-element add timed alone (`op_overhead_us`)
//!   misses most of this: on the development machine the backward of a small MLP took 10x what it predicted.
//! - **Optimizer** (`calibration.optimizer`): the optimizer phase of a graph of many small tensors and of one linear
//!   layer of 1 M and 4 M parameters, per optimizer kind (SGD, SGD with momentum, with momentum and weight decay,
//!   Adam). The model solves the many-tensor graph and the 1 M one for a per-tensor and a per-parameter cost, and reads
//!   the per-parameter cost by the parameter count between the large points (Adam on a CPU makes about seven passes
//!   over its state, allocating temporaries, where one pass was assumed).
//!
//! - **Layers in the step** (`calibration.node`, classes `conv` and `linear-wide`): a stack of [`LAYERS`]
//!   convolutions (16 channels, 3 x 3, 16 x 16 pixels) or linear layers (256 x 256 on 16 rows per sample) at batch 64,
//!   against the graph without the stack, per layer. The model compares each with its own price of that layer from the
//!   isolated-kernel grids ([`in_step_excess`]): what a layer inside a training step costs beyond the same kernel timed
//!   in a loop (a fresh output, a cold input), per byte the layer moves, charged to the layers of that class by their
//!   bytes.
//!
//! With `--cpu-clock`, each run's phases are scaled by the process's CPU time over wall time.

use trainbench_contract::{Backend, Budget, DeviceSelector, RunContext, RunPlan};
use trainbench_graph::graph::{Activation, Graph, InputKind, LossKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec, Precision};

use crate::hardware::wire::{NodePoint, OptimizerPoint};

/// Nodes in the measured stacks.
pub const STACK: usize = 16;
/// Features per sample of the node micro-graphs.
const FEATURES: usize = 8;
/// Linear layers (of [`FEATURES`] x [`FEATURES`]) of the many-tensor optimizer graph: 2 tensors each.
const MANY: usize = 32;
/// Sides of the single large linear layers of the optimizer graphs (1,049,600 and 4,196,352 parameters).
const LARGE: [usize; 2] = [1024, 2048];
/// Rounds per measurement (the median is kept).
const ROUNDS: usize = 3;

/// The optimizer kinds measured, by the name the profile records.
pub const OPTIMIZERS: [&str; 4] = ["sgd", "sgd-momentum", "sgd-momentum-decay", "adam"];

/// The measured kind that stands for `optimizer`: plain SGD, SGD with momentum, SGD with weight decay (with or
/// without momentum: the decay is another pass, allocating), Adam and AdamW.
pub fn optimizer_kind(optimizer: &OptimizerSpec) -> &'static str {
    match optimizer {
        OptimizerSpec::Sgd { weight_decay, .. } if *weight_decay > 0.0 => "sgd-momentum-decay",
        OptimizerSpec::Sgd { momentum, .. } if *momentum == 0.0 => "sgd",
        OptimizerSpec::Sgd { .. } => "sgd-momentum",
        OptimizerSpec::Adam { .. } | OptimizerSpec::Adamw { .. } => "adam",
    }
}

/// The optimizer measured for `kind` of [`OPTIMIZERS`]; another name is an error naming it and the known ones.
fn optimizer_spec(kind: &str) -> Result<OptimizerSpec, String> {
    Ok(match kind {
        "sgd" => OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.0, weight_decay: 0.0, nesterov: false },
        "sgd-momentum" => OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.9, weight_decay: 0.0, nesterov: false },
        "sgd-momentum-decay" => OptimizerSpec::Sgd { lr: 1e-3, momentum: 0.9, weight_decay: 5e-4, nesterov: false },
        "adam" => OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        other => return Err(format!("unknown optimizer kind `{other}` (known: {})", OPTIMIZERS.join(", "))),
    })
}

/// Mean seconds per step of the three phases of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepPhases {
    /// Forward (loss included).
    pub forward: f64,
    /// Backward.
    pub backward: f64,
    /// Optimizer.
    pub optimizer: f64,
}

/// The plan of a micro-graph run: fp32, one sample per step unless said, phases timed.
pub fn plan(
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    batch: usize,
    optimizer: OptimizerSpec,
    steps: u64,
) -> RunPlan {
    RunPlan {
        id: "calibrate-step".into(),
        config: "calibrate-step".into(),
        batch_size: batch,
        precision: Precision::Fp32,
        device,
        topology: Default::default(),
        warmup: 3,
        budget: Budget::Iterations(steps),
        repeat: 0,
        seed: 0,
        optimizer,
        phase_timing: true,
        timeout_s: None,
        cpu_threads,
        target: None,
        numerics: Default::default(),
    }
}

/// Mean phase seconds of one step of `graph` under `plan`; with `cpu_clock`, scaled by the process's CPU time
/// over the wall time of the run.
pub fn phases(backend: &mut dyn Backend, plan: &RunPlan, graph: &Graph, cpu_clock: bool) -> Result<StepPhases, String> {
    backend.check(plan, graph).map_err(|e| e.to_string())?;
    let mut probe = trainbench_contract::backend::NoProbe;
    let wall0 = std::time::Instant::now();
    let cpu0 = crate::metrics::cpu::process_cpu_seconds();
    let raw = backend.run_in(plan, graph, &mut RunContext::new(&mut probe)).map_err(|e| e.to_string())?;
    let wall = wall0.elapsed().as_secs_f64();
    let scale = match (cpu_clock, cpu0, crate::metrics::cpu::process_cpu_seconds()) {
        (true, Some(a), Some(b)) if wall > 0.0 && b > a => (b - a) / wall,
        _ => 1.0,
    };
    let all = raw.steps.steady_from(0).block;
    let n = all.n.max(1) as f64;
    let mean = |f: fn(&trainbench_contract::PhaseTimes) -> f64| f(&all.sum) / n * scale;
    Ok(StepPhases {
        forward: mean(|s| s.forward_s),
        backward: mean(|s| s.backward_s),
        optimizer: mean(|s| s.optimizer_s),
    })
}

/// One added node's cost in each phase: the mean phases of `with` (the graph `base` plus `copies` nodes) less
/// those of `base`, per node and never negative; the median of [`ROUNDS`] rounds.
pub fn per_added_node(
    backend: &mut dyn Backend,
    plan: &RunPlan,
    (base, with): (&Graph, &Graph),
    copies: f64,
    cpu_clock: bool,
) -> Result<StepPhases, String> {
    Ok(per_added_nodes(backend, plan, base, &[(with, copies)], cpu_clock, ROUNDS)?.pop().unwrap_or_default())
}

/// [`per_added_node`] for several graphs beside one base, over `rounds` rounds: each round runs the base once and
/// then every `(graph, copies)` of `withs`; one result per graph, in their order.
pub fn per_added_nodes(
    backend: &mut dyn Backend,
    plan: &RunPlan,
    base: &Graph,
    withs: &[(&Graph, f64)],
    cpu_clock: bool,
    rounds: usize,
) -> Result<Vec<StepPhases>, String> {
    for (with, _) in withs {
        backend.check(plan, with).map_err(|e| e.to_string())?;
    }
    let mut per_round: Vec<Vec<StepPhases>> = vec![Vec::new(); withs.len()];
    for _ in 0..rounds {
        let b = phases(backend, plan, base, cpu_clock)?;
        for ((with, copies), measured) in withs.iter().zip(&mut per_round) {
            let w = phases(backend, plan, with, cpu_clock)?;
            let per = |a: f64, b: f64| ((a - b) / copies).max(0.0);
            measured.push(StepPhases {
                forward: per(w.forward, b.forward),
                backward: per(w.backward, b.backward),
                optimizer: 0.0,
            });
        }
    }
    Ok(per_round.iter().map(|r| median_phases(r)).collect())
}

/// The median of each phase over rounds.
fn median_phases(rounds: &[StepPhases]) -> StepPhases {
    let m = |f: fn(&StepPhases) -> f64| crate::stats::median(&rounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0);
    StepPhases { forward: m(|p| p.forward), backward: m(|p| p.backward), optimizer: m(|p| p.optimizer) }
}

/// input [`FEATURES`] -> linear -> `stack` x the class's node -> MSE. `elementwise` stacks ReLUs, `linear`
/// stacks linear layers with bias.
fn node_graph(class: &str, stack: usize) -> Result<Graph, String> {
    let e = |e: trainbench_graph::ShapeError| e.to_string();
    let mut b = GraphBuilder::new(format!("calibrate-node-{class}"));
    let x = b.input("x", &[FEATURES], InputKind::Dense).map_err(e)?;
    let t = b.input("t", &[FEATURES], InputKind::Dense).map_err(e)?;
    let mut y = b.linear("fc", x, FEATURES, true).map_err(e)?;
    for i in 0..stack {
        let name = format!("{class}{i}");
        y = match class {
            "linear" => b.linear(&name, y, FEATURES, true),
            "elementwise" => b.act(&name, y, Activation::Relu),
            other => return Err(format!("unknown node class `{other}` (known: {})", NODE_CLASSES.join(", "))),
        }
        .map_err(e)?;
    }
    b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
    b.finish(1, "samples").map_err(e)
}

/// The per-node classes measured; `step` is derived from the base graph.
const NODE_CLASSES: [&str; 2] = ["elementwise", "linear"];

/// Layers in the stacks of [`layer_graph`].
pub const LAYERS: usize = 4;
/// Samples per step of the layer stacks.
const LAYER_BATCH: usize = 64;
/// Rows per sample of the linear stack (positions of a sequence: 1,024 rows per product at [`LAYER_BATCH`], as a
/// sequence model's layers have).
const LINEAR_ROWS: usize = 16;

/// The layer-stack micro-graph of `class` (`conv`: input [16, 16, 16] -> `stack` x conv 16 -> 16 3 x 3 ->
/// flatten -> linear 10 -> MSE; `conv-small`: the same with 4 channels of 4 x 4 pixels, where a convolution's
/// fixed cost is most of it; `linear-wide`: input [16, 256] -> linear 256 -> `stack` x linear 256 -> MSE).
pub fn layer_graph(class: &str, stack: usize) -> Result<Graph, String> {
    let e = |e: trainbench_graph::ShapeError| e.to_string();
    if !LAYER_CLASSES.contains(&class) {
        return Err(format!("unknown layer class `{class}` (known: {})", LAYER_CLASSES.join(", ")));
    }
    let mut b = GraphBuilder::new(format!("calibrate-layer-{class}"));
    let y = if class.starts_with("conv") {
        let (c, hw) = if class == "conv" { (16, 16) } else { (4, 4) };
        let x = b.input("x", &[c, hw, hw], InputKind::Dense).map_err(e)?;
        let mut y = x;
        for i in 0..stack {
            y = b.conv(&format!("conv{i}"), y, trainbench_graph::ConvCfg::square(c, 3, 1, 1)).map_err(e)?;
        }
        let f = b.flatten("flat", y).map_err(e)?;
        b.linear("fc", f, 10, true).map_err(e)?
    } else {
        let x = b.input("x", &[LINEAR_ROWS, 256], InputKind::Dense).map_err(e)?;
        let mut y = b.linear("fc", x, 256, true).map_err(e)?;
        for i in 0..stack {
            y = b.linear(&format!("wide{i}"), y, 256, true).map_err(e)?;
        }
        y
    };
    let width = if class.starts_with("conv") { 10 } else { 256 };
    let t = if class.starts_with("conv") {
        b.input("t", &[width], InputKind::Dense).map_err(e)?
    } else {
        b.input("t", &[LINEAR_ROWS, width], InputKind::Dense).map_err(e)?
    };
    b.loss("loss", LossKind::Mse, &[y, t]).map_err(e)?;
    b.finish(1, "samples").map_err(e)
}

/// The layer stacks measured, by class.
pub const LAYER_CLASSES: [&str; 3] = ["conv", "conv-small", "linear-wide"];

/// Samples per step of a layer stack: one for the fixed-cost one.
fn layer_batch(class: &str) -> usize {
    if class == "conv-small" { 1 } else { LAYER_BATCH }
}

/// Measure the layer stacks ([`LAYER_CLASSES`]): seconds per layer in each phase.
pub fn measure_layers(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> Result<Vec<NodePoint>, String> {
    let mut points = Vec::new();
    for class in LAYER_CLASSES {
        let steps = if layer_batch(class) == 1 { 40 } else { 15 };
        let plan = plan(device, cpu_threads, layer_batch(class), optimizer_spec("sgd")?, steps);
        let (base, with) = (layer_graph(class, 0)?, layer_graph(class, LAYERS)?);
        let m = per_added_node(backend, &plan, (&base, &with), LAYERS as f64, cpu_clock)?;
        points.push(NodePoint { class: class.into(), forward_s: m.forward, backward_s: m.backward });
    }
    Ok(points)
}

/// What a layer costs inside the training step beyond its isolated kernel, per byte it moves, per phase:
/// `conv` for convolutions, `linear` for linear layers; 0 where not measured. The excess is taken per byte, not
/// as a factor on FLOPs: it is the memory around the kernel (a freshly allocated output touched for the first
/// time, an input no longer in cache), which is a large part of a 16-channel convolution and a small part of a
/// 512-channel one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InStep {
    /// Convolutions (forward, backward), seconds per byte.
    pub conv: (f64, f64),
    /// Convolutions (forward, backward), seconds per call: with the 4-channel stack measured, the excess is a
    /// fixed part per call plus a part per byte, solved from the two stacks.
    pub conv_fixed: (f64, f64),
    /// Linear layers (forward, backward), seconds per byte.
    pub linear: (f64, f64),
}

/// The in-step excess of a calibration: each measured layer stack's time per layer, less the model's fixed cost
/// and kernel time for that layer (`base`: the model without the excess), over the layer phase's bytes; never
/// negative.
pub fn in_step_excess(c: &crate::hardware::wire::Calibration, base: &super::device::DeviceModel) -> InStep {
    // (bytes, excess seconds) per layer and phase of one measured stack.
    let measured = |class: &str| -> Option<[(f64, f64); 2]> {
        let point = c.node.iter().find(|p| p.class == class)?;
        let g = layer_graph(class, LAYERS).ok()?;
        let analysis = trainbench_graph::analysis::analyze(&g);
        let sgd = optimizer_spec("sgd").ok()?;
        let step = super::roofline::step(&g, &analysis, layer_batch(class), Precision::Fp32, &sgd, base);
        let prefix = if class.starts_with("conv") { "conv" } else { "wide" };
        let stacked: Vec<_> = step.layers.iter().filter(|l| l.name.starts_with(prefix)).collect();
        if stacked.is_empty() {
            return None;
        }
        let n = stacked.len() as f64;
        let mean = |f: fn(&super::roofline::PhaseCost) -> f64, backward: bool| {
            stacked.iter().map(|l| f(if backward { &l.backward } else { &l.forward })).sum::<f64>() / n
        };
        let excess = |measured: f64, backward: bool| {
            (mean(|p| p.bytes, backward), (measured - mean(|p| p.time_s, backward)).max(0.0))
        };
        Some([excess(point.forward_s, false), excess(point.backward_s, true)])
    };
    let per_byte = |(bytes, excess): (f64, f64)| if bytes > 0.0 { excess / bytes } else { 0.0 };
    let mut f = InStep::default();
    if let Some([fw, bw]) = measured("linear-wide") {
        f.linear = (per_byte(fw), per_byte(bw));
    }
    match (measured("conv"), measured("conv-small")) {
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

/// Framework operations of the base graph's MSE loss (as the roofline counts a loss other than cross-entropy).
const MSE_OPS: f64 = 3.0;

/// Measure the fixed per-node costs (`elementwise`, `linear`) and the step's own (`step`).
pub fn measure_nodes(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> Result<Vec<NodePoint>, String> {
    let plan = plan(device, cpu_threads, 1, optimizer_spec("sgd")?, 60);
    let base = node_graph("base", 0)?;
    let mut base_rounds = Vec::new();
    let mut per_class: Vec<Vec<StepPhases>> = vec![Vec::new(); NODE_CLASSES.len()];
    for _ in 0..ROUNDS {
        let b = phases(backend, &plan, &base, cpu_clock)?;
        base_rounds.push(b);
        for (i, class) in NODE_CLASSES.iter().enumerate() {
            let w = phases(backend, &plan, &node_graph(class, STACK)?, cpu_clock)?;
            let per = |a: f64, b: f64| ((a - b) / STACK as f64).max(0.0);
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
            NodePoint { class: (*class).to_string(), forward_s: m.forward, backward_s: m.backward }
        })
        .collect();
    // The base graph less its linear layer and its loss (priced per operation at the element-wise cost).
    let base = median_phases(&base_rounds);
    let (lin, elem) = (&points[1], &points[0]);
    points.push(NodePoint {
        class: "step".into(),
        forward_s: (base.forward - lin.forward_s - MSE_OPS * elem.forward_s).max(0.0),
        backward_s: (base.backward - lin.backward_s - MSE_OPS * elem.backward_s).max(0.0),
    });
    Ok(points)
}

/// input -> `MANY` linear layers of `FEATURES` -> MSE (many small tensors), or input -> one linear layer of
/// `side` x `side` -> MSE (one large weight).
fn optimizer_graph(side: Option<usize>) -> Result<Graph, String> {
    let e = |e: trainbench_graph::ShapeError| e.to_string();
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

/// Measure the optimizer phase per kind of [`OPTIMIZERS`] on the many-tensor graph and the large ones.
pub fn measure_optimizers(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> Result<Vec<OptimizerPoint>, String> {
    let mut points = Vec::new();
    for kind in OPTIMIZERS {
        for side in [None].into_iter().chain(LARGE.map(Some)) {
            let graph = optimizer_graph(side)?;
            let steps = if side.is_some() { 10 } else { 40 };
            let plan = plan(device, cpu_threads, 1, optimizer_spec(kind)?, steps);
            let mut rounds = Vec::new();
            for _ in 0..ROUNDS {
                rounds.push(phases(backend, &plan, &graph, cpu_clock)?);
            }
            let tensors = trainbench_graph::params::graph_tensors(&graph).iter().filter(|(_, d)| d.trainable()).count();
            let parameters = trainbench_graph::analysis::analyze(&graph).parameters;
            points.push(OptimizerPoint {
                kind: kind.to_string(),
                tensors: tensors as u64,
                parameters,
                seconds: median_phases(&rounds).optimizer,
            });
        }
    }
    Ok(points)
}

/// The model's optimizer cost for one kind: seconds per tensor and, by parameter count, per parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerCost {
    /// Seconds per parameter tensor.
    pub per_tensor_s: f64,
    /// (parameters, seconds per parameter) of the large graphs, sorted by parameters.
    pub per_parameter: Vec<(f64, f64)>,
}

impl OptimizerCost {
    /// The cost of `kind` from the measured points: the many-tensor graph (the fewest parameters per tensor) and
    /// the smallest large one solved for the per-tensor and per-parameter costs; every large graph then gives
    /// its per-parameter cost net of its tensors. `None` without two points of the kind.
    pub fn of(points: &[OptimizerPoint], kind: &str) -> Option<Self> {
        let mut v: Vec<&OptimizerPoint> = points.iter().filter(|p| p.kind == kind && p.tensors > 0).collect();
        v.sort_by(|a, b| {
            let r = |p: &OptimizerPoint| p.parameters as f64 / p.tensors as f64;
            r(a).total_cmp(&r(b))
        });
        let (many, large) = (v.first()?, v.get(1)?);
        let (tm, pm, sm) = (many.tensors as f64, many.parameters as f64, many.seconds);
        let (tl, pl, sl) = (large.tensors as f64, large.parameters as f64, large.seconds);
        let det = tm * pl - tl * pm;
        if det.abs() < f64::EPSILON {
            return None;
        }
        let per_tensor_s = ((sm * pl - sl * pm) / det).max(0.0);
        let mut per_parameter: Vec<(f64, f64)> = v[1..]
            .iter()
            .map(|p| {
                (p.parameters as f64, ((p.seconds - p.tensors as f64 * per_tensor_s) / p.parameters as f64).max(0.0))
            })
            .collect();
        per_parameter.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(Self { per_tensor_s, per_parameter })
    }

    /// Seconds of one step over `tensors` tensors holding `parameters` parameters: per-parameter cost log-log
    /// interpolated between the measured sizes, flat beyond them.
    pub fn seconds(&self, tensors: f64, parameters: f64) -> f64 {
        let per = super::device::interpolate(&self.per_parameter, parameters).unwrap_or(0.0);
        tensors * self.per_tensor_s + parameters * per
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_graphs_hold_what_they_measure() {
        let a = trainbench_graph::analysis::analyze(&optimizer_graph(Some(1024)).unwrap());
        assert_eq!(a.parameters, 1024 * 1024 + 1024);
        let many = optimizer_graph(None).unwrap();
        let tensors = trainbench_graph::params::graph_tensors(&many).iter().filter(|(_, d)| d.trainable()).count();
        assert_eq!(tensors, 2 * MANY);
        let stacked = node_graph("linear", STACK).unwrap();
        assert_eq!(stacked.nodes.len(), node_graph("linear", 0).unwrap().nodes.len() + STACK);
    }

    #[test]
    fn an_unknown_optimizer_or_class_is_an_error_naming_it_and_the_known_ones() {
        for kind in OPTIMIZERS {
            assert!(optimizer_spec(kind).is_ok(), "{kind}");
        }
        assert!(matches!(optimizer_spec("adam").unwrap(), OptimizerSpec::Adam { .. }));
        let e = optimizer_spec("lamb").unwrap_err();
        assert!(e.contains("`lamb`") && e.contains("sgd-momentum-decay") && e.contains("adam"), "{e}");
        let e = node_graph("softmax", STACK).unwrap_err();
        assert!(e.contains("`softmax`") && e.contains("elementwise, linear"), "{e}");
        let e = layer_graph("conv-large", LAYERS).unwrap_err();
        assert!(e.contains("`conv-large`") && e.contains("conv-small"), "{e}");
    }

    #[test]
    fn per_tensor_and_per_parameter_costs_are_solved_back() {
        // 2 us per tensor, 1 ns per parameter up to 1 M, 2 ns at 4 M.
        let point = |tensors: u64, parameters: u64, per: f64| OptimizerPoint {
            kind: "adam".into(),
            tensors,
            parameters,
            seconds: tensors as f64 * 2e-6 + parameters as f64 * per,
        };
        let points = vec![point(64, 2304, 1e-9), point(2, 1_049_600, 1e-9), point(2, 4_196_352, 2e-9)];
        let c = OptimizerCost::of(&points, "adam").unwrap();
        assert!((c.per_tensor_s - 2e-6).abs() < 1e-12, "{c:?}");
        assert!((c.seconds(10.0, 1_049_600.0) - (20e-6 + 1_049_600.0 * 1e-9)).abs() < 1e-9);
        assert!((c.seconds(2.0, 4_196_352.0) - points[2].seconds).abs() < 1e-9);
        // Between the sizes, between the costs; other kinds are not guessed.
        let mid = c.seconds(0.0, 2e6) / 2e6;
        assert!(mid > 1e-9 && mid < 2e-9);
        assert!(OptimizerCost::of(&points, "sgd").is_none());
    }

    #[test]
    fn the_mock_backend_measures_nodes_and_optimizers() {
        let mut mock = trainbench_contract::mock::MockBackend::new(Default::default());
        let layers = measure_layers(&mut mock, DeviceSelector::Cpu, None, false).unwrap();
        assert_eq!(layers.iter().map(|p| p.class.as_str()).collect::<Vec<_>>(), LAYER_CLASSES);
        assert_eq!(
            layer_graph("conv", LAYERS).unwrap().nodes.len(),
            layer_graph("conv", 0).unwrap().nodes.len() + LAYERS
        );
        let nodes = measure_nodes(&mut mock, DeviceSelector::Cpu, None, false).unwrap();
        assert_eq!(nodes.iter().map(|p| p.class.as_str()).collect::<Vec<_>>(), ["elementwise", "linear", "step"]);
        let opt = measure_optimizers(&mut mock, DeviceSelector::Cpu, None, false).unwrap();
        assert_eq!(opt.len(), OPTIMIZERS.len() * 3);
        assert!(opt.iter().all(|p| p.seconds >= 0.0 && p.tensors >= 2));
    }
}
