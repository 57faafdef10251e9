//! The training loop of one run: data, forward (+ loss), backward and optimizer phases timed per iteration,
//! mixed precision (autocast, fp16 loss scaling), the WGAN-GP two-optimizer step, and memory measurement.

use std::time::Instant;

use tch::{COptimizer, Device, Kind, TchError, Tensor};
use trainbench_workload::comm::{GradientExchange, StopWish};
use trainbench_workload::data::{self, BatchSource, EvalSet};
use trainbench_workload::graph::{Graph, Node};
use trainbench_workload::target::{EvalTally, TargetTracker};
use trainbench_workload::{
    BackendError, Budget, MemoryMeasured, OptimizerSpec, PhaseTimes, Precision, Probe, RawMeasurements, RunPlan,
};

use crate::check::WganRoles;
use crate::feed::{self, DeviceBatch};
use crate::lower::{DataPool, EvalOpts, Lowered, host_available_bytes, host_bytes_needed, pool_size, tensor_bytes};
use crate::shim::{self, AutocastDtype, AutocastGuard};

/// An optimizer over a set of parameters (libtorch's C++ `torch::optim`, PyTorch's semantics).
struct Optim {
    opt: COptimizer,
    params: Vec<Tensor>,
}

impl Optim {
    fn new(spec: &OptimizerSpec, params: Vec<Tensor>) -> Result<Self, TchError> {
        let mut opt = match *spec {
            OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
                COptimizer::sgd(lr, momentum, 0.0, weight_decay, nesterov)?
            }
            OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay } => {
                COptimizer::adam(lr, beta1, beta2, weight_decay, eps, false)?
            }
            OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
                COptimizer::adamw(lr, beta1, beta2, weight_decay, eps, false)?
            }
        };
        for p in &params {
            opt.add_parameters(p, 0)?;
        }
        Ok(Self { opt, params })
    }

    fn param_bytes(&self) -> u64 {
        self.params.iter().map(tensor_bytes).sum()
    }

    fn grad_bytes(&self) -> u64 {
        self.params.iter().map(|p| p.grad()).filter(|g| g.defined()).map(|g| tensor_bytes(&g)).sum()
    }

    /// Step (skipped when the scaler found non-finite gradients), then drop the gradients (set to none).
    fn step(&mut self, scaler: Option<&mut GradScaler>) -> Result<(), TchError> {
        match scaler {
            None => self.opt.step()?,
            Some(s) => {
                let found_inf = s.unscale(&self.params)?;
                if found_inf.f_double_value(&[0])? == 0.0 {
                    self.opt.step()?;
                }
                s.update(&found_inf)?;
            }
        }
        self.opt.zero_grad()
    }
}

/// Dynamic loss scaling as `torch.amp.GradScaler` (initial scale 2^16, growth 2 every 2000 finite steps,
/// backoff 0.5 on overflow).
struct GradScaler {
    scale: Tensor,
    growth_tracker: Tensor,
}

impl GradScaler {
    fn new(device: Device) -> Result<Self, TchError> {
        Ok(Self {
            scale: Tensor::f_full([1], 65536.0, (Kind::Float, device))?,
            growth_tracker: Tensor::f_zeros([1], (Kind::Int, device))?,
        })
    }
    fn scale(&self, loss: &Tensor) -> Result<Tensor, TchError> {
        loss.f_mul(&self.scale)
    }
    fn unscale(&self, params: &[Tensor]) -> Result<Tensor, TchError> {
        let mut found_inf = self.scale.f_zeros_like()?;
        let inv = self.scale.f_reciprocal()?;
        for p in params {
            let mut g = p.grad();
            if g.defined() {
                g.f_internal_amp_non_finite_check_and_unscale(&mut found_inf, &inv)?;
            }
        }
        Ok(found_inf)
    }
    fn update(&mut self, found_inf: &Tensor) -> Result<(), TchError> {
        let _updated = self.scale.f_internal_amp_update_scale_(&self.growth_tracker, found_inf, 2.0, 0.5, 2000)?;
        Ok(())
    }
}

fn map(e: TchError, batch: usize) -> BackendError {
    crate::map_error(e, batch)
}

/// A phase timer: synchronises the device when phases are timed, then returns the seconds since the last lap.
type PhaseSync<'f> = &'f dyn Fn(&mut Instant) -> f64;

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

/// Seconds since `t`, then reset `t` to now.
fn lap(t: &mut Instant) -> f64 {
    let now = Instant::now();
    let s = now.duration_since(*t).as_secs_f64();
    *t = now;
    s
}

