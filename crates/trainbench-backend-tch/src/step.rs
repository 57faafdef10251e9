//! The tch backend's step for the shared training loop ([`SteadyLoop`], in the contract crate, runs warm-up,
//! budget, timeout, stop and target around it): data, forward (+ loss), backward and optimizer phases timed per
//! iteration ([`Clock`]: CUDA events on the stream, host clocks on the CPU), a free-running window on CUDA, mixed
//! precision (autocast, fp16 loss scaling), the WGAN-GP two-optimizer step, and memory measurement.

use std::time::Instant;

use tch::{Device, TchError, Tensor};
use trainbench_comm::{GradientExchange, StopWish};
use trainbench_contract::steady_loop::{EndWish, EvalWhen, LoopSettings, SteadyLoop, SteadyStep, StepOutcome};
use trainbench_contract::target::EvalTally;
use trainbench_contract::{
    BackendError, FreeRunning, MemoryMeasured, PhaseTimes, Probe, RawMeasurements, RunPlan, Tf32,
};
use trainbench_data::{BatchSource, EvalSet};
use trainbench_graph::Precision;
use trainbench_graph::graph::{Graph, Node};

use crate::autograd::CpuMemory;
use crate::check::WganRoles;
use crate::checkpoint::Checkpoints;
use crate::clock::Clock;
use crate::events::Phase;
use crate::expert_state::ExpertState;
use crate::feed::{self, DeviceBatch};
use crate::lower::{DataPool, Lowered, host_available_bytes, host_bytes_needed};
use crate::optim::{GradScaler, Optim};
use crate::shim::{self, AutocastDtype, AutocastGuard};
use crate::tensor_parallel::TensorParallel;
use crate::zero::{ZeroParams, ZeroState};

#[path = "plain.rs"]
mod plain;
use plain::PlainStep;
#[path = "wgan.rs"]
mod wgan;
use wgan::WganStep;
#[path = "step_gradients.rs"]
mod gradients;

/// Most steps of the free-running window (it runs as many as the measured steps, up to this).
pub const FREE_RUNNING_MAX_STEPS: u64 = 50;

fn map(e: TchError, batch: usize) -> BackendError {
    crate::error::map_error(e, batch)
}

/// How the graph is trained: each kind of step owns exactly the optimizers it needs, so a step can never meet
/// the other kind's state.
enum Mode {
    /// One optimizer over every parameter minimising the sum of the losses.
    Plain(PlainStep),
    /// WGAN-GP: a critic step (with gradient penalty) then a generator step, each with its own optimizer.
    Wgan(WganStep),
}

/// What every kind of step shares: the graph, the lowered model, the data (synthetic pool or the batch read
/// for this step) and the precision settings.
struct Common<'a> {
    graph: &'a Graph,
    device: Device,
    model: Lowered,
    /// Synthetic batches, when the run is not handed a dataset.
    pool: Option<DataPool>,
    /// This step's batch from the dataset, on the device.
    current: Option<DeviceBatch>,
    scaler: Option<GradScaler>,
    autocast: Option<AutocastDtype>,
    /// Gradient bytes, measured once after the first backward pass.
    grad_bytes: u64,
    /// CUDA: the largest growth of the allocator's allocated bytes over a forward pass since the last reset
    /// (what the forward pass leaves for backward: saved activations and the loss).
    activations: Option<u64>,
    /// The TF32 switches libtorch reported after they were set (CUDA only).
    tf32: Option<Tf32>,
    /// The data-parallel exchange after backward (`None`: a single worker).
    exchange: Option<&'a mut dyn GradientExchange>,
    /// This worker wants the run to end after the current step (asked of the exchange).
    stop_wish: StopWish,
    /// The workers agreed, in the last step's exchange, that it was the last.
    agreed_stop: bool,
    /// ... and some worker was stopped early (so every worker's run is interrupted).
    agreed_interrupted: bool,
    /// The recomputed blocks under activation checkpointing (`None`: every activation is kept).
    ckpt: Option<Checkpoints>,
    /// Micro-batches per optimizer step (gradient accumulation; 1 without).
    micro: u64,
    /// A ZeRO run's tensors by unit (`None` for the other strategies).
    zero: Option<ZeroState>,
    /// The plan overlaps the exchange with the backward pass where the strategy can.
    overlap: bool,
    /// This step's buckets were exchanged during its backward pass; the rest is left to the step's end.
    overlap_pending: bool,
    /// The exchange's host staging buffers, kept from step to step.
    host: crate::dist::HostBuffers,
    /// The MoE layers' routing of this step's forward passes, and the measured steps' tally.
    routing: crate::moe_stats::StepRouting,
    /// An expert-parallel run's groups and expert shards, installed for the forward passes of this thread.
    expert: Option<(ExpertState, crate::expert_parallel::Installed)>,
    /// The measured steps' gradient squares, as this rank owns them ([`Common::note_gradients`]).
    gradients: gradients::GradientTrack,
}

