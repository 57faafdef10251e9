//! Sharded and model-parallel layouts, analytically: memory per GPU and exchange per step for data
//! parallelism with ZeRO-1/2/3 (FSDP) sharding, Megatron-style tensor parallelism and 1F1B pipeline
//! parallelism, each priced from the one-device prediction of the same per-GPU work. Formulas only: what
//! `trainbench` can run is measured by the runner; these rows answer "would it fit, and how fast" before that.
//!
//! - States per parameter ([`StateBytes`]): weights, gradients and optimizer state; over `d` ranks ZeRO-1
//!   divides the optimizer state by `d`, ZeRO-2 the gradients too, ZeRO-3 everything ([`per_parameter`]).
//! - Exchange per rank and step on a ring ([`exchange_bytes`]): all-reduce `2(d-1)/d S`; ZeRO-1/2 a
//!   reduce-scatter of the gradients plus an all-gather of the updated weights (the same volume); ZeRO-3 one
//!   more all-gather of the weights for the backward pass (1.5x).
//! - Tensor parallelism over `t` GPUs: every matmul split `t` ways (compute and memory divided by `t`, as with
//!   sequence parallelism), and per layer two all-reduces of the block activations in the forward pass and two
//!   in the backward ([`tensor_parallel_bytes`]).
//! - Pipeline parallelism over `p` stages with `m` micro-batches (1F1B): a step takes `(m + p - 1)` stage
//!   slots, the bubble being `(p - 1) / (m + p - 1)` ([`bubble_fraction`]); a stage holds `1/p` of the states
//!   and, with `p` micro-batches in flight, the activations of one whole micro-batch.

use serde::Serialize;
use trainbench_comm::{Interconnect, Topology};
use trainbench_graph::analysis::memory_estimate;

pub use super::sharding::Sharding;
use super::{AnalyzedGraph, PredictError, Setting, Terms, comm, predict_analyzed};
use crate::hardware::wire::HardwareFile;

/// Bytes per trained parameter of each kind of state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StateBytes {
    /// Weights (with any reduced-precision copy).
    pub weights: f64,
    /// Gradients.
    pub gradients: f64,
    /// Optimizer state (with fp32 master weights where those are kept apart).
    pub optimizer: f64,
}

impl StateBytes {
    /// The ZeRO paper's mixed precision with Adam: bf16 weights and gradients, fp32 master weights and moments.
    pub const ZERO_MIXED_ADAM: Self = Self { weights: 2.0, gradients: 2.0, optimizer: 12.0 };
    /// Megatron's mixed precision with Adam: as ZeRO's, with fp32 gradients (18 bytes).
    pub const MEGATRON_MIXED_ADAM: Self = Self { weights: 2.0, gradients: 4.0, optimizer: 12.0 };
}

/// Which kind of state a per-parameter figure is.
#[derive(Clone, Copy)]
pub enum StatePart {
    /// The weights.
    Weights,
    /// The gradients.
    Gradients,
    /// The optimizer's state.
    Optimizer,
}

/// Bytes a rank holds of one kind of state (`part`, `bytes` per parameter) for `count` parameters when `d` ranks
/// shard as `sharding` says, except `whole` of them that it keeps unsharded (an expert-parallel rank's experts).
pub fn held_bytes(count: f64, whole: f64, bytes: f64, sharding: Sharding, d: usize, part: StatePart) -> f64 {
    let per = |sharding: Sharding| {
        let only = match part {
            StatePart::Weights => StateBytes { weights: bytes, gradients: 0.0, optimizer: 0.0 },
            StatePart::Gradients => StateBytes { weights: 0.0, gradients: bytes, optimizer: 0.0 },
            StatePart::Optimizer => StateBytes { weights: 0.0, gradients: 0.0, optimizer: bytes },
        };
        per_parameter(only, sharding, d)
    };
    (count - whole) * per(sharding) + whole * per(Sharding::Replicated)
}

