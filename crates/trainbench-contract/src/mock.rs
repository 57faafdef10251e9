//! The mock backend: a deterministic stand-in for a training framework, used to test trainbench itself (the
//! runner, metrics, result files, comparisons) quickly and reproducibly. It measures nothing real.
//!
//! Step times are derived from the graph's training FLOPs (the static analysis) at a nominal FLOP rate plus a
//! fixed per-step overhead, with a seeded relative jitter and a decaying transient over the first iterations;
//! an optional slowdown factor scales them (to test regression detection). Nothing sleeps: simulated time is
//! reported, and a time budget is consumed in simulated seconds. Memory figures are the analysis estimate; a
//! plan whose estimate exceeds the mock device's memory fails with [`BackendError::OutOfMemory`].

use std::collections::BTreeMap;

use crate::backend::{
    Backend, BackendError, DeviceInfo, MemoryMeasured, PhaseTimes, Probe, RawMeasurements, RunContext, RunPlan,
};
use crate::backend_kind::BackendKind;
use crate::calibrate::{CalibrationRequest, ConvTiming, GemmShapeTiming, KernelTiming, Measurement};
use crate::mock_prior::Prior;
use crate::steady_loop::{EndWish, EvalWhen, LoopClock, LoopSettings, SteadyLoop, SteadyStep, StepOutcome};
use crate::target::EvalTally;
use trainbench_data::{BatchSource, EvalSet};
use trainbench_graph::analysis::{analyze, memory_estimate_checkpointed};
use trainbench_graph::graph::Graph;
use trainbench_graph::init::SeededRng;

/// Settings of the mock device.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MockConfig {
    /// Nominal FLOP/s the simulated device sustains (also reported as its fp32 peak).
    pub flop_rate: f64,
    /// Fixed seconds per iteration (kernel launches, framework overhead).
    pub overhead_s: f64,
    /// Relative jitter: each iteration is scaled by `1 + jitter * u`, `u` uniform in `[-1, 1)`.
    pub jitter: f64,
    /// Multiplies every step time (1.0 = nominal; 1.2 simulates a 20% regression).
    pub slowdown: f64,
    /// Simulated device memory, bytes; plans whose estimate exceeds it run out of memory.
    pub memory_bytes: u64,
    /// Test hook: abort the whole process when asked to run a plan of this repeat, as a crash inside a backend
    /// library would (tests that a dying worker process loses no other result).
    #[serde(default)]
    pub abort_in_repeat: Option<u32>,
    /// Test hook: never return when asked to run a plan of this repeat, as a backend call that hangs would
    /// (tests that a hung worker process is killed).
    #[serde(default)]
    pub hang_in_repeat: Option<u32>,
    /// Test hook: fail every run of this repeat with a framework error, as a backend that reports one would
    /// (tests how failed runs are recorded and reported).
    #[serde(default)]
    pub fail_in_repeat: Option<u32>,
}

impl Default for MockConfig {
    fn default() -> Self {
        Self {
            flop_rate: 1e12,
            overhead_s: 1e-3,
            jitter: 0.02,
            slowdown: 1.0,
            memory_bytes: 16 << 30,
            abort_in_repeat: None,
            hang_in_repeat: None,
            fail_in_repeat: None,
        }
    }
}

/// The mock backend (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct MockBackend {
    config: MockConfig,
}

impl MockBackend {
    /// A mock backend with the given settings.
    pub fn new(config: MockConfig) -> Self {
        Self { config }
    }

    fn device(&self, selector: &str) -> DeviceInfo {
        DeviceInfo {
            selector: selector.to_string(),
            name: "trainbench mock device (simulated, not a measurement)".into(),
            kind: "mock".into(),
            memory_bytes: Some(self.config.memory_bytes),
            peak_flops_fp32: Some(self.config.flop_rate),
            details: BTreeMap::from([("slowdown".to_string(), self.config.slowdown.to_string())]),
        }
    }
}

/// The mock device's simulated memory bandwidth, bytes per second (reported by its calibration).
pub const MOCK_BANDWIDTH: f64 = 100e9;

/// Phase split of a simulated iteration (data, forward, backward, optimizer); communication comes on top.
const SPLIT: [f64; 4] = [0.05, 0.30, 0.55, 0.10];