/// Everything one run holds on the device.
pub struct Session<'a> {
    plan: &'a RunPlan,
    common: Common<'a>,
    mode: Mode,
}

fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

impl Common<'_> {
    /// The allocator's allocated bytes now: CUDA's caching allocator (host-side bookkeeping: no
    /// synchronisation), or on the CPU what this thread allocated while the run counts it
    /// ([`CpuMemory`]).
    fn allocated(&self) -> Result<Option<u64>, TchError> {
        match self.device {
            Device::Cuda(d) => shim::cuda_memory_stats(d)
                .map(|s| Some(s.allocated))
                .map_err(|e| TchError::Torch(format!("allocator statistics: {e}"))),
            _ => Ok(CpuMemory::allocated()),
        }
    }

    /// Note what a forward pass that started at `before` allocated bytes left allocated.
    fn note_forward(&mut self, before: Option<u64>) -> Result<(), TchError> {
        if let (Some(b), Some(a)) = (before, self.allocated()?) {
            let grown = a.saturating_sub(b);
            self.activations = Some(self.activations.map_or(grown, |m| m.max(grown)));
        }
        Ok(())
    }

    fn autocast_guard(&self) -> Result<Option<AutocastGuard>, TchError> {
        self.autocast
            .map(|d| AutocastGuard::enter(self.device.is_cuda(), d))
            .transpose()
            .map_err(|e| TchError::Kind(format!("autocast: {e}")))
    }

    /// The inputs of micro-batch `micro` of step `step`: this step's batch from the dataset, or the pool's.
    fn fresh_env(&self, step: u64, micro: usize) -> Result<Vec<Option<Tensor>>, TchError> {
        let mut env: Vec<Option<Tensor>> = (0..self.graph.nodes.len()).map(|_| None).collect();
        match (&self.current, &self.pool) {
            (Some(batch), _) => {
                for (id, t) in batch {
                    env[*id] = Some(t.shallow_clone());
                }
            }
            (None, Some(pool)) => pool.load(step, micro, self.device, &mut env)?,
            (None, None) => return Err(TchError::Kind("internal: no batch for this step".into())),
        }
        Ok(env)
    }
}

