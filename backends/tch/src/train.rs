//! The training loop of one run: data, forward (+ loss), backward and optimizer phases timed per iteration
//! ([`Clock`]: CUDA events on the stream, host clocks on the CPU), a free-running window on CUDA, mixed precision
//! (autocast, fp16 loss scaling), the WGAN-GP two-optimizer step, and memory measurement.

use std::time::Instant;

use tch::{Device, Kind, TchError, Tensor};
use trainbench_comm::{GradientExchange, StopWish};
use trainbench_contract::batch;
use trainbench_contract::target::{EvalTally, TargetTracker};
use trainbench_contract::{
    BackendError, Budget, FreeRunning, MemoryMeasured, PhaseTimes, Probe, RawMeasurements, RunPlan, Tf32,
};
use trainbench_data::{BatchSource, EvalSet};
use trainbench_graph::Precision;
use trainbench_graph::graph::{Graph, Node};

use crate::check::WganRoles;
use crate::clock::Clock;
use crate::events::Phase;
use crate::feed::{self, DeviceBatch};
use crate::lower::{DataPool, EvalOpts, Lowered, host_available_bytes, host_bytes_needed, pool_size};
use crate::optim::{GradScaler, Optim};
use crate::shim::{self, AutocastDtype, AutocastGuard};

/// Most steps of the free-running window (it runs as many as the measured steps, up to this).
pub const FREE_RUNNING_MAX_STEPS: u64 = 50;

