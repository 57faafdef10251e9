//! Metric definitions: turns a backend's [`RawMeasurements`], the static analysis, the device peak and the
//! collectors' samples into the result's [`Metrics`]. Collectors live in the submodules.
//!
//! Definitions:
//! - Steady state: MSER-5 over the measured whole-iteration times ([`crate::stats::mser5_start`]); every
//!   statistic below uses the iterations from its start on. A run past the step log's cap is summarised from
//!   the log's blocks and sketch instead of every step ([`steps`]: exact moments, percentiles within the
//!   sketch's stated error).
//! - Data phase: the wait for the next batch (stall) plus its copy onto the device; the stall share of the
//!   mean iteration says how input-bound a run is.
//! - Throughput: batch size x steady iterations / their summed time (the rate actually sustained, not
//!   batch / median).
//! - Throughput: a step trains `batch_size` x `schedule.micro_batches()` samples (gradient accumulation).
//! - FLOP utilisation: analysis training FLOPs per sample x samples/s over the peak of all the run's devices
//!   ([`peak`]); MFU and HFU likewise over the peak of the precision the run computes in ([`utilization`]).
//! - GPU and CPU figures: the samples inside the measured window (first measured iteration to the end).
//! - Energy per sample: mean power over the measured window / samples per second.
//! - Throughput on CUDA: the per-step figure above is the headline (every backend reports it alike, and the
//!   statistics need per-step samples); the free-running window beside it says what the per-step
//!   synchronisation cost ([`crate::result::FreeRunningThroughput`]).
//! - Memory: weights, gradients and optimizer state from tensor sizes; activations measured by the backend
//!   (allocated bytes after the forward pass minus before it); workspace = allocator peak minus all of those
//!   (at least 0); the analysis's estimate beside them with its error against the peak. Without a measured
//!   activation figure, `activations_and_workspace_bytes` = peak minus weights, gradients and state.
//! - Expert load (MoE models): the backend's routing tally over the measured steps
//!   ([`crate::result::ExpertLoad::of`]): means per step, and the largest step's CV and busiest share.

pub mod collect;
pub mod cpu;
pub mod nvml;
pub mod nvml_map;
pub mod peak;
pub mod steps;
mod utilization;

use trainbench_contract::steplog::StepLog;
use trainbench_contract::{PhaseTimes, RawMeasurements, RunPlan};

use crate::result::{
    AnalysisSummary, ExpertLoad, FreeRunningThroughput, GradientNorm, LossSummary, MemoryBreakdown,
    MemoryMeasuredSummary, Metrics, PhaseBreakdown, PhaseStat, PowerEnergy, Sampled, SteadyState, StepTimeStats,
    Throughput,
};
use collect::CollectorReport;
use peak::Peak;

/// Name of the steady-state method recorded in results.
pub const STEADY_STATE_METHOD: &str = "mser-5";

/// Everything metric derivation needs about one run.
#[derive(Debug, Clone)]
pub struct DeriveInput<'a> {
    /// The plan that ran.
    pub plan: &'a RunPlan,
    /// What the backend measured.
    pub raw: &'a RawMeasurements,
    /// Items per sample for throughput (tokens for sequence models).
    pub items_per_sample: u64,
    /// Unit of those items.
    pub item_unit: &'a str,
    /// The model's static analysis, if it succeeded.
    pub analysis: Option<&'a AnalysisSummary>,
    /// Device peak for the run's precision, if known.
    pub peak: Option<Peak>,
    /// Samples of the background collectors.
    pub collectors: &'a CollectorReport,
    /// Measured window `[start, end]` in collector seconds.
    pub window: (f64, f64),
    /// Why CPU figures are missing when no CPU sampler ran (e.g. `collectors disabled`).
    pub cpu_absent: &'a str,
    /// Why GPU figures are missing when no GPU sampler ran (e.g. `the run used the CPU`).
    pub gpu_absent: &'a str,
}

