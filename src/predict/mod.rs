//! The PAI performance model: T_iter = T_data + T_compute + T_comm, predicted for a configuration on a hardware
//! profile before anything runs.
//!
//! - T_compute ([`roofline`]): per layer and phase, FLOPs over the compute rate (the datasheet peak, or the
//!   calibrated rate of a kernel of that size) against bytes over the memory bandwidth, whichever is larger
//!   (marked compute- or memory-bound), plus a per-operation overhead from calibration; the optimizer step is
//!   memory-bound.
//! - T_data: the per-device batch's input bytes over the host link (zero when the device is the host).
//! - T_comm ([`comm`]): the strategy's volume over the link the topology names; the step pays what the
//!   engine's overlap with the backward pass leaves exposed ([`comm::exposed`]).
//! - Totals: serial (PAI's model, no overlap) and overlapped (input prefetched under the step; the exchange
//!   hidden under backward): `max(T_data, T_fwd + max(T_bwd, T_comm) + T_opt)`.
//!
//! The model reads coefficients ([`rates::Coefficients`], one per precision, stored in the profile's `fitted`
//! table: fitted from its calibration when `trainbench calibrate` wrote it, or when a version 1 profile was
//! loaded, `crate::hardware::load`) and never measures nor fits. Each correction it applies is a [`Term`]
//! ([`terms`]); every phase carries its seconds by term, and [`predict_with`] prices with some terms switched off.
//! Names a calibration records are typed ([`price_classes`]). A graph is analysed once ([`AnalyzedGraph`]) for
//! as many predictions as asked: [`whatif`] re-predicts it with one thing changed (strategy, a link, the device,
//! the precision).

pub mod comm;
pub mod conv_classes;
pub mod elementwise_work;
pub mod error;
pub mod fit_and_rates;
pub mod fresh_pages;
pub mod fresh_rates;
pub mod layer;
pub mod mesh;
mod mesh_split;
pub mod moe_price;
pub mod parallel;
pub mod pipeline_step;
pub mod price_classes;
pub mod product_rates;
pub mod rates;
pub mod record;
pub mod roofline;
pub mod shaped_attention;
pub mod sharding;
pub mod size_points;
pub mod terms;
pub mod uncertainty;
pub mod wgan_step;
pub mod whatif;
pub mod zero_moments;

use serde::Serialize;
use trainbench_comm::Topology;
use trainbench_graph::analysis::{Analysis, analyze, memory_estimate_checkpointed};
use trainbench_graph::graph::Graph;
use trainbench_graph::{OptimizerSpec, Precision};

pub use comm::CommCost;
pub use error::PredictError;
pub use roofline::{Bound, LayerCost, PhaseCost};
pub use terms::{Term, Terms};

use crate::hardware::wire::HardwareFile;
use rates::Coefficients;

/// The model's version, recorded with every prediction a result keeps: bumped whenever a term changes, so
/// predictions of different models are not mixed up.
pub const MODEL_VERSION: &str = "pai-roofline-11";

/// One configuration to predict: what a planned run fixes.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// Global batch size.
    pub batch: usize,
    /// Precision.
    pub precision: Precision,
    /// Optimizer.
    pub optimizer: OptimizerSpec,
    /// Where the workers are and how they exchange (the plan's own).
    pub topology: Topology,
    /// Activation checkpointing and gradient accumulation (the plan's own).
    pub schedule: trainbench_graph::training::StepSchedule,
    /// TF32 switches and FP8 products (the plan's own): which product classes run at a tensor rate
    /// ([`product_rates`]).
    pub numerics: trainbench_contract::Numerics,
    /// A pipeline's cut as given (blocks per chunk; the plan's own); empty: balanced by FLOPs.
    pub pipeline_layers: Vec<usize>,
    /// Steps run before the middle of the measured ones (warm-up and half the measured iterations), which sets how
    /// many embedding rows have been looked up ([`zero_moments`]); `None`: a run long enough to have seen them all.
    pub steps_run: Option<f64>,
}

impl Setting {
    /// The setting of a planned run: its batch, precision, optimizer, topology, schedule and numerics.
    pub fn of(run: &trainbench_contract::RunPlan) -> Self {
        Setting {
            batch: run.batch_size,
            precision: run.precision,
            optimizer: run.optimizer.clone(),
            topology: run.topology,
            schedule: run.schedule,
            numerics: run.numerics,
            pipeline_layers: run.pipeline_layers.clone(),
            steps_run: match run.budget {
                trainbench_contract::Budget::Iterations(n) => Some(run.warmup as f64 + n as f64 / 2.0),
                _ => None,
            },
        }
    }

