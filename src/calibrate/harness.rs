//! The differential measurement every calibration suite shares: a micro-graph trained through the backend's
//! own training step with phase timing (`Backend::run_in`), and one added node's cost as the difference of the
//! mean phases of a graph with the nodes and the same graph without them, the median over rounds. With
//! `--cpu-clock`, each run's phases are scaled by the process's CPU time over wall time. On a CUDA device each
//! run reads one batch again and again (`super::repeated_batch`) instead of generating the backend's pool.

use trainbench_contract::{Backend, BackendError, Budget, DeviceFamily, DeviceSelector, RunContext, RunPlan};
use trainbench_graph::graph::Graph;
use trainbench_graph::{OptimizerSpec, Precision};

/// Rounds per measurement (the median is kept): three, so that one round slowed by other work on a shared
/// machine moves nothing.
pub const ROUNDS: usize = 3;

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
        schedule: Default::default(),
        pipeline_layers: Vec::new(),
    }
}

/// Why a calibration measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The backend refused or failed the micro-graph.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The micro-graph could not be built.
    #[error(transparent)]
    Graph(#[from] trainbench_graph::ShapeError),
}

/// Mean phase seconds of one step of `graph` under `plan`; with `cpu_clock`, scaled by the process's CPU time
/// over the wall time of the run.
pub fn phases(
    backend: &mut dyn Backend,
    plan: &RunPlan,
    graph: &Graph,
    cpu_clock: bool,
) -> Result<StepPhases, MeasureError> {
    backend.check(plan, graph)?;
    let mut probe = trainbench_contract::backend::NoProbe;
    let wall0 = std::time::Instant::now();
    let cpu0 = crate::metrics::cpu::process_cpu_seconds();
    // On a CUDA device the batch is generated once and read again each step (`super::repeated_batch`).
    let mut repeated = (plan.device.family() == DeviceFamily::Cuda)
        .then(|| super::repeated_batch::RepeatedBatch::new(graph, plan.batch_size, plan.seed));
    let mut ctx = RunContext::new(&mut probe);
    ctx.data = repeated.as_mut().map(|r| r as &mut dyn trainbench_data::BatchSource);
    let raw = backend.run_in(plan, graph, &mut ctx)?;
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
) -> Result<StepPhases, MeasureError> {
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
) -> Result<Vec<StepPhases>, MeasureError> {
    for (with, _) in withs {
        backend.check(plan, with)?;
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
pub fn median_phases(rounds: &[StepPhases]) -> StepPhases {
    let m = |f: fn(&StepPhases) -> f64| crate::stats::median(&rounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0);
    StepPhases { forward: m(|p| p.forward), backward: m(|p| p.backward), optimizer: m(|p| p.optimizer) }
}