fn map(e: TchError, batch: usize) -> BackendError {
    crate::map_error(e, batch)
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
    /// CUDA: the caching allocator's allocated bytes now (host-side bookkeeping: no synchronisation).
    fn allocated(&self) -> Result<Option<u64>, TchError> {
        match self.device {
            Device::Cuda(d) => shim::cuda_memory_stats(d)
                .map(|s| Some(s.allocated))
                .map_err(|e| TchError::Torch(format!("allocator statistics: {e}"))),
            _ => Ok(None),
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

    fn fresh_env(&self, step: u64) -> Result<Vec<Option<Tensor>>, TchError> {
        let mut env: Vec<Option<Tensor>> = (0..self.graph.nodes.len()).map(|_| None).collect();
        match (&self.current, &self.pool) {
            (Some(batch), _) => {
                for (id, t) in batch {
                    env[*id] = Some(t.shallow_clone());
                }
            }
            (None, Some(pool)) => pool.load(step, self.device, &mut env)?,
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
    ) -> Result<Self, TchError> {
        tch::manual_seed(plan.seed as i64);
        let numerics = plan.numerics;
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
        let needed = host_bytes_needed(graph, plan.batch_size);
        if let Some(avail) = host_available_bytes() {
            if needed > avail {
                return Err(TchError::Torch(format!(
                    "not enough memory: the initial weights and one input batch need {needed} bytes of host memory, \
                     {avail} are available"
                )));
            }
        }
        let model = Lowered::new(graph, device, plan.seed)?;
        if device.is_cuda() && tch::Cuda::cudnn_is_available() {
            // One cuDNN buffer per recurrent layer, as `flatten_parameters()`: no copy of the weights per call.
            model.flatten_rnns(graph)?;
        }
        // A data-parallel worker trains on its slice of the global batch every worker generates alike.
        let slice = exchange.as_ref().map_or((0, 1), |x| (x.worker(), x.workers()));
        let pool = if synthetic {
            let probe = DataPool::new_slice(graph, plan.batch_size, slice, plan.seed, 1, Device::Cpu)?;
            let count = pool_size(probe.batch_bytes());
            drop(probe);
            Some(DataPool::new_slice(graph, plan.batch_size, slice, plan.seed, count, device)?)
        } else {
            None
        };
        let mode = match wgan {
            None => {
                Mode::Plain(PlainStep { opt: Optim::new(&plan.optimizer, model.parameters(graph, |_| true), device)? })
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
            crate::dist::check_layout(x, step.opt.params())?;
        }
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
        if let Some(source) = source.as_deref_mut() {
            let (host, stall) = batch::fetch(source)?;
            p.stall_s = stall;
            clock.start().map_err(|e| map(e, batch))?;
            let samples = feed::check_batch(self.common.graph, &host, Some(batch))?;
            let dev = self.common.device;
            let on_device = feed::to_device(self.common.graph, &host, samples, dev).map_err(|e| map(e, batch))?;
            drop(host);
            self.common.current = Some(on_device);
            clock.lap(Phase::Copy).map_err(|e| map(e, batch))?;
        } else {
            clock.start().map_err(|e| map(e, batch))?;
        }
        let run = |s: &mut Self, clock: &mut Clock| -> Result<Tensor, TchError> {
            let env = s.common.fresh_env(i)?;
            if s.common.current.is_none() {
                clock.lap(Phase::Copy)?;
            }
            match &mut s.mode {
                Mode::Plain(step) => step.run(&mut s.common, env, clock),
                Mode::Wgan(step) => step.run(&mut s.common, env, i, clock),
            }
        };
        let loss = run(self, clock).map_err(|e| map(e, batch))?;
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

    /// Bytes of trained parameters of all optimizers.
    fn trained_bytes(&self) -> u64 {
        match &self.mode {
            Mode::Plain(s) => s.opt.param_bytes(),
            Mode::Wgan(s) => s.critic.param_bytes() + s.generator.param_bytes(),
        }
    }

    /// Bytes of optimizer state: allocated, where the optimizers expose it (the fused ones on CUDA), else as
    /// the optimizer's rule says (buffers per trained element).
    fn state_bytes(&self) -> u64 {
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
        mut source: Option<&mut dyn BatchSource>,
        eval: Option<&EvalSet>,
    ) -> Result<RawMeasurements, BackendError> {
        let batch = self.plan.batch_size;
        let started = Instant::now();
        let timed_out = |plan: &RunPlan| plan.timeout_s.is_some_and(|s| started.elapsed().as_secs_f64() >= s);
        let mut out = RawMeasurements { tf32: self.common.tf32, ..RawMeasurements::default() };
        let mut clock = Clock::for_run(self.common.device, self.plan.phase_timing);
        let mut index = 0u64;
        // Data-parallel workers stop together: a wish to stop is agreed in the step's exchange, and the run
        // ends after the step every worker took.
        let distributed = self.common.exchange.is_some();
        let mut tracker = match (&self.plan.target, eval) {
            (None, _) => None,
            (Some(_), _) if distributed => {
                return Err(BackendError::Data(
                    "runs with a target train on one worker; data-parallel runs do not \
                     evaluate yet"
                        .into(),
                ));
            }
            (Some(_), None) => return Err(BackendError::Data("the run has a target but no evaluation split".into())),
            (Some(t), Some(_)) => {
                let epoch = source.as_ref().and_then(|d| d.epoch_batches());
                Some(TargetTracker::new(t, epoch).map_err(|e| BackendError::Data(e.to_string()))?)
            }
        };
        for _ in 0..self.plan.warmup {
            let stop = probe.should_stop() || timed_out(self.plan);
            if stop && !distributed {
                out.interrupted = true;
                return Ok(out);
            }
            self.common.stop_wish = if stop { StopWish::Interrupted } else { StopWish::Continue };
            let (p, _) = self.step(index, &mut source, &mut clock)?;
            if let Some(t) = tracker.as_mut() {
                t.trained(p.total_s);
            }
            probe.step(index, false, &p);
            out.warmup_steps.record(p);
            index += 1;
            if self.common.agreed_stop {
                out.interrupted = true;
                return Ok(out);
            }
        }
        let cuda_index = match self.common.device {
            Device::Cuda(i) => Some(i),
            _ => None,
        };
        if let Some(d) = cuda_index {
            shim::cuda_reset_peak(d).map_err(|e| BackendError::Framework(e.0))?;
            self.common.activations = None;
        }
        let measure_start = Instant::now();
        let mut measured = 0u64;
        loop {
            let done = match (&mut tracker, self.plan.budget) {
                (Some(t), _) => t.finished(started.elapsed().as_secs_f64()),
                (None, Budget::Iterations(n)) => measured >= n,
                (None, Budget::Seconds(s)) => measured > 0 && measure_start.elapsed().as_secs_f64() >= s,
            };
            if done && !distributed {
                break;
            }
            let stop = probe.should_stop() || timed_out(self.plan);
            if stop && !distributed {
                out.interrupted = true;
                break;
            }
            // This worker's wish to end after this step: the budget reached with it, or a stop.
            let last = match self.plan.budget {
                Budget::Iterations(n) => measured + 1 >= n,
                Budget::Seconds(s) => measure_start.elapsed().as_secs_f64() >= s,
            };
            self.common.stop_wish = match (stop, last) {
                (true, _) => StopWish::Interrupted,
                (false, true) => StopWish::Finished,
                (false, false) => StopWish::Continue,
            };
            let (p, loss) = self.step(index, &mut source, &mut clock)?;
            let loss = loss.f_double_value(&[]).map_err(|e| map(e, batch))?;
            probe.step(index, true, &p);
            out.steps.record(p, Some(loss));
            index += 1;
            measured += 1;
            if distributed && self.common.agreed_stop {
                // Another worker's budget may end first (clocks differ): only a stop interrupts.
                out.interrupted = self.common.agreed_interrupted;
                break;
            }
            if let (Some(t), Some(eval)) = (tracker.as_mut(), eval) {
                t.trained(p.total_s);
                if t.due() {
                    let e = Instant::now();
                    let tally = self.evaluate(eval)?;
                    t.record(tally, e.elapsed().as_secs_f64(), started.elapsed().as_secs_f64());
                }
            }
        }
        if let (Some(mut t), Some(eval)) = (tracker, eval) {
            if t.unevaluated_steps() && !out.interrupted {
                let e = Instant::now();
                let tally = self.evaluate(eval)?;
                t.record(tally, e.elapsed().as_secs_f64(), started.elapsed().as_secs_f64());
            }
            out.target = Some(t.outcome());
        }
        let weights = self.common.model.weight_bytes();
        let state = self.state_bytes();
        let (peak, reserved) = match cuda_index {
            Some(d) => {
                let s = shim::cuda_memory_stats(d).map_err(|e| BackendError::Framework(e.0))?;
                (Some(s.peak_allocated), Some(s.peak_reserved))
            }
            None => (None, None),
        };
        if let (true, Mode::Plain(step)) = (distributed, &self.mode) {
            out.weights_digest = Some(crate::dist::digest(step.opt.params()).map_err(|e| map(e, batch))?);
        }
        out.memory = MemoryMeasured {
            weights,
            gradients: self.common.grad_bytes,
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
            let plan = self.plan;
            let timed_out = || timed_out(plan);
            out.free_running = self.free_running(steps, &mut index, &mut source, probe, &timed_out)?;
        }
        Ok(out)
    }
}

/// The plain step: forward all losses, backward, one optimizer step.
struct PlainStep {
    opt: Optim,
}

impl PlainStep {
    fn run(&mut self, c: &mut Common<'_>, mut env: Vec<Option<Tensor>>, clock: &mut Clock) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let before = c.allocated()?;
        let loss = {
            let _ac = c.autocast_guard()?;
            c.model.eval(graph, &mut env, &graph.losses, &EvalOpts::plain())?;
            let mut total: Option<Tensor> = None;
            for &l in &graph.losses {
                let v = env[l].take().ok_or_else(|| TchError::Kind("internal: loss not computed".into()))?;
                let v = match graph.nodes[l].op {
                    trainbench_graph::Op::Loss { weight, .. } if weight != 1.0 => v.f_mul_scalar(f64::from(weight))?,
                    _ => v,
                };
                total = Some(match total {
                    None => v,
                    Some(acc) => acc.f_add(&v)?,
                });
            }
            total.ok_or_else(|| TchError::Kind("the graph has no loss".into()))?
        };
        drop(env);
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        match &c.scaler {
            Some(s) => s.scale(&loss)?.f_backward()?,
            None => loss.f_backward()?,
        }
        clock.lap(Phase::Backward)?;
        if c.grad_bytes == 0 {
            c.grad_bytes = self.opt.grad_bytes();
        }
        if let Some(x) = c.exchange.as_deref_mut() {
            let step = crate::dist::exchange(x, self.opt.params(), c.stop_wish)?;
            c.agreed_stop = step.stop;
            c.agreed_interrupted = step.interrupted;
            clock.lap(Phase::Comm)?;
            if step.weights_updated {
                // The parameter servers applied the optimizer: only the gradients are left to drop.
                self.opt.zero_grad()?;
                clock.lap(Phase::Optimizer)?;
                return loss.f_detach();
            }
        }
        self.opt.step(c.scaler.as_mut())?;
        clock.lap(Phase::Optimizer)?;
        loss.f_detach()
    }
}

/// The WGAN-GP step (the zoo's `critic_batch` convention) with the critic's and the generator's optimizers.
struct WganStep {
    roles: WganRoles,
    critic: Optim,
    generator: Optim,
}

impl WganStep {
    /// WGAN-GP, one critic update per generator update (n_critic = 1), on the same batch:
    /// 1. critic: the generator runs without gradients; `critic_batch` stacks (real, fake, x_hat) with x_hat a
    ///    fresh leaf; loss_D = mean D(fake) - mean D(real) + gp_weight * GP (the Wasserstein loss node, see
    ///    `loss::forward`); backward; critic optimizer step.
    /// 2. generator: critic parameters frozen (requires_grad off); the graph is evaluated again up to the
    ///    critic's scores (the critic still scores all three slots, as the graph's shapes say);
    ///    loss_G = -mean D(fake); backward; generator optimizer step.
    ///
    /// Phase times add up both halves; the loss reported is the critic's loss_D.
    fn run(
        &mut self,
        c: &mut Common<'_>,
        mut env: Vec<Option<Tensor>>,
        i: u64,
        clock: &mut Clock,
    ) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let roles = &self.roles;
        let critic_part = roles.critic_part.clone();
        let is_gen = move |n: &Node| n.part.as_ref().is_some_and(|q| *q != critic_part);
        let before = c.allocated()?;
        let loss_d = {
            let _ac = c.autocast_guard()?;
            let opts = EvalOpts { frozen: &is_gen, critic_update: true };
            c.model.eval(graph, &mut env, &[roles.loss], &opts)?;
            env[roles.loss].take().ok_or_else(|| TchError::Kind("internal: critic loss not computed".into()))?
        };
        drop(env);
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        loss_d.f_backward()?;
        clock.lap(Phase::Backward)?;
        let critic_grads = self.critic.grad_bytes();
        self.critic.step(None)?;
        self.set_critic_trainable(false);
        clock.lap(Phase::Optimizer)?;
        // Generator step, with the critic's parameters frozen; they are unfrozen whatever happens.
        let result = self.generator_step(c, i, critic_grads, clock);
        self.set_critic_trainable(true);
        result?;
        loss_d.f_detach()
    }

    fn set_critic_trainable(&self, on: bool) {
        for q in self.critic.params() {
            let _ = q.set_requires_grad(on);
        }
    }

    fn generator_step(
        &mut self,
        c: &mut Common<'_>,
        i: u64,
        critic_grads: u64,
        clock: &mut Clock,
    ) -> Result<(), TchError> {
        let graph = c.graph;
        let scores = self.roles.scores;
        let mut env = c.fresh_env(i)?;
        let before = c.allocated()?;
        let loss_g = {
            let _ac = c.autocast_guard()?;
            c.model.eval(graph, &mut env, &[scores], &EvalOpts::plain())?;
            let s = env[scores].take().ok_or_else(|| TchError::Kind("internal: critic scores".into()))?;
            let b = s.size()[0];
            s.f_to_kind(Kind::Float)?.f_reshape([b, 3])?.f_select(1, 1)?.f_mean(None::<Kind>)?.f_neg()?
        };
        drop(env);
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        loss_g.f_backward()?;
        clock.lap(Phase::Backward)?;
        if c.grad_bytes == 0 {
            c.grad_bytes = critic_grads + self.generator.grad_bytes();
        }
        self.generator.step(None)?;
        clock.lap(Phase::Optimizer)?;
        Ok(())
    }
}