/// Bytes per parameter a rank holds when `d` ranks shard as `sharding` says.
pub fn per_parameter(s: StateBytes, sharding: Sharding, d: usize) -> f64 {
    let d = d.max(1) as f64;
    match sharding {
        Sharding::Replicated => s.weights + s.gradients + s.optimizer,
        Sharding::Zero1 => s.weights + s.gradients + s.optimizer / d,
        Sharding::Zero2 => s.weights + (s.gradients + s.optimizer) / d,
        Sharding::Zero3 => (s.weights + s.gradients + s.optimizer) / d,
    }
}

/// Bytes a rank sends per step on a ring of `d` ranks exchanging `bytes` of gradients (and as many of weights).
pub fn exchange_bytes(sharding: Sharding, d: usize, bytes: f64) -> f64 {
    let share = (d.max(1) as f64 - 1.0) / d.max(1) as f64;
    match sharding {
        // All-reduce = reduce-scatter + all-gather; ZeRO-1/2 do exactly those two with the step in between.
        Sharding::Replicated | Sharding::Zero1 | Sharding::Zero2 => 2.0 * share * bytes,
        // Plus the weights gathered again before the backward pass.
        Sharding::Zero3 => 3.0 * share * bytes,
    }
}

/// Collective operations (ring steps of `d - 1` each) per step: two, three for ZeRO-3.
fn collectives(sharding: Sharding) -> f64 {
    if sharding == Sharding::Zero3 { 3.0 } else { 2.0 }
}

/// Idle fraction of a 1F1B pipeline of `p` stages over `m` micro-batches.
pub fn bubble_fraction(p: usize, m: usize) -> f64 {
    let (p, m) = (p.max(1) as f64, m.max(1) as f64);
    (p - 1.0) / (m + p - 1.0)
}

/// Bytes one GPU sends per step for Megatron tensor parallelism over `t` GPUs: per layer, four ring
/// all-reduces (two forward, two backward) of `activation_bytes`, the block activations of the micro-batch.
pub fn tensor_parallel_bytes(layers: usize, activation_bytes: f64, t: usize) -> f64 {
    tensor_region_bytes(2 * layers, activation_bytes, t)
}

/// Bytes one GPU sends per micro-batch for `regions` parallel regions over `t` GPUs: each region's output
/// summed forward and its input's gradient summed backward, two ring all-reduces of `activation_bytes` (a
/// decoder block has two regions; one whose feed-forward is a mixture of experts, whole on every rank).
pub fn tensor_region_bytes(regions: usize, activation_bytes: f64, t: usize) -> f64 {
    let t = t.max(1) as f64;
    2.0 * regions as f64 * 2.0 * (t - 1.0) / t * activation_bytes
}

/// One layout's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParallelRow {
    /// The layout (`zero-3 (fsdp) over 8 GPUs`).
    pub layout: String,
    /// GPUs it uses.
    pub gpus: usize,
    /// Memory one GPU needs, bytes (states, activations and workspace).
    pub memory_per_gpu_bytes: f64,
    /// Whether that fits the device's memory.
    pub fits: bool,
    /// Bytes one GPU sends per step.
    pub exchange_bytes_per_gpu: f64,
    /// Step time with nothing overlapped, seconds.
    pub step_time_s: f64,
    /// Step time with the exchange hidden under compute where the layout allows it, seconds.
    pub step_time_overlapped_s: f64,
    /// Items (tokens for token models) per second per GPU at the serial step time.
    pub items_per_s_per_gpu: f64,
    /// Model FLOPs per second per GPU over the precision's peak (serial step time); `None` without a peak.
    pub mfu: Option<f64>,
    /// What was assumed.
    pub formula: String,
}