impl<'a> Session<'a> {
    /// Lower the graph, build the optimizer(s) and, without a dataset (`synthetic`), the data pool.
    pub fn new(
        plan: &'a RunPlan,
        graph: &'a Graph,
        device: Device,
        wgan: Option<WganRoles>,
        exchange: Option<&'a mut dyn GradientExchange>,
        synthetic: bool,
        crate::check::ModelSplit { tensor, expert }: crate::check::ModelSplit,
    ) -> Result<Self, TchError> {
        tch::manual_seed(plan.seed as i64);
        let numerics = plan.numerics;
        let mut exchange = exchange;
        let mut tf32 = None;
        if device.is_cuda() {
            tch::Cuda::manual_seed_all(plan.seed);
            tch::Cuda::cudnn_set_benchmark(numerics.cudnn_benchmark);
            let (matmul, cudnn) = shim::set_tf32(numerics.tf32.matmul, numerics.tf32.cudnn)
                .map_err(|e| TchError::Torch(format!("TF32 switches: {e}")))?;
            tf32 = Some(Tf32 { matmul, cudnn });
        } else {
            // The switches are process-wide (libtorch's legacy matmul precision also reaches oneDNN): a CPU run
            // after a CUDA run with TF32 on gets PyTorch's defaults back.
            let d = Tf32::default();
            shim::set_tf32(d.matmul, d.cudnn).map_err(|e| TchError::Torch(format!("TF32 switches: {e}")))?;
        }
        // Weights and data are generated in host memory first: refuse, as out of memory, what cannot fit
        // instead of letting the allocator abort the process.
        let micro = plan.schedule.micro_batches();
        let needed = host_bytes_needed(graph, plan.batch_size * micro as usize);
        if let Some(avail) = host_available_bytes() {
            if needed > avail {
                return Err(TchError::Torch(format!(
                    "not enough memory: the initial weights and one input batch need {needed} bytes of host memory, \
                     {avail} are available"
                )));
            }
        }
        let tensor_split = tensor.as_ref().map(TensorParallel::degree);
        let mut model = Lowered::with_tensor_parallel(graph, device, plan.seed, tensor)?;
        // Expert parallelism: every expert initialised as on one rank, this rank's shard kept.
        let expert = expert.map(|g| ExpertState::shard(g, &mut model, graph)).transpose()?;
        if device.is_cuda() && tch::Cuda::cudnn_is_available() {
            // One cuDNN buffer per recurrent layer, as `flatten_parameters()`: no copy of the weights per call.
            model.flatten_rnns(graph)?;
        }
        // A data-parallel worker trains on its slice of the global batch every worker generates alike.
        let slice = exchange.as_ref().map_or((0, 1), |x| (x.worker(), x.workers()));
        let pool = if synthetic {
            let (b, k) = (plan.batch_size, micro as usize);
            let count = DataPool::steps_for(graph, b, k, slice.1);
            Some(DataPool::new_micro(graph, b, k, slice, plan.seed, count, device)?)
        } else {
            None
        };
        let mode = match wgan {
            None => {
                Mode::Plain(PlainStep::new(Optim::new(&plan.optimizer, model.parameters(graph, |_| true), device)?))
            }
            Some(roles) => {
                let is_critic = |n: &Node| n.part.as_deref() == Some(roles.critic_part.as_str());
                let critic = Optim::new(&plan.optimizer, model.parameters(graph, is_critic), device)?;
                let generator = Optim::new(&plan.optimizer, model.parameters(graph, |n| !is_critic(n)), device)?;
                Mode::Wgan(WganStep { roles, critic, generator })
            }
        };
        let scaler =
            if plan.precision == Precision::Fp16 { Some(GradScaler::new(device, numerics.loss_scale)?) } else { None };
        let autocast = match plan.precision {
            Precision::Fp32 => None,
            Precision::Fp16 => Some(AutocastDtype::Half),
            Precision::Bf16 => Some(AutocastDtype::BFloat16),
        };
        if let (Some(x), Mode::Plain(step)) = (exchange.as_deref(), &mode) {
            crate::dist::check_layout(x, expert.as_ref().map_or(step.opt.params(), |e| e.dense.as_slice()))?;
        }
        let zero = match (exchange.as_deref_mut().and_then(|x| x.sharded()), &mode) {
            (Some(s), Mode::Plain(step)) => {
                // Every worker built the same initial weights: each keeps its shard as the master copy, and
                // stage 3 frees the blocks' weights until they run.
                let held = expert.as_ref().map_or(step.opt.params(), |e| e.dense.as_slice());
                s.init(&crate::dist::flat_values(held)?);
                let params = ZeroParams::new(s.units(), held, graph.blocks.len(), device);
                if s.stage() == 3 {
                    let roots = params.root_units();
                    for u in (0..params.len()).filter(|u| !roots.contains(u)) {
                        params.free(u)?;
                    }
                }
                Some(ZeroState { params, buf: Vec::new(), spare: Vec::new(), grads_peak: 0 })
            }
            _ => None,
        };
        let common = Common {
            graph,
            device,
            model,
            pool,
            current: None,
            scaler,
            autocast,
            grad_bytes: 0,
            activations: None,
            tf32,
            exchange,
            stop_wish: StopWish::Continue,
            agreed_stop: false,
            agreed_interrupted: false,
            ckpt: Checkpoints::new(graph, plan.schedule.checkpointing, device),
            micro,
            zero,
            // A tensor group without data-parallel peers has no exchange to overlap (and its collectives run
            // inside the backward pass, where no exchange thread may call the engine beside them).
            overlap: plan.topology.overlap && (tensor_split.is_none() || plan.topology.data_parallel() > 1),
            overlap_pending: false,
            host: crate::dist::HostBuffers::default(),
            routing: crate::moe_stats::StepRouting::default(),
            expert: expert.map(|e| {
                let installed = crate::expert_parallel::install(e.parallel().clone());
                (e, installed)
            }),
            gradients: gradients::GradientTrack::default(),
        };
        Ok(Self { plan, common, mode })
    }