/// Derive the result metrics; `None` when the backend measured no iteration.
pub fn derive(input: &DeriveInput<'_>) -> Option<Metrics> {
    let raw = input.raw;
    let figures = steps::step_figures(&raw.steps, input.plan.seed)?;
    let summary = figures.summary;
    let start = figures.start as usize;
    let total = figures.phase_sum.total_s;
    // A step trains on every micro-batch of the schedule (gradient accumulation).
    let batch = input.plan.samples_per_step() as f64;
    let samples_per_s = if total > 0.0 { batch * summary.n as f64 / total } else { 0.0 };
    let ci = figures.median_ci;
    let items_per_s = samples_per_s * input.items_per_sample as f64;
    let devices = input.plan.topology.world_size().max(1) as f64;

    let (gpu, power) = gpu_figures(input, samples_per_s);
    let cpu = match &input.collectors.cpu {
        Some(Ok(samples)) => cpu::summarize(samples, input.window.0, input.window.1, cpu::available_cores()),
        Some(Err(reason)) => Sampled::unavailable(reason.clone()),
        None => Sampled::unavailable(input.cpu_absent),
    };

    Some(Metrics {
        throughput: Throughput {
            samples_per_s,
            items_per_s,
            item_unit: input.item_unit.to_string(),
            items_per_sample: input.items_per_sample,
            items_per_s_per_device: Some(items_per_s / devices),
            free_running: free_running(raw, batch, samples_per_s),
        },
        step_time: StepTimeStats {
            n: summary.n,
            mean_s: summary.mean,
            median_s: summary.median,
            p5_s: summary.p5,
            p95_s: summary.p95,
            p99_s: summary.p99,
            stdev_s: summary.stdev,
            cv: summary.cv,
            min_s: summary.min,
            max_s: summary.max,
            outliers: summary.outliers,
            median_ci95_s: [ci.0, ci.1],
            percentile_relative_error: figures.percentile_error,
        },
        steady_state: SteadyState {
            warmup_iterations: raw.warmup_steps.len(),
            method: STEADY_STATE_METHOD.to_string(),
            start_index: start,
            truncated: start,
            reached: !figures.capped,
        },
        phases: phases(&figures.phase_sum, summary.n, input.plan.phase_timing),
        gpu,
        flops: utilization::flop_utilization(input.plan, input.analysis, input.peak.as_ref(), samples_per_s, raw.tf32),
        cpu,
        power,
        memory: memory_breakdown(raw, input.analysis),
        loss: loss(&raw.steps),
        time_to_target: raw.target.clone(),
        expert_load: raw.routing.as_ref().and_then(ExpertLoad::of),
        gradient_norm: raw.gradient_squares.map(|g| {
            let norm = |squares: f64| Some(squares.sqrt()).filter(|n| n.is_finite());
            GradientNorm { first: norm(g.first), last: norm(g.last) }
        }),
        weight_norms: raw.weight_norms.clone(),
        samples_seen: Some(figures.seen),
        samples_kept: Some(figures.kept_times.len() as u64),
        step_indices: figures.kept_indices,
        step_times_s: figures.kept_times,
    })
}

fn gpu_figures(
    input: &DeriveInput<'_>,
    samples_per_s: f64,
) -> (Sampled<crate::result::GpuUtilization>, Sampled<PowerEnergy>) {
    let (start, end) = input.window;
    match &input.collectors.gpu {
        None => (Sampled::unavailable(input.gpu_absent), Sampled::unavailable(input.gpu_absent)),
        Some(Err(reason)) => (Sampled::unavailable(reason.clone()), Sampled::unavailable(reason.clone())),
        Some(Ok((index, samples))) => {
            let scope = input.collectors.gpu_scope.clone();
            let util = match nvml::summarize_utilization(samples, *index, start, end) {
                Sampled::Available(u) => {
                    Sampled::Available(crate::result::GpuUtilization { scope: scope.clone(), ..u })
                }
                other => other,
            };
            let power = match nvml::summarize_power(samples, start, end) {
                Ok(p) if samples_per_s > 0.0 => Sampled::Available(PowerEnergy {
                    mean_power_w: p.mean_w,
                    max_power_w: p.max_w,
                    energy_j: p.mean_w * (end - start).max(0.0),
                    energy_per_sample_j: p.mean_w / samples_per_s,
                    method: p.method.to_string(),
                    scope,
                }),
                Ok(_) => Sampled::unavailable("no samples were processed"),
                Err(reason) => Sampled::Unavailable { reason: reason.to_string() },
            };
            (util, power)
        }
    }
}

