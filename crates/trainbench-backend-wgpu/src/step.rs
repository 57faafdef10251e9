//! The wgpu backend's step for the shared training loop ([`SteadyLoop`], in the contract crate, runs warm-up,
//! budget, timeout, stop and target around it): the next batch (synthetic, or from the dataset
//! `RunContext::data` hands in: the wait for it is the stall, its upload the copy), forward, backward, optimizer
//! step, each phase timed with the device synchronised; memory sampled from burn's memory pool.

use std::time::Instant;

use burn::tensor::Device;
use trainbench_contract::batch::{check_batch, fetch};
use trainbench_contract::steady_loop::{EndWish, EvalWhen, LoopSettings, SteadyLoop, SteadyStep, StepOutcome};
use trainbench_contract::target::EvalTally;
use trainbench_contract::{BackendError, PhaseTimes, Probe, RawMeasurements, RunContext, RunPlan};
use trainbench_data::{BatchSource, EvalSet};
use trainbench_graph::Graph;

use crate::error::TrainError;
use crate::eval::evaluate;
use crate::lower::{Forward, HostBatch, data_pool, upload};
use crate::optim::Optimizer;
use crate::params::Store;

fn sync(device: &Device) -> Result<(), TrainError> {
    device.sync().map_err(|e| TrainError::Device(format!("{e:?}")))
}

/// Peak and reserved bytes of the memory pool seen so far.
#[derive(Default)]
struct MemoryWatch {
    peak: Option<u64>,
    reserved: Option<u64>,
}

impl MemoryWatch {
    fn sample(&mut self, device: &Device) {
        if let Some(u) = device.memory_pool_usage() {
            self.peak = Some(self.peak.unwrap_or(0).max(u.bytes_in_use));
            self.reserved = Some(self.reserved.unwrap_or(0).max(u.bytes_reserved));
        }
    }
}

fn secs(a: Instant, b: Instant) -> f64 {
    b.duration_since(a).as_secs_f64()
}

/// Train `graph` on `device` (a device without autodiff) as `plan` says.
pub fn train(
    plan: &RunPlan,
    graph: &Graph,
    device: &Device,
    ctx: &mut RunContext<'_>,
) -> Result<RawMeasurements, TrainError> {
    let ad = device.clone().autodiff();
    device.seed(plan.seed);
    let store = Store::new(graph, plan.seed, device);
    let optimizer = Optimizer::new(plan.optimizer.clone(), store.slots.len());
    let mut out = RawMeasurements { memory: store.memory(&plan.optimizer), ..RawMeasurements::default() };
    let pool = if ctx.data.is_none() { data_pool(graph, plan.batch_size, plan.seed) } else { Vec::new() };
    sync(device)?;
    let epoch = ctx.data.as_ref().and_then(|d| d.epoch_batches());
    let mut steady = SteadyLoop::new(plan, LoopSettings::of(plan), ctx.eval.is_some(), epoch)?;
    let probe: &mut dyn Probe = &mut *ctx.probe;
    let mut steps = WgpuSteps {
        plan,
        graph,
        device,
        ad,
        store,
        optimizer,
        pool,
        data: ctx.data.as_deref_mut(),
        eval: ctx.eval,
        watch: MemoryWatch::default(),
    };
    if steady.run(&mut steps, probe, &mut out)?.in_warmup {
        // A run stopped in its warm-up still records its target's (empty) outcome.
        out.target = steady.into_target();
    }
    let mut watch = steps.watch;
    watch.sample(device);
    out.memory.peak_allocated = watch.peak;
    out.memory.reserved = watch.reserved;
    Ok(out)
}

/// One run's state, driven by the shared loop one step at a time: the next batch (synthetic, or from the
/// dataset), forward, backward and the optimizer step, each phase timed with the device synchronised when the
/// plan times phases, and always after the step (the loss is read).
struct WgpuSteps<'a, 'd, 'e> {
    plan: &'a RunPlan,
    graph: &'a Graph,
    device: &'a Device,
    ad: Device,
    store: Store,
    optimizer: Optimizer,
    pool: Vec<HostBatch>,
    data: Option<&'d mut (dyn BatchSource + 'e)>,
    eval: Option<&'e EvalSet>,
    watch: MemoryWatch,
}

impl SteadyStep for WgpuSteps<'_, '_, '_> {
    type Error = TrainError;

    fn step(&mut self, step: u64, _measured: bool, _wish: EndWish) -> Result<StepOutcome, TrainError> {
        let (plan, graph, device) = (self.plan, self.graph, self.device);
        let t0 = Instant::now();
        let (inputs, stall_s) = match self.data.as_deref_mut() {
            Some(source) => {
                let (host, stall) = fetch(source)?;
                let samples = check_batch(graph, &host, Some(plan.batch_size))?;
                (upload(graph, samples, &host.inputs, &self.ad), stall)
            }
            None => {
                let pool = &self.pool;
                (upload(graph, plan.batch_size, &pool[(step % pool.len() as u64) as usize], &self.ad), 0.0)
            }
        };
        if plan.phase_timing {
            sync(device)?;
        }
        let t1 = Instant::now();
        let store = &mut self.store;
        let leaves = store.leaves();
        let mut fwd = Forward::new(graph, store, &leaves, plan.batch_size);
        let loss = fwd.run(inputs)?;
        let updates = std::mem::take(&mut fwd.buffer_updates);
        if plan.phase_timing {
            sync(device)?;
        }
        self.watch.sample(device);
        let t2 = Instant::now();
        let grads = loss.backward();
        if plan.phase_timing {
            sync(device)?;
        }
        self.watch.sample(device);
        let t3 = Instant::now();
        for (slot, leaf) in leaves.iter().enumerate() {
            if let Some(g) = leaf.grad(&grads) {
                let p = store.slots[slot].value.clone();
                store.slots[slot].value = self.optimizer.update(slot, p, g);
            }
        }
        drop(grads);
        drop(leaves);
        for (slot, v) in updates {
            store.slots[slot].value = v;
        }
        let loss_value = loss
            .without_autodiff()
            .try_into_scalar::<f32>()
            .map_err(|e| TrainError::Device(format!("reading the loss: {e:?}")))?;
        sync(device)?;
        let t4 = Instant::now();
        let phases = PhaseTimes {
            data_s: secs(t0, t1),
            stall_s,
            copy_s: (secs(t0, t1) - stall_s).max(0.0),
            forward_s: secs(t1, t2),
            backward_s: secs(t2, t3),
            comm_s: 0.0,
            optimizer_s: secs(t3, t4),
            total_s: secs(t0, t4),
        };
        Ok(StepOutcome { phases, loss: Some(f64::from(loss_value)), agreed_end: None })
    }

    /// Evaluate the evaluation split, the device synchronised at the end (the loop times the call).
    fn evaluate(&mut self, _when: EvalWhen) -> Result<(EvalTally, Option<f64>), TrainError> {
        let Some(eval) = self.eval else {
            return Err(BackendError::Data("the run has a target but no evaluation split".into()).into());
        };
        let tally = evaluate(self.graph, &self.store, eval, self.device)?;
        sync(self.device)?;
        Ok((tally, None))
    }
}