    /// One training iteration on the next batch of `source` (or the synthetic pool), timed by `clock`; returns
    /// its phase times and the (detached) loss.
    fn step(
        &mut self,
        i: u64,
        source: &mut Option<&mut dyn BatchSource>,
        clock: &mut Clock,
    ) -> Result<(PhaseTimes, Tensor), BackendError> {
        let batch = self.plan.batch_size;
        let start = Instant::now();
        let mut p = PhaseTimes::default();
        self.common.routing.clear();
        // Every micro-batch's host batch is read before the step's clock starts: waiting for data is a stall.
        let mut hosts = Vec::new();
        if let Some(source) = source.as_deref_mut() {
            for _ in 0..self.common.micro {
                let (host, stall) = trainbench_contract::batch::fetch(source)?;
                p.stall_s += stall;
                hosts.push(host);
            }
        }
        clock.start().map_err(|e| map(e, batch))?;
        let mut micro = |s: &mut Self, j: usize, clock: &mut Clock| -> Result<Tensor, BackendError> {
            if let Some(host) = hosts.get_mut(j) {
                let host = std::mem::replace(host, trainbench_data::HostBatch { inputs: Vec::new() });
                let samples = feed::check_batch(s.common.graph, &host, Some(batch))?;
                let dev = s.common.device;
                let on_device = feed::to_device(s.common.graph, &host, samples, dev).map_err(|e| map(e, batch))?;
                drop(host);
                s.common.current = Some(on_device);
                clock.lap(Phase::Copy).map_err(|e| map(e, batch))?;
            }
            let last = j + 1 == s.common.micro as usize;
            let mut run = || -> Result<Tensor, TchError> {
                let env = s.common.fresh_env(i, j)?;
                if s.common.current.is_none() {
                    clock.lap(Phase::Copy)?;
                }
                match &mut s.mode {
                    Mode::Plain(step) => step.micro(&mut s.common, env, clock, last),
                    Mode::Wgan(step) => step.run(&mut s.common, env, i, clock),
                }
            };
            let loss = run().map_err(|e| map(e, batch));
            s.common.current = None;
            if loss.is_err() {
                if let Some(c) = s.common.ckpt.as_mut() {
                    c.clear();
                }
            }
            loss
        };
        let mut total: Option<Tensor> = None;
        for j in 0..self.common.micro as usize {
            let l = micro(self, j, clock)?;
            total = Some(match total {
                None => l,
                Some(t) => t.f_add(&l).map_err(|e| map(e, batch))?,
            });
        }
        let total = total.ok_or_else(|| BackendError::Framework("internal: a step without micro-batches".into()))?;
        let loss = match &mut self.mode {
            Mode::Plain(step) => {
                step.finish(&mut self.common, clock).map_err(|e| map(e, batch))?;
                // The step's loss: the mean of its micro-batches' losses.
                if self.common.micro > 1 {
                    total.f_div_scalar(self.common.micro as f64).map_err(|e| map(e, batch))?
                } else {
                    total
                }
            }
            Mode::Wgan(_) => total,
        };
        self.common.current = None;
        let phases = clock.finish().map_err(|e| map(e, batch))?;
        p.total_s = start.elapsed().as_secs_f64();
        match phases {
            Some(t) => {
                p.copy_s = t[Phase::Copy as usize];
                p.forward_s = t[Phase::Forward as usize];
                p.backward_s = t[Phase::Backward as usize];
                p.comm_s = t[Phase::Comm as usize];
                p.optimizer_s = t[Phase::Optimizer as usize];
                p.data_s = p.stall_s + p.copy_s;
            }
            // Without phase timing only the iteration total is a true device time.
            None => p.stall_s = 0.0,
        }
        Ok((p, loss))
    }

    /// The free-running window: up to `steps` more steps queued with no synchronisation and no loss read, then
    /// one synchronisation; `None` when a stop or the run's timeout cut it short.
    fn free_running(
        &mut self,
        steps: u64,
        index: &mut u64,
        source: &mut Option<&mut dyn BatchSource>,
        probe: &mut dyn Probe,
        timed_out: &dyn Fn() -> bool,
    ) -> Result<Option<FreeRunning>, BackendError> {
        let mut clock = Clock::free_running();
        let start = Instant::now();
        for _ in 0..steps {
            if probe.should_stop() || timed_out() {
                sync(self.common.device);
                return Ok(None);
            }
            let (_, _loss) = self.step(*index, source, &mut clock)?;
            *index += 1;
        }
        sync(self.common.device);
        Ok(Some(FreeRunning { steps, seconds: start.elapsed().as_secs_f64() }))
    }