impl Common<'_> {
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
        if device.is_cuda() {
            tch::Cuda::manual_seed_all(plan.seed);
            tch::Cuda::cudnn_set_benchmark(true);
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
            None => Mode::Plain(PlainStep { opt: Optim::new(&plan.optimizer, model.parameters(graph, |_| true))? }),
            Some(roles) => {
                let is_critic = |n: &Node| n.part.as_deref() == Some(roles.critic_part.as_str());
                let critic = Optim::new(&plan.optimizer, model.parameters(graph, is_critic))?;
                let generator = Optim::new(&plan.optimizer, model.parameters(graph, |n| !is_critic(n)))?;
                Mode::Wgan(WganStep { roles, critic, generator })
            }
        };
        let scaler = if plan.precision == Precision::Fp16 { Some(GradScaler::new(device)?) } else { None };
        let autocast = match plan.precision {
            Precision::Fp32 => None,
            Precision::Fp16 => Some(AutocastDtype::Half),
            Precision::Bf16 => Some(AutocastDtype::BFloat16),
        };
        if let (Some(x), Mode::Plain(step)) = (exchange.as_deref(), &mode) {
            crate::dist::check_layout(x, &step.opt.params)?;
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
            exchange,
            stop_wish: StopWish::Continue,
            agreed_stop: false,
            agreed_interrupted: false,
        };
        Ok(Self { plan, common, mode })
    }

    /// One training iteration on the next batch of `source` (or the synthetic pool); returns its phase times
    /// and the (detached) loss.
    fn step(
        &mut self,
        i: u64,
        source: &mut Option<&mut dyn BatchSource>,
    ) -> Result<(PhaseTimes, Tensor), BackendError> {
        let batch = self.plan.batch_size;
        let dev = self.common.device;
        let sync_phases = self.plan.phase_timing || !dev.is_cuda();
        let phase_sync = |t: &mut Instant| {
            if sync_phases {
                sync(dev);
            }
            lap(t)
        };
        let start = Instant::now();
        let mut p = PhaseTimes::default();
        if let Some(source) = source.as_deref_mut() {
            let (host, stall) = data::fetch(source)?;
            p.stall_s = stall;
            let mut t = Instant::now();
            let samples = feed::check_batch(self.common.graph, &host, Some(batch))?;
            let on_device = feed::to_device(self.common.graph, &host, samples, dev).map_err(|e| map(e, batch))?;
            drop(host);
            self.common.current = Some(on_device);
            p.copy_s = phase_sync(&mut t);
        }
        let mut t = Instant::now();
        let run = |s: &mut Self, p: &mut PhaseTimes, t: &mut Instant| -> Result<Tensor, TchError> {
            let env = s.common.fresh_env(i)?;
            if s.common.current.is_none() {
                p.copy_s = phase_sync(t);
            }
            match &mut s.mode {
                Mode::Plain(step) => step.run(&mut s.common, env, p, t, &phase_sync),
                Mode::Wgan(step) => step.run(&mut s.common, env, i, p, t, &phase_sync),
            }
        };
        let loss = run(self, &mut p, &mut t).map_err(|e| map(e, batch))?;
        self.common.current = None;
        sync(dev);
        p.data_s = p.stall_s + p.copy_s;
        p.total_s = start.elapsed().as_secs_f64();
        if !sync_phases {
            // Without synchronisation between phases only the iteration total is a true device time.
            p.data_s = 0.0;
            p.stall_s = 0.0;
            p.copy_s = 0.0;
            p.forward_s = 0.0;
            p.backward_s = 0.0;
            p.optimizer_s = 0.0;
        }
        Ok((p, loss))
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
        let mut out = RawMeasurements::default();
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
            let (p, _) = self.step(index, &mut source)?;
            if let Some(t) = tracker.as_mut() {
                t.trained(p.total_s);
            }
            probe.step(index, false, &p);
            out.warmup_steps.push(p);
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
            let (p, loss) = self.step(index, &mut source)?;
            out.losses.push(loss.f_double_value(&[]).map_err(|e| map(e, batch))?);
            probe.step(index, true, &p);
            out.steps.push(p);
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
        let trained = self.trained_bytes();
        let state = self.plan.optimizer.state_buffers() * trained;
        let (peak, reserved) = match cuda_index {
            Some(d) => {
                let s = shim::cuda_memory_stats(d).map_err(|e| BackendError::Framework(e.0))?;
                (Some(s.peak_allocated), Some(s.peak_reserved))
            }
            None => (None, None),
        };
        if let (true, Mode::Plain(step)) = (distributed, &self.mode) {
            out.weights_digest = Some(crate::dist::digest(&step.opt.params).map_err(|e| map(e, self.plan.batch_size))?);
        }
        out.memory = MemoryMeasured {
            weights,
            gradients: self.common.grad_bytes,
            optimizer_state: state,
            peak_allocated: peak,
            reserved,
        };
        Ok(out)
    }
}

