//! The training loop: the next batch (synthetic, or from the dataset `RunContext::data` hands in: the wait for
//! it is the stall, its upload the copy), forward, backward, optimizer step, each phase timed with the device
//! synchronised; memory sampled from burn's memory pool; the probe told after every iteration. With a target,
//! the evaluation split is evaluated as often as it says and the run ends at the target or its budget.

use std::time::Instant;

use burn::tensor::Device;
use trainbench_contract::batch::check_batch;
use trainbench_contract::target::TargetTracker;
use trainbench_contract::{BackendError, Budget, PhaseTimes, RawMeasurements, RunContext, RunPlan};
use trainbench_graph::Graph;

use crate::eval::evaluate;
use crate::lower::{Forward, data_pool, upload};
use crate::optim::Optimizer;
use crate::params::Store;
use crate::value::ValueError;

/// Why a training run stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The lowering met an inconsistency.
    #[error(transparent)]
    Lower(#[from] ValueError),
    /// The device reported an execution failure.
    #[error("device execution failed: {0}")]
    Device(String),
    /// The dataset or the run's target failed (a [`BackendError::Data`]), passed on as it is.
    #[error(transparent)]
    Backend(BackendError),
}

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

/// Evaluate the evaluation split and record it in `tracker`.
fn evaluate_into(
    tracker: &mut TargetTracker,
    graph: &Graph,
    store: &Store,
    ctx: &RunContext<'_>,
    device: &Device,
    started: Instant,
) -> Result<(), TrainError> {
    let Some(eval) = ctx.eval else { return Ok(()) };
    let e = Instant::now();
    let tally = evaluate(graph, store, eval, device)?;
    sync(device)?;
    tracker.record(tally, e.elapsed().as_secs_f64(), started.elapsed().as_secs_f64());
    Ok(())
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
    let mut store = Store::new(graph, plan.seed, device);
    let mut optimizer = Optimizer::new(plan.optimizer.clone(), store.slots.len());
    let mut out = RawMeasurements { memory: store.memory(&plan.optimizer), ..RawMeasurements::default() };
    let mut watch = MemoryWatch::default();
    let pool = if ctx.data.is_none() { data_pool(graph, plan.batch_size, plan.seed) } else { Vec::new() };
    let mut tracker = match &plan.target {
        Some(t) => {
            if ctx.eval.is_none() {
                return Err(TrainError::Backend(BackendError::Data(
                    "the run has a target but no evaluation split".into(),
                )));
            }
            let epoch = ctx.data.as_ref().and_then(|d| d.epoch_batches());
            Some(TargetTracker::new(t, epoch).map_err(|e| TrainError::Backend(BackendError::Data(e.to_string())))?)
        }
        None => None,
    };
    sync(device)?;
    let started = Instant::now();
    let mut measured_since: Option<Instant> = None;
    let mut step: u64 = 0;
    loop {
        let measured = step >= plan.warmup;
        if measured {
            let since = *measured_since.get_or_insert_with(Instant::now);
            let done = match (&mut tracker, plan.budget) {
                (Some(t), _) => t.finished(started.elapsed().as_secs_f64()),
                (None, Budget::Iterations(n)) => out.steps.seen() >= n,
                (None, Budget::Seconds(s)) => !out.steps.is_empty() && since.elapsed().as_secs_f64() >= s,
            };
            if done {
                break;
            }
        }
        if ctx.probe.should_stop() || plan.timeout_s.is_some_and(|t| started.elapsed().as_secs_f64() >= t) {
            out.interrupted = true;
            break;
        }
        let t0 = Instant::now();
        let (inputs, stall_s) = match ctx.next_batch() {
            Some(fetched) => {
                let (host, stall) = fetched.map_err(TrainError::Backend)?;
                let samples = check_batch(graph, &host, Some(plan.batch_size)).map_err(TrainError::Backend)?;
                (upload(graph, samples, &host.inputs, &ad), stall)
            }
            None => (upload(graph, plan.batch_size, &pool[(step % pool.len() as u64) as usize], &ad), 0.0),
        };
        if plan.phase_timing {
            sync(device)?;
        }
        let t1 = Instant::now();
        let leaves = store.leaves();
        let mut fwd = Forward::new(graph, &store, &leaves, plan.batch_size);
        let loss = fwd.run(inputs)?;
        let updates = std::mem::take(&mut fwd.buffer_updates);
        if plan.phase_timing {
            sync(device)?;
        }
        watch.sample(device);
        let t2 = Instant::now();
        let grads = loss.backward();
        if plan.phase_timing {
            sync(device)?;
        }
        watch.sample(device);
        let t3 = Instant::now();
        for (slot, leaf) in leaves.iter().enumerate() {
            if let Some(g) = leaf.grad(&grads) {
                let p = store.slots[slot].value.clone();
                store.slots[slot].value = optimizer.update(slot, p, g);
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
        ctx.probe.step(step, measured, &phases);
        if measured {
            out.steps.record(phases, Some(f64::from(loss_value)));
        } else {
            out.warmup_steps.record(phases);
        }
        step += 1;
        if let Some(t) = tracker.as_mut() {
            t.trained(phases.total_s);
            if measured && t.due() {
                evaluate_into(t, graph, &store, ctx, device, started)?;
            }
        }
    }
    if let Some(mut t) = tracker {
        if t.unevaluated_steps() && !out.interrupted {
            evaluate_into(&mut t, graph, &store, ctx, device, started)?;
        }
        out.target = Some(t.outcome());
    }
    watch.sample(device);
    out.memory.peak_allocated = watch.peak;
    out.memory.reserved = watch.reserved;
    Ok(out)
}