    /// Evaluate every batch of the evaluation split, forward only.
    fn evaluate(&self, eval: &EvalSet) -> Result<EvalTally, BackendError> {
        let c = &self.common;
        let mut tally = EvalTally::default();
        for host in &eval.batches {
            let samples = feed::check_batch(c.graph, host, None)?;
            let mut go = || -> Result<(), TchError> {
                let batch = feed::to_device(c.graph, host, samples, c.device)?;
                let _ac = c.autocast_guard()?;
                feed::evaluate(&c.model, c.graph, batch, samples, &mut tally)
            };
            go().map_err(|e| map(e, samples))?;
        }
        sync(c.device);
        Ok(tally)
    }

    /// ZeRO-3: every unit's weights gathered into the model (after the last step, so the weights reported and
    /// digested are the whole model's).
    fn gather_all(&mut self) -> Result<(), TchError> {
        let c = &mut self.common;
        match (c.exchange.as_deref_mut().and_then(|x| x.sharded()), c.zero.as_mut()) {
            (Some(s), Some(z)) => z.gather_all(s),
            _ => Ok(()),
        }
    }

    /// Bytes of trained parameters of all optimizers.
    fn trained_bytes(&self) -> u64 {
        match &self.mode {
            Mode::Plain(s) => s.opt.param_bytes(),
            Mode::Wgan(s) => s.critic.param_bytes() + s.generator.param_bytes(),
        }
    }

    /// Bytes of optimizer state: allocated, where the optimizers expose it (the fused ones on CUDA), else as
    /// the optimizer's rule says (buffers per trained element); a ZeRO run's: its shard's, as held.
    fn state_bytes(&mut self) -> u64 {
        if let Some(held) = self.common.exchange.as_deref_mut().and_then(|x| x.sharded()).map(|s| s.held()) {
            // Beside expert parallelism the model's optimizer holds the experts' state.
            let experts = self.common.expert.as_ref().map_or(0, |(e, _)| e.expert_bytes());
            return held.optimizer_state + self.plan.optimizer.state_buffers() * experts;
        }
        let exposed = match &self.mode {
            Mode::Plain(s) => s.opt.state_bytes(),
            Mode::Wgan(s) => s.critic.state_bytes().zip(s.generator.state_bytes()).map(|(a, b)| a + b),
        };
        exposed.unwrap_or_else(|| self.plan.optimizer.state_buffers() * self.trained_bytes())
    }