/// The plain step: forward all losses, backward, one optimizer step.
struct PlainStep {
    opt: Optim,
}

impl PlainStep {
    fn run(
        &mut self,
        c: &mut Common<'_>,
        mut env: Vec<Option<Tensor>>,
        p: &mut PhaseTimes,
        t: &mut Instant,
        phase_sync: PhaseSync<'_>,
    ) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let loss = {
            let _ac = c.autocast_guard()?;
            c.model.eval(graph, &mut env, &graph.losses, &EvalOpts::plain())?;
            let mut total: Option<Tensor> = None;
            for &l in &graph.losses {
                let v = env[l].take().ok_or_else(|| TchError::Kind("internal: loss not computed".into()))?;
                let v = match graph.nodes[l].op {
                    trainbench_workload::Op::Loss { weight, .. } if weight != 1.0 => {
                        v.f_mul_scalar(f64::from(weight))?
                    }
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
        p.forward_s += phase_sync(t);
        match &c.scaler {
            Some(s) => s.scale(&loss)?.f_backward()?,
            None => loss.f_backward()?,
        }
        p.backward_s += phase_sync(t);
        if c.grad_bytes == 0 {
            c.grad_bytes = self.opt.grad_bytes();
        }
        if let Some(x) = c.exchange.as_deref_mut() {
            let step = crate::dist::exchange(x, &self.opt.params, c.stop_wish)?;
            c.agreed_stop = step.stop;
            c.agreed_interrupted = step.interrupted;
            p.comm_s += phase_sync(t);
            if step.weights_updated {
                // The parameter servers applied the optimizer: only the gradients are left to drop.
                self.opt.opt.zero_grad()?;
                p.optimizer_s += phase_sync(t);
                return loss.f_detach();
            }
        }
        self.opt.step(c.scaler.as_mut())?;
        p.optimizer_s += phase_sync(t);
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
        p: &mut PhaseTimes,
        t: &mut Instant,
        phase_sync: PhaseSync<'_>,
    ) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let roles = &self.roles;
        let critic_part = roles.critic_part.clone();
        let is_gen = move |n: &Node| n.part.as_ref().is_some_and(|q| *q != critic_part);
        let loss_d = {
            let _ac = c.autocast_guard()?;
            let opts = EvalOpts { frozen: &is_gen, critic_update: true };
            c.model.eval(graph, &mut env, &[roles.loss], &opts)?;
            env[roles.loss].take().ok_or_else(|| TchError::Kind("internal: critic loss not computed".into()))?
        };
        drop(env);
        p.forward_s += phase_sync(t);
        loss_d.f_backward()?;
        p.backward_s += phase_sync(t);
        let critic_grads = self.critic.grad_bytes();
        self.critic.step(None)?;
        self.set_critic_trainable(false);
        p.optimizer_s += phase_sync(t);
        // Generator step, with the critic's parameters frozen; they are unfrozen whatever happens.
        let result = self.generator_step(c, i, critic_grads, p, t, phase_sync);
        self.set_critic_trainable(true);
        result?;
        loss_d.f_detach()
    }

    fn set_critic_trainable(&self, on: bool) {
        for q in &self.critic.params {
            let _ = q.set_requires_grad(on);
        }
    }

    fn generator_step(
        &mut self,
        c: &mut Common<'_>,
        i: u64,
        critic_grads: u64,
        p: &mut PhaseTimes,
        t: &mut Instant,
        phase_sync: PhaseSync<'_>,
    ) -> Result<(), TchError> {
        let graph = c.graph;
        let scores = self.roles.scores;
        let mut env = c.fresh_env(i)?;
        let loss_g = {
            let _ac = c.autocast_guard()?;
            c.model.eval(graph, &mut env, &[scores], &EvalOpts::plain())?;
            let s = env[scores].take().ok_or_else(|| TchError::Kind("internal: critic scores".into()))?;
            let b = s.size()[0];
            s.f_to_kind(Kind::Float)?.f_reshape([b, 3])?.f_select(1, 1)?.f_mean(None::<Kind>)?.f_neg()?
        };
        drop(env);
        p.forward_s += phase_sync(t);
        loss_g.f_backward()?;
        p.backward_s += phase_sync(t);
        if c.grad_bytes == 0 {
            c.grad_bytes = critic_grads + self.generator.grad_bytes();
        }
        self.generator.step(None)?;
        p.optimizer_s += phase_sync(t);
        Ok(())
    }
}