    /// The pipeline cut to pass to `cut_stages`: the given block counts, or `None` to balance by FLOPs.
    pub fn given_cut(&self) -> Option<&[usize]> {
        (!self.pipeline_layers.is_empty()).then_some(self.pipeline_layers.as_slice())
    }

    /// Workers (nodes x devices per node).
    pub fn world(&self) -> usize {
        self.topology.world_size().max(1)
    }
}

/// Seconds per phase of one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Phases {
    /// Input batch to the device.
    pub data_s: f64,
    /// Forward pass, loss included.
    pub forward_s: f64,
    /// Backward pass.
    pub backward_s: f64,
    /// Optimizer step.
    pub optimizer_s: f64,
    /// Gradient exchange: what the step waits for of it (overlap with the backward pass taken off).
    pub comm_s: f64,
}

/// Shares of the serial step time, in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Shares {
    /// T_data / T_iter.
    pub data: f64,
    /// T_compute / T_iter (forward + backward + optimizer).
    pub compute: f64,
    /// T_comm / T_iter.
    pub comm: f64,
}

/// Where compute time goes: compute-bound kernels, memory-bound ones and the fixed per-operation cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BoundSplit {
    /// Seconds of layers (phases) limited by FLOPs.
    pub compute_bound_s: f64,
    /// Seconds of layers (phases) and optimizer limited by bytes.
    pub memory_bound_s: f64,
    /// Seconds of per-operation overhead.
    pub overhead_s: f64,
}

/// A prediction for one configuration on one profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Profile name.
    pub hardware: String,
    /// Global batch.
    pub batch_size: usize,
    /// Samples per device and step.
    pub per_device_batch: usize,
    /// Precision.
    pub precision: Precision,
    /// Workers.
    pub world_size: usize,
    /// Serial step time (PAI: no overlap), seconds.
    pub step_time_s: f64,
    /// Step time with input prefetch and the exchange overlapped with backward, seconds.
    pub step_time_overlapped_s: f64,
    /// Global batch over the serial step time: the step's price as throughput, whether or not the step fits
    /// in memory (`figures.throughput` is unavailable where it does not).
    pub samples_per_s: f64,
    /// Phases.
    pub phases: Phases,
    /// Shares of the serial step.
    pub shares: Shares,
    /// Compute- vs memory-bound split of T_compute.
    pub bound: BoundSplit,
    /// The exchange.
    pub comm: CommCost,
    /// Whether the compute model used a calibration (efficiency curves, overhead, measured bandwidth).
    pub calibrated: bool,
    /// The range the serial step time falls in 80% of the time, by the uncertainty of the terms that price it
    /// ([`uncertainty`]).
    pub interval: uncertainty::Interval,
    /// Why the profile's calibration is not to be trusted as a quiet machine's: it was taken on a loaded
    /// machine (`calibration.load`, stored with `calibrate --allow-loaded`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded_calibration: Option<String>,
    /// The machine's drift over its calibration (`Uncertainty::machine`, a sigma of the log of the whole step),
    /// part of `interval`; absent when the profile kept none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_drift: Option<f64>,
    /// The model's own error where it was tuned (`Uncertainty::model`, a sigma of the log of the whole step),
    /// part of `interval`; absent on a datasheet profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_error: Option<f64>,
    /// Per-layer costs (filled when asked for).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerCost>,
    /// The terms switched off for this prediction (none: the model as calibrated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub terms_off: Vec<Term>,
    /// Whether the step fits in the device's memory and, where it does, tokens/s and MFU ([`figures`]).
    pub figures: fit_and_rates::Figures,
}

/// Input bytes of one sample as the backend feeds them (f32 dense inputs, i64 ids and labels).
pub fn input_bytes_per_sample(graph: &Graph) -> f64 {
    graph
        .inputs()
        .map(|(_, n)| {
            let b = if n.op.is_index_input() { layer::INDEX_INPUT_BYTES } else { layer::DENSE_INPUT_BYTES };
            n.shape.numel() as f64 * b
        })
        .sum()
}

/// A graph and its analysis, made once for every prediction of it (the what-if rows, the parallel layouts).
#[derive(Debug, Clone)]
pub struct AnalyzedGraph<'g> {
    /// The graph.
    pub graph: &'g Graph,
    /// Its analysis (FLOPs, parameters, saved activations).
    pub analysis: Analysis,
}

impl<'g> AnalyzedGraph<'g> {
    /// Analyse `graph`.
    pub fn new(graph: &'g Graph) -> Self {
        Self { graph, analysis: analyze(graph) }
    }
}