    /// Run warm-up and measured iterations as the plan says (with a target: until it is reached or its budget
    /// ends, evaluating `eval` as it says), on the batches of `source` (synthetic without one), reporting each
    /// step to `probe`.
    pub fn run(
        &mut self,
        probe: &mut dyn Probe,
        source: Option<&mut dyn BatchSource>,
        eval: Option<&EvalSet>,
    ) -> Result<RawMeasurements, BackendError> {
        let batch = self.plan.batch_size;
        // Data-parallel workers stop together: a wish to stop is agreed in the step's exchange, and the run
        // ends after the step every worker took.
        let distributed = self.common.exchange.is_some();
        if self.plan.target.is_some() && distributed {
            return Err(BackendError::Data(
                "runs with a target train on one worker; data-parallel runs do not evaluate yet".into(),
            ));
        }
        // On the CPU, this thread's allocations are counted while the run lasts (activations are measured).
        let _cpu_memory =
            if self.common.device.is_cuda() { None } else { Some(CpuMemory::track().map_err(|e| map(e, batch))?) };
        let settings = LoopSettings { distributed, ..LoopSettings::of(self.plan) };
        let epoch = source.as_ref().and_then(|d| d.epoch_batches());
        let mut steady = SteadyLoop::new(self.plan, settings, eval.is_some(), epoch)?;
        let mut out = RawMeasurements { tf32: self.common.tf32, ..RawMeasurements::default() };
        let clock = Clock::for_run(self.common.device, self.plan.phase_timing);
        let cuda_index = match self.common.device {
            Device::Cuda(i) => Some(i),
            _ => None,
        };
        let mut steps = TchSteps { session: self, source, eval, clock, cuda_index };
        let end = steady.run(&mut steps, probe, &mut out)?;
        let TchSteps { mut source, .. } = steps;
        if end.in_warmup {
            return Ok(out);
        }
        let (mut index, measured) = (end.steps, end.measured);
        out.routing = self.common.routing.take_tally();
        let mut weights = self.common.model.weight_bytes();
        let state = self.state_bytes();
        let mut gradients = self.common.grad_bytes;
        if let Some(held) = self.common.exchange.as_deref_mut().and_then(|x| x.sharded()).map(|s| s.held()) {
            // A ZeRO worker holds the weights resident between steps and its master shard, and at most its
            // peak of full gradients beside its gradient shard.
            weights += held.weights_shard;
            gradients = self.common.zero.as_ref().map_or(gradients, |z| z.grads_peak) + held.gradient_shard;
            self.gather_all().map_err(|e| map(e, batch))?;
        }
        let (peak, reserved) = match cuda_index {
            Some(d) => {
                let s = shim::cuda_memory_stats(d).map_err(|e| BackendError::Framework(e.0))?;
                (Some(s.peak_allocated), Some(s.peak_reserved))
            }
            None => (None, None),
        };
        // Over every step, warm-up included: the group's traffic since it was made.
        out.tensor_traffic =
            self.common.model.tensor_parallel().map(|tp| tp.traffic_per_step(Default::default(), index));
        if let Mode::Plain(step) = &self.mode {
            let whole = self.common.whole_weights(step.opt.params()).map_err(|e| map(e, batch))?;
            out.weight_norms = Some(crate::norms::tensor_norms(&whole).map_err(|e| map(e, batch))?);
            if distributed {
                out.weights_digest = Some(crate::dist::digest(&whole).map_err(|e| map(e, batch))?);
                out.expert = self.common.expert.as_ref().map(|(e, _)| e.traffic());
            }
        }
        out.gradient_squares = self.common.gradients.squares;
        out.memory = MemoryMeasured {
            weights,
            gradients,
            optimizer_state: state,
            peak_allocated: peak,
            reserved,
            activations: self.common.activations,
        };
        // CUDA queues kernels ahead of the device: after the measured steps (each ending in one synchronisation),
        // as many more run free (up to FREE_RUNNING_MAX_STEPS) with one synchronisation at the end. On the CPU
        // every step is synchronous anyway; a target or several workers have their own stopping rules.
        if cuda_index.is_some() && out.target.is_none() && !distributed && !out.interrupted && measured > 0 {
            let steps = measured.min(FREE_RUNNING_MAX_STEPS);
            let timed_out = || steady.timed_out();
            out.free_running = self.free_running(steps, &mut index, &mut source, probe, &timed_out)?;
        }
        Ok(out)
    }
}

/// The shared loop's view of a session: one step on the next batch of `source` (or the synthetic pool), timed
/// by `clock`, its loss read (a synchronisation) only when measured; the CUDA peak reset before the measured
/// steps; the evaluation split evaluated on the device.
struct TchSteps<'s, 'a, 'd, 'e> {
    session: &'s mut Session<'a>,
    source: Option<&'d mut dyn BatchSource>,
    eval: Option<&'e EvalSet>,
    clock: Clock,
    cuda_index: Option<usize>,
}

impl SteadyStep for TchSteps<'_, '_, '_, '_> {
    type Error = BackendError;

    fn step(&mut self, index: u64, measured: bool, wish: EndWish) -> Result<StepOutcome, BackendError> {
        let common = &mut self.session.common;
        common.gradients.measuring = measured;
        common.stop_wish = match wish {
            EndWish::Continue => StopWish::Continue,
            EndWish::Finished => StopWish::Finished,
            EndWish::Interrupted => StopWish::Interrupted,
        };
        let (phases, loss) = self.session.step(index, &mut self.source, &mut self.clock)?;
        // Reading the loss synchronises: only a measured step reads it.
        let loss = if measured {
            let common = &mut self.session.common;
            common.routing.finish_measured(&common.graph.nodes);
            Some(loss.f_double_value(&[]).map_err(|e| map(e, self.session.plan.batch_size))?)
        } else {
            None
        };
        let common = &self.session.common;
        let agreed_end = common.agreed_stop.then_some(common.agreed_interrupted);
        Ok(StepOutcome { phases, loss, agreed_end })
    }

    fn measuring(&mut self) -> Result<(), BackendError> {
        if let Some(d) = self.cuda_index {
            shim::cuda_reset_peak(d).map_err(|e| BackendError::Framework(e.0))?;
        }
        self.session.common.activations = None;
        Ok(())
    }

    fn evaluate(&mut self, _when: EvalWhen) -> Result<(EvalTally, Option<f64>), BackendError> {
        let eval =
            self.eval.ok_or_else(|| BackendError::Data("the run has a target but no evaluation split".into()))?;
        Ok((self.session.evaluate(eval)?, None))
    }
}