/// The phase breakdown from the sum of every phase over `n` steps.
fn phases(sum: &PhaseTimes, n: usize, synchronised: bool) -> PhaseBreakdown {
    let n = n.max(1) as f64;
    let mean_of = |f: fn(&PhaseTimes) -> f64| f(sum) / n;
    let total = mean_of(|p| p.total_s);
    let stat = |mean_s: f64| PhaseStat { mean_s, share: if total > 0.0 { mean_s / total } else { 0.0 } };
    let (data, fwd, bwd, comm, opt) = (
        mean_of(|p| p.data_s),
        mean_of(|p| p.forward_s),
        mean_of(|p| p.backward_s),
        mean_of(|p| p.comm_s),
        mean_of(|p| p.optimizer_s),
    );
    PhaseBreakdown {
        synchronised,
        data: stat(data),
        data_stall: stat(mean_of(|p| p.stall_s)),
        data_copy: stat(mean_of(|p| p.copy_s)),
        forward: stat(fwd),
        backward: stat(bwd),
        comm: stat(comm),
        optimizer: stat(opt),
        other: stat((total - data - fwd - bwd - comm - opt).max(0.0)),
    }
}

/// The free-running window's throughput, beside the per-step headline `per_step` samples/s.
fn free_running(raw: &RawMeasurements, batch: f64, per_step: f64) -> Option<FreeRunningThroughput> {
    let w = raw.free_running.filter(|w| w.steps > 0 && w.seconds > 0.0)?;
    let samples_per_s = batch * w.steps as f64 / w.seconds;
    Some(FreeRunningThroughput {
        steps: w.steps,
        seconds: w.seconds,
        samples_per_s,
        ratio_to_per_step: if per_step > 0.0 { samples_per_s / per_step } else { 0.0 },
    })
}

/// The measured breakdown (see the module docs) and the analysis's estimate with its error against the peak.
fn memory_breakdown(raw: &RawMeasurements, analysis: Option<&AnalysisSummary>) -> MemoryBreakdown {
    let measured = memory(raw);
    let estimate = analysis.map(|a| a.memory.clone());
    let estimate_error = match (&estimate, measured.peak_allocated_bytes) {
        (Some(e), Some(peak)) if peak > 0 => Some(e.total_bytes as f64 / peak as f64 - 1.0),
        _ => None,
    };
    MemoryBreakdown { measured, estimate, estimate_error }
}

fn memory(raw: &RawMeasurements) -> MemoryMeasuredSummary {
    let m = &raw.memory;
    let held = m.weights + m.gradients + m.optimizer_state;
    let (workspace, to_peak) = match (m.peak_allocated, m.activations) {
        (Some(peak), Some(act)) if peak > 0 => {
            let parts = held + act;
            let workspace = peak.saturating_sub(parts);
            (Some(workspace), Some((parts + workspace) as f64 / peak as f64))
        }
        _ => (None, None),
    };
    MemoryMeasuredSummary {
        weights_bytes: m.weights,
        gradients_bytes: m.gradients,
        optimizer_state_bytes: m.optimizer_state,
        activations_and_workspace_bytes: m.peak_allocated.map(|p| p.saturating_sub(held)),
        peak_allocated_bytes: m.peak_allocated,
        reserved_bytes: m.reserved,
        activations_bytes: m.activations,
        workspace_bytes: workspace,
        breakdown_to_peak: to_peak,
    }
}

fn loss(steps: &StepLog) -> Option<LossSummary> {
    let track = steps.losses();
    let finite = |x: Option<f64>| x.filter(|v| v.is_finite());
    (track.count > 0).then(|| LossSummary {
        first: finite(track.first),
        last: finite(track.last),
        all_finite: track.all_finite,
    })
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