/// The coefficients the model reads for `profile` at `precision`: those of its `fitted` table; a datasheet
/// profile without one (built in memory) gets its device's figures. Refuses a precision the device has no peak
/// for, and a calibrated profile whose coefficients were never fitted (one that did not come through
/// `crate::hardware::load`).
pub fn coefficients(profile: &HardwareFile, precision: Precision) -> Result<Coefficients, PredictError> {
    let no_peak = || PredictError::NoPeak { profile: profile.name.clone(), precision: precision.as_str() };
    let peak = profile.device.peak_tflops.of(precision).ok_or_else(no_peak)?;
    match (&profile.fitted, &profile.calibration) {
        (Some(fitted), _) => fitted.at(precision).cloned().ok_or_else(no_peak),
        (None, None) => Ok(Coefficients::datasheet(
            peak * 1e12,
            profile.device.memory_bandwidth_gbs * 1e9,
            profile.device.kind == crate::hardware::wire::DeviceKind::Cpu,
        )),
        (None, Some(_)) => Err(PredictError::NotFitted { profile: profile.name.clone() }),
    }
}

/// Predict one step of `graph` under `setting` on `profile`, every term on.
pub fn predict(graph: &Graph, setting: &Setting, profile: &HardwareFile) -> Result<Prediction, PredictError> {
    predict_with(graph, setting, profile, &Terms::all())
}

/// Predict one step of `graph` under `setting` on `profile` with `terms` on: the profile's coefficients
/// ([`coefficients`]) priced by the terms that are on.
pub fn predict_with(
    graph: &Graph,
    setting: &Setting,
    profile: &HardwareFile,
    terms: &Terms,
) -> Result<Prediction, PredictError> {
    predict_analyzed(&AnalyzedGraph::new(graph), setting, profile, terms)
}