/// The rows for `gpus` GPUs in one machine, each GPU training `setting.batch` samples per (micro-)step.
pub fn rows(
    analyzed: &AnalyzedGraph<'_>,
    setting: &Setting,
    profile: &HardwareFile,
    terms: &Terms,
    gpus: usize,
) -> Result<Vec<ParallelRow>, PredictError> {
    let (graph, a) = (analyzed.graph, &analyzed.analysis);
    let b = setting.batch.max(1);
    let one = Setting { batch: b, topology: Topology::single(), ..setting.clone() };
    let base = predict_analyzed(analyzed, &one, profile, terms)?;
    let mem = memory_estimate(a, b, setting.precision, &setting.optimizer);
    let params = a.parameters.max(1) as f64;
    let states = StateBytes {
        weights: mem.weights as f64 / params,
        gradients: mem.gradients as f64 / params,
        optimizer: mem.optimizer_state as f64 / params,
    };
    let transient = (mem.activations + mem.workspace) as f64;
    let capacity = profile.device.memory_gib * (1u64 << 30) as f64;
    let intra = if profile.intra_node.as_ref().is_some_and(|l| l.kind == crate::hardware::wire::LinkKind::Nvlink) {
        Interconnect::Nvlink
    } else {
        Interconnect::Pcie
    };
    let link = comm::link(profile, intra)?;
    let (bandwidth, latency) = (link.bandwidth_gbs * 1e9, link.latency_us * 1e-6);
    let peak = super::product_rates::mfu_peak(profile, setting.precision, &setting.numerics)
        .map(|(t, _)| t * 1e12)
        .filter(|t| *t > 0.0);
    let model_flops = a.model_flops.per_sample as f64;
    let row = |layout: String, gpus: usize, memory: f64, exchange: f64, times: (f64, f64), per_gpu_samples: f64| {
        let (serial, overlapped) = times;
        ParallelRow {
            layout,
            gpus,
            memory_per_gpu_bytes: memory,
            fits: memory <= capacity,
            exchange_bytes_per_gpu: exchange,
            step_time_s: serial,
            step_time_overlapped_s: overlapped,
            items_per_s_per_gpu: per_gpu_samples * a.items_per_sample as f64 / serial,
            mfu: peak.map(|p| model_flops * per_gpu_samples / serial / p),
            formula: String::new(),
        }
    };
    let t1 = base.step_time_s;
    let ph = base.phases;
    let mut out = Vec::new();
    // Gradients of the trained parameters only (LoRA: the adapters').
    let grad_bytes = 4.0 * a.trainable_parameters as f64;
    let frozen_bytes = 4.0 * (a.parameters - a.trainable_parameters) as f64;
    for sharding in [Sharding::Replicated, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3] {
        let d = gpus.max(1);
        // ZeRO-3 gathers every weight twice, frozen ones (LoRA's base) included, though only trained ones have
        // gradients to reduce.
        let share = (d as f64 - 1.0) / d as f64;
        let frozen_gathers = if sharding == Sharding::Zero3 { 2.0 * share * frozen_bytes } else { 0.0 };
        let bytes = exchange_bytes(sharding, d, grad_bytes) + frozen_gathers;
        let comm_s = if d > 1 { collectives(sharding) * (d as f64 - 1.0) * latency + bytes / bandwidth } else { 0.0 };
        // Overlap: the exchange under the backward pass (ZeRO-3: under forward and backward).
        let hidden_under = if sharding == Sharding::Zero3 { ph.forward_s + ph.backward_s } else { ph.backward_s };
        let overlapped = t1 + (comm_s - hidden_under).max(0.0);
        let memory = params * per_parameter(states, sharding, d) + transient;
        let mut r =
            row(format!("{} over {d} GPUs", sharding.name()), d, memory, bytes, (t1 + comm_s, overlapped), b as f64);
        r.formula = format!(
            "one GPU's step + {} ring collectives of (d-1)/d x {:.3} GB over {}",
            collectives(sharding),
            grad_bytes / 1e9,
            link.name
        );
        if frozen_gathers > 0.0 {
            r.formula += &format!(", + 2 gathers of (d-1)/d x {:.3} GB of frozen weights", frozen_bytes / 1e9);
        }
        out.push(r);
    }
    // Model parallelism needs the transformer's blocks: their count and the activations at their boundary.
    let (Some(first), heads) = (graph.blocks.first(), graph.decoder.map(|d| d.heads)) else { return Ok(out) };
    let layers = graph.blocks.len();
    let boundary =
        graph.nodes[first.input].shape.numel() as f64 * b as f64 * setting.precision.activation_bytes() as f64;
    let states_total = params * per_parameter(states, Sharding::Replicated, 1);
    for t in [2usize, 4, 8].into_iter().filter(|&t| t <= gpus && heads.is_none_or(|h| h % t == 0)) {
        let bytes = tensor_parallel_bytes(layers, boundary, t);
        let comm_s = 4.0 * layers as f64 * (2.0 * (t as f64 - 1.0) * latency) + bytes / bandwidth;
        let compute = t1 / t as f64;
        let memory = (states_total + transient) / t as f64;
        let mut r = row(
            format!("tensor parallel over {t} GPUs"),
            t,
            memory,
            bytes,
            (compute + comm_s, compute + comm_s),
            b as f64 / t as f64,
        );
        r.formula =
            format!("one GPU's step / {t} + 4 x {layers} layers of ring all-reduces of {:.1} MB", boundary / 1e6);
        out.push(r);
    }
    for p in [2usize, 4, 8].into_iter().filter(|&p| p <= gpus && p <= layers) {
        let m = 4 * p;
        let slot = t1 / p as f64;
        let step = (m + p - 1) as f64 * slot;
        let hops = 2.0 * m as f64 * (latency + boundary / bandwidth);
        let memory = states_total / p as f64 + transient;
        let samples = (m * b) as f64 / p as f64;
        let mut r = row(
            format!("pipeline of {p} stages, {m} micro-batches"),
            p,
            memory,
            2.0 * m as f64 * boundary,
            (step + hops, step),
            samples,
        );
        r.formula = format!(
            "(m + p - 1) slots of one GPU's step / p; bubble {:.1}%; activations of one micro-batch in flight per stage",
            100.0 * bubble_fraction(p, m)
        );
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn memory_per_parameter_follows_the_published_formulas() {
        let z = StateBytes::ZERO_MIXED_ADAM;
        let m = StateBytes::MEGATRON_MIXED_ADAM;
        for d in [1usize, 2, 8, 64] {
            let d_f = d as f64;
            assert!(close(per_parameter(z, Sharding::Replicated, d), 16.0));
            assert!(close(per_parameter(z, Sharding::Zero1, d), 2.0 + 2.0 + 12.0 / d_f));
            assert!(close(per_parameter(z, Sharding::Zero2, d), 2.0 + 14.0 / d_f));
            assert!(close(per_parameter(z, Sharding::Zero3, d), 16.0 / d_f));
            // Megatron: 18 bytes, and 6 + 12/d with its distributed optimizer (ZeRO-1 in effect).
            assert!(close(per_parameter(m, Sharding::Replicated, d), 18.0));
            assert!(close(per_parameter(m, Sharding::Zero1, d), 6.0 + 12.0 / d_f));
        }
    }

    #[test]
    fn zero_moves_what_all_reduce_moves_and_zero_3_half_again() {
        for d in [2usize, 4, 8] {
            let all_reduce = exchange_bytes(Sharding::Replicated, d, 1e9);
            assert!(close(all_reduce, 2.0 * (d as f64 - 1.0) / d as f64 * 1e9));
            assert!(close(exchange_bytes(Sharding::Zero1, d, 1e9), all_reduce));
            assert!(close(exchange_bytes(Sharding::Zero2, d, 1e9), all_reduce));
            assert!(close(exchange_bytes(Sharding::Zero3, d, 1e9), 1.5 * all_reduce));
        }
        assert!(close(exchange_bytes(Sharding::Zero3, 1, 1e9), 0.0));
    }

    #[test]
    fn the_pipeline_bubble_and_tensor_parallel_volume() {
        assert!(close(bubble_fraction(4, 8), 3.0 / 11.0));
        assert!(close(bubble_fraction(1, 8), 0.0));
        // 2 layers, 1 MB per all-reduce over 4 GPUs: 8 ring all-reduces of 2 x 3/4 MB.
        assert!(close(tensor_parallel_bytes(2, 1e6, 4), 8.0 * 1.5e6));
        assert!(close(tensor_parallel_bytes(2, 1e6, 1), 0.0));
    }
}