impl Backend for MockBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Mock
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        vec![self.device("mock")]
    }

    fn check(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        self.supports(plan, graph)
    }

    /// Simulated calibration: every kernel runs at the nominal FLOP rate (no overhead), the triad at
    /// [`MOCK_BANDWIDTH`]; the method says it is simulated. For tests of `calibrate` and `predict` only.
    fn calibrate(&mut self, request: &CalibrationRequest) -> Result<Measurement, BackendError> {
        let rate = self.config.flop_rate * self.config.slowdown.recip();
        let mut kernels = Vec::new();
        for &precision in &request.precisions {
            for &n in &request.gemm_sizes {
                let flops = 2.0 * (n * n * n) as f64;
                let shape = format!("m=n=k={n}");
                kernels.push(KernelTiming { kind: "gemm".into(), precision, shape, flops, seconds: flops / rate });
            }
            for s in &request.conv_shapes {
                let shape = format!("N={} C={} H=W={} K={} {}x{}", s.n, s.c, s.hw, s.k, s.r, s.r);
                let flops = s.flops();
                kernels.push(KernelTiming {
                    kind: "conv".into(),
                    precision,
                    shape: shape.clone(),
                    flops,
                    seconds: flops / rate,
                });
                let flops = 2.0 * flops;
                kernels.push(KernelTiming {
                    kind: "conv_backward".into(),
                    precision,
                    shape,
                    flops,
                    seconds: flops / rate,
                });
            }
        }
        let gemm_shapes = request
            .precisions
            .first()
            .map(|&precision| {
                request
                    .gemm_shapes
                    .iter()
                    .map(|&[m, k, n]| GemmShapeTiming {
                        precision,
                        dims: [m, k, n],
                        seconds: 2.0 * (m * k * n) as f64 / rate,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let conv_grid = request
            .precisions
            .first()
            .map(|&precision| {
                request
                    .conv_grid
                    .iter()
                    .map(|s| ConvTiming {
                        precision,
                        shape: *s,
                        forward_s: s.flops() / rate,
                        backward_s: 2.0 * s.flops() / rate,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Measurement {
            device: self.device(&request.device.to_string()),
            kernels,
            gemm_shapes,
            conv_grid,
            op_overhead_s: 0.0,
            triad_bytes_per_s: MOCK_BANDWIDTH,
            host_to_device_bytes_per_s: None,
            zero_sqrt_s_per_element: None,
            // The simulated device has no allocator of its own.
            fresh_memory: None,
            method: "mock backend: simulated from its nominal FLOP rate and bandwidth, not a measurement".into(),
        })
    }

    fn run_in(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        self.check(plan, graph)?;
        let c = &self.config;
        if c.abort_in_repeat == Some(plan.repeat) {
            eprintln!("mock backend: aborting the process in repeat {} (test hook)", plan.repeat);
            std::process::abort();
        }
        if c.hang_in_repeat == Some(plan.repeat) {
            eprintln!("mock backend: hanging in repeat {} (test hook)", plan.repeat);
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        if c.fail_in_repeat == Some(plan.repeat) {
            return Err(BackendError::Framework(format!(
                "mock backend: failing in repeat {} (test hook)",
                plan.repeat
            )));
        }
        let analysis = analyze(graph);
        // One micro-batch is live at a time; checkpointing frees what its recomputed blocks would save.
        let schedule = plan.schedule;
        let est = memory_estimate_checkpointed(
            &analysis,
            plan.batch_size,
            plan.precision,
            &plan.optimizer,
            schedule.checkpointing,
        );
        if est.total > c.memory_bytes {
            return Err(BackendError::OutOfMemory {
                batch_size: plan.batch_size,
                message: format!("mock device: the step needs {} bytes, the device has {}", est.total, c.memory_bytes),
            });
        }
        // Every micro-batch of a step costs its training FLOPs plus what checkpointing recomputes.
        let samples = plan.batch_size as f64 * schedule.micro_batches() as f64;
        let compute_s = (analysis.hardware_flops(schedule.checkpointing) as f64 * samples / c.flop_rate).max(0.0);
        // Ring passes over fp32 gradients on a nominal 10 GB/s link, once per optimizer step: two (all-reduce, or
        // ZeRO-1/2's reduce-scatter and all-gather), three for ZeRO-3 (the weights gathered again for backward).
        let comm_s = if plan.topology.world_size() > 1 {
            let w = plan.topology.world_size() as f64;
            let passes = if plan.topology.strategy.zero_stage() == Some(3) { 3.0 } else { 2.0 };
            passes * (w - 1.0) / w * 4.0 * analysis.trainable_parameters as f64 / 10e9
        } else {
            0.0
        };
        let base = (compute_s + c.overhead_s + comm_s) * c.slowdown;
        let mut rng = SeededRng::new(plan.seed, "mock-step-times");
        let initial_loss = (analysis.items_per_sample.max(2) as f64).ln().max(1.0);
        let mut iteration = |i: u64| -> PhaseTimes {
            let transient = 1.0 + 2.0 * (-(i as f64) / 2.0).exp();
            let noise = 1.0 + c.jitter * (2.0 * f64::from(rng.uniform()) - 1.0);
            let total = base * transient * noise;
            let comm = comm_s * c.slowdown * transient * noise;
            let rest = total - comm;
            PhaseTimes {
                data_s: rest * SPLIT[0],
                stall_s: 0.0,
                copy_s: rest * SPLIT[0],
                forward_s: rest * SPLIT[1],
                backward_s: rest * SPLIT[2],
                comm_s: comm,
                optimizer_s: rest * SPLIT[3],
                total_s: total,
            }
        };

        let mut raw = RawMeasurements {
            device: Some(self.device(&plan.device.to_string())),
            versions: BTreeMap::from([("mock".to_string(), env!("CARGO_PKG_VERSION").to_string())]),
            ..RawMeasurements::default()
        };
        let settings = LoopSettings { timeout_s: None, clock: LoopClock::Simulated, ..LoopSettings::of(plan) };
        let epoch = ctx.data.as_ref().and_then(|d| d.epoch_batches());
        let mut steady = SteadyLoop::new(plan, settings, ctx.eval.is_some(), epoch)?;
        let probe: &mut dyn Probe = &mut *ctx.probe;
        let mut steps = MockSteps {
            graph,
            data: ctx.data.as_deref_mut(),
            eval: ctx.eval,
            prior: Prior::new(),
            initial_loss,
            iteration: &mut iteration,
            per_sample_s: 0.0,
            batch_size: plan.batch_size,
            micro_batches: schedule.micro_batches(),
        };
        if steady.run(&mut steps, probe, &mut raw)?.in_warmup {
            return Ok(raw);
        }
        raw.memory = MemoryMeasured {
            weights: est.weights,
            gradients: est.gradients,
            optimizer_state: est.optimizer_state,
            peak_allocated: Some(est.total),
            reserved: Some(est.total.div_ceil(2 << 20) * (2 << 20)),
            activations: Some(est.activations),
        };
        Ok(raw)
    }
}

/// The mock backend's step, driven by the shared loop: the loss of the batch the source gave (or the
/// synthetic curve), then the simulated phase times; evaluations take simulated time too.
struct MockSteps<'a, 'd, 'e> {
    graph: &'a Graph,
    data: Option<&'d mut (dyn BatchSource + 'e)>,
    eval: Option<&'e EvalSet>,
    prior: Prior,
    initial_loss: f64,
    iteration: &'a mut dyn FnMut(u64) -> PhaseTimes,
    /// Simulated seconds of a forward pass per sample in the last step (what an evaluation due after it costs).
    per_sample_s: f64,
    batch_size: usize,
    /// Micro-batches per step (gradient accumulation): each takes one batch of the source.
    micro_batches: u64,
}

impl SteadyStep for MockSteps<'_, '_, '_> {
    type Error = BackendError;

    fn step(&mut self, index: u64, _measured: bool, _wish: EndWish) -> Result<StepOutcome, BackendError> {
        let loss = match self.data.as_deref_mut() {
            None => self.initial_loss * (-(index as f64) / 200.0).exp(),
            Some(source) => {
                // The step's loss is the mean of its micro-batches' losses.
                let mut sum = 0.0;
                for _ in 0..self.micro_batches {
                    sum += self.prior.train(self.graph, &crate::batch::fetch(source)?.0)?;
                }
                sum / self.micro_batches as f64
            }
        };
        let phases = (self.iteration)(index);
        self.per_sample_s = phases.forward_s / (self.batch_size as f64 * self.micro_batches as f64);
        Ok(StepOutcome { phases, loss: Some(loss), agreed_end: None })
    }

    /// Evaluate the evaluation split with what the prior learned; it takes `per_sample_s` a sample when due
    /// after a step, nothing at the end of the run.
    fn evaluate(&mut self, when: EvalWhen) -> Result<(EvalTally, Option<f64>), BackendError> {
        let mut tally = EvalTally::default();
        for b in self.eval.map(|e| e.batches.as_slice()).unwrap_or(&[]) {
            self.prior.evaluate(self.graph, b, &mut tally)?;
        }
        let per_sample_s = match when {
            EvalWhen::Due => self.per_sample_s,
            EvalWhen::Final => 0.0,
        };
        let seconds = per_sample_s * tally.samples as f64;
        Ok((tally, Some(seconds)))
    }
}

#[cfg(test)]
#[path = "mock_tests.rs"]
mod tests;