/// [`predict_with`] on a graph analysed beforehand.
pub fn predict_analyzed(
    analyzed: &AnalyzedGraph<'_>,
    setting: &Setting,
    profile: &HardwareFile,
    terms: &Terms,
) -> Result<Prediction, PredictError> {
    let (graph, analysis) = (analyzed.graph, &analyzed.analysis);
    let world = setting.world();
    if setting.batch % world != 0 {
        return Err(PredictError::Batch { batch: setting.batch, world });
    }
    let b = setting.batch / world;
    let dev = coefficients(profile, setting.precision)?.under(terms);
    let bf16 = coefficients(profile, Precision::Bf16).ok().map(|c| c.under(terms));
    let products =
        product_rates::ProductRates::new(profile, setting.precision, &setting.numerics, &dev, bf16.as_ref())?;
    let rates = roofline::Rates { device: &dev, products: &products };
    let mut compute = roofline::step(graph, analysis, b, setting.precision, &setting.optimizer, rates, terms);
    // T_data ([`Term::InputCopy`]): the batch's input bytes over the host link, and its latency.
    let data_s = match &profile.host_link {
        Some(l) if terms.on(Term::InputCopy) => {
            l.latency_us * 1e-6 + b as f64 * input_bytes_per_sample(graph) / (l.bandwidth_gbs * 1e9)
        }
        _ => 0.0,
    };
    // T_comm ([`Term::Exchange`]): fp32 gradients of the trained parameters (LoRA: the adapters' only).
    let micro = setting.schedule.micro_batches() as f64;
    // Adam's square roots over the embedding rows no step has looked up: every worker's lookups of every
    // micro-batch fill the summed gradient's rows ([`Term::ZeroMomentSqrt`]).
    if terms.on(Term::ZeroMomentSqrt) && terms.on(Term::Optimizer) {
        let samples = b as f64 * micro * world as f64;
        let zeros = zero_moments::zero_elements(graph, samples, &setting.optimizer, setting.steps_run);
        compute.optimizer.charge_nonzero(Term::ZeroMomentSqrt, zeros * dev.zero_sqrt_s);
    }
    let mut comm = comm::comm(profile, &setting.topology, graph, analysis.trainable_parameters as f64 * 4.0, micro)?;
    if !terms.on(Term::Exchange) {
        comm.time_s = 0.0;
    }
    // The step schedule: the recomputed blocks' share of the forward pass is paid again in the backward pass
    // (priced by their share of the forward FLOPs), and each of the k micro-batches pays data, forward and
    // backward; the exchange and the optimizer run once per step.
    let checkpointing = setting.schedule.checkpointing;
    let recomputed = match analysis.flops.forward_per_sample {
        0 => 0.0,
        f => analysis.recomputed_flops(checkpointing) as f64 / f as f64,
    };
    let data_s = micro * data_s;
    // One pass of the graph, or a WGAN-GP step's two updates and its penalty's passes ([`wgan_step`]).
    let (one_forward_s, one_backward_s) = match wgan_step::passes(graph, &compute.layers) {
        Some(p) => (p.forward_s, p.backward_s),
        None => (
            compute.layers.iter().map(|l| l.forward.time_s).sum(),
            compute.layers.iter().map(|l| l.backward.time_s).sum(),
        ),
    };
    let forward_s = micro * one_forward_s;
    let backward_s = micro * (one_backward_s + recomputed * one_forward_s);
    let optimizer_s = compute.optimizer.time_s;
    // The exchange overlaps the last micro-batch's backward pass where the engine does so.
    comm.exposed_s = if comm::overlap_hides(profile, &setting.topology) {
        comm::exposed(graph, &setting.topology, &comm, forward_s / micro, backward_s / micro)
    } else {
        comm.time_s
    };
    let phases = Phases { data_s, forward_s, backward_s, optimizer_s, comm_s: comm.exposed_s };
    let step = data_s + forward_s + backward_s + optimizer_s + comm.exposed_s;
    let interval = uncertainty::interval(&step_seconds_by_term(&compute, &phases), step, &dev.uncertainty);
    let overlapped = data_s.max(forward_s + backward_s.max(comm.time_s) + optimizer_s);
    let share = |x: f64| if step > 0.0 { x / step } else { 0.0 };
    let mut split = BoundSplit { compute_bound_s: 0.0, memory_bound_s: 0.0, overhead_s: 0.0 };
    let samples_per_s = if step > 0.0 { setting.batch as f64 * micro / step } else { 0.0 };
    // One device's share: what the data-parallel strategy shards over the world (ZeRO) is held once per rank.
    let whole = memory_estimate_checkpointed(analysis, b, setting.precision, &setting.optimizer, checkpointing);
    let memory = sharding::Sharding::of(setting.topology.strategy).share_of(&whole, world, 4 * analysis.buffers);
    let figures = fit_and_rates::figures(&fit_and_rates::FigureInput {
        analysis,
        memory: &memory,
        profile,
        precision: setting.precision,
        // The TF32 peak for an fp32 run with TF32 on; else the coefficients' own peak of the precision.
        peak: match product_rates::mfu_peak(profile, setting.precision, &setting.numerics) {
            Some((tflops, "tf32")) => (tflops * 1e12, "tf32"),
            _ => (dev.peak_flop_s, setting.precision.as_str()),
        },
        world,
        samples_per_s,
        checkpointing,
    });
    for p in compute.layers.iter().flat_map(|l| [&l.forward, &l.backward]).chain([&compute.optimizer]) {
        split.overhead_s += p.overhead_s;
        match p.bound {
            Bound::Compute => split.compute_bound_s += p.compute_s,
            Bound::Memory => split.memory_bound_s += p.memory_s,
        }
    }
    Ok(Prediction {
        hardware: profile.name.clone(),
        batch_size: setting.batch,
        per_device_batch: b,
        precision: setting.precision,
        world_size: world,
        step_time_s: step,
        step_time_overlapped_s: overlapped,
        samples_per_s,
        phases,
        shares: Shares {
            data: share(data_s),
            compute: share(forward_s + backward_s + optimizer_s),
            comm: share(comm.exposed_s),
        },
        bound: split,
        comm,
        calibrated: profile.calibration.is_some(),
        interval,
        loaded_calibration: profile
            .calibration
            .as_ref()
            .and_then(|c| c.load.as_ref())
            .and_then(crate::hardware::wire::LoadMark::warning),
        machine_drift: (dev.uncertainty.machine > 0.0).then_some(dev.uncertainty.machine),
        model_error: (dev.uncertainty.model > 0.0).then_some(dev.uncertainty.model),
        layers: compute.layers,
        terms_off: terms.off().to_vec(),
        figures,
    })
}

/// The step's seconds by additive term: the compute phases' breakdowns scaled to the phases' totals (micro-batches
/// and recomputation repeat them), the input copy and the exposed exchange.
fn step_seconds_by_term(compute: &roofline::StepCompute, phases: &Phases) -> terms::Breakdown {
    let mut by_term = terms::Breakdown::new();
    for p in compute.layers.iter().flat_map(|l| [&l.forward, &l.backward]).chain([&compute.optimizer]) {
        for (term, s) in &p.terms {
            terms::add(&mut by_term, *term, *s);
        }
    }
    let priced: f64 = by_term.values().sum();
    let total = phases.forward_s + phases.backward_s + phases.optimizer_s;
    if priced > 0.0 {
        by_term.values_mut().for_each(|s| *s *= total / priced);
    }
    terms::add(&mut by_term, Term::InputCopy, phases.data_s);
    terms::add(&mut by_term, Term::Exchange, phases.comm_s);
    by_term
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "mod_tests.rs"]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod terms_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod schedule_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod whatif_tests;
