//! The libtorch backend as the contract sees it: [`TchBackend`] and its [`Backend`] implementation, which checks
//! a plan, sets the run's threads and hands the run to the step (`step.rs`) inside a panic guard.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use tch::Device;
use trainbench_comm::{Communicator, GradientExchange};
use trainbench_contract::capability::TCH;
use trainbench_contract::{Backend, BackendError, BackendKind, DeviceInfo, RawMeasurements, RunContext, RunPlan};
use trainbench_data::BatchSource;
use trainbench_graph::Graph;

use crate::error::map_error;
use crate::{calibrate, check, device, shim, step};

/// The libtorch backend (CPU and CUDA).
#[derive(Debug, Default, Clone, Copy)]
pub struct TchBackend;

impl TchBackend {
    /// A backend instance; cheap, holds no device state between runs.
    pub fn new() -> Self {
        Self
    }
}

/// Set libtorch's intra-op threads for a run: `Some(n)` pins `n`, `None` restores the count libtorch chose at
/// start (one per core), so one run's setting never leaks into the next run in the process.
fn set_threads(threads: Option<u32>) {
    static DEFAULT: OnceLock<i32> = OnceLock::new();
    let default = *DEFAULT.get_or_init(tch::get_num_threads);
    let wanted = threads.map_or(default, |n| i32::try_from(n).unwrap_or(i32::MAX));
    if tch::get_num_threads() != wanted {
        tch::set_num_threads(wanted);
    }
}

/// Check a plan against this backend and the machine: the device exists, the world size is one this backend
/// runs, and [`Backend::supports`] (declared capabilities, then
/// [`trainbench_contract::lowering::tch::supports_lowering`]).
pub fn check(plan: &RunPlan, graph: &Graph) -> Result<Device, BackendError> {
    let dev = device::to_tch(plan.device)?;
    TCH.check_world_size(plan, graph)?;
    TchBackend::new().supports(plan, graph)?;
    Ok(dev)
}

impl Backend for TchBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Tch
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        device::all()
    }

    fn check(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        self::check(plan, graph).map(|_| ())
    }

    /// libtorch starts its intra-op thread pool, initialises oneDNN and (on CUDA) cuBLAS/cuDNN handles and the
    /// caching allocator on first use: five iterations cover forward, backward and optimizer kernels.
    fn process_warmup_iterations(&self) -> u64 {
        5
    }

    fn calibrate(
        &mut self,
        request: &trainbench_contract::calibrate::CalibrationRequest,
    ) -> Result<trainbench_contract::calibrate::Measurement, BackendError> {
        let dev = device::to_tch(request.device)?;
        set_threads(request.cpu_threads);
        match catch_unwind(AssertUnwindSafe(|| calibrate::calibrate(request, dev))) {
            Ok(r) => r.map_err(calibrate::map),
            Err(panic) => Err(BackendError::from_panic(panic.as_ref(), 0, "libtorch call panicked")),
        }
    }

    fn run_in(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        let dev = self::check(plan, graph)?;
        if plan.topology.mesh.pipeline_parallel > 1 {
            return run_pipeline(plan, graph, dev, ctx);
        }
        let probe = &mut *ctx.probe;
        let source = ctx.data.as_deref_mut().map(|d| -> &mut dyn BatchSource { d });
        let eval = ctx.eval;
        // Re-borrowed for this call (the closure shortens the trait object's lifetime to the borrow's).
        let given = ctx.exchange.as_deref_mut().map(|x| -> &mut dyn GradientExchange { x });
        // A rank of a tensor group trains its share of the model: the graph of its local widths.
        let tensor = check::tensor_parallel_for(plan, graph, ctx.tensor.take())?;
        let local = tensor.as_ref().map(|t| t.local().clone());
        let graph = local.as_ref().unwrap_or(graph);
        let exchange = check::exchange_for(plan, graph, given)?;
        let expert = check::expert_groups_for(plan, graph, ctx.expert.take())?;
        set_threads(plan.cpu_threads);
        let wgan = check::wgan_roles_if_any(graph)?;
        // Everything a run allocates lives inside this closure, so it is freed before the cache is emptied.
        let result = catch_unwind(AssertUnwindSafe(|| -> Result<RawMeasurements, BackendError> {
            let split = check::ModelSplit { tensor, expert };
            let mut session = step::Session::new(plan, graph, dev, wgan, exchange, source.is_none(), split)
                .map_err(|e| map_error(e, plan.batch_size))?;
            session.run(probe, source, eval)
        }));
        let result = match result {
            Ok(r) => r,
            Err(panic) => Err(BackendError::from_panic(panic.as_ref(), plan.batch_size, "libtorch call panicked")),
        };
        if let Device::Cuda(_) = dev {
            // Return cached blocks so that the next run (e.g. a smaller batch after an OOM) starts clean.
            let _ = shim::cuda_empty_cache();
        }
        let mut raw = result?;
        raw.device = Some(device::info(dev));
        raw.versions = device::versions(dev);
        Ok(raw)
    }
}

/// A pipeline-parallel run ([`crate::pipeline_run`]) over the pipeline the runner handed over, inside the same
/// panic guard as every run.
fn run_pipeline(
    plan: &RunPlan,
    graph: &Graph,
    dev: Device,
    ctx: &mut RunContext<'_>,
) -> Result<RawMeasurements, BackendError> {
    let refuse = |reason: &str| BackendError::Unsupported {
        backend: TCH.name,
        layer: graph.name.clone(),
        op: "pipeline_parallel".into(),
        reason: reason.to_string(),
    };
    if ctx.data.is_some() {
        return Err(refuse(
            "pipeline-parallel runs train on synthetic batches; a dataset (`[dataset]`) is not supported yet: remove \
             `[dataset]` to measure the layout on synthetic batches, or `topology.pipeline_parallel` to train on it",
        ));
    }
    if ctx.exchange.is_some() {
        return Err(refuse("a pipeline averages its gradients over its data-parallel group itself, not an exchange"));
    }
    let Some(groups) = ctx.pipeline.as_mut() else {
        return Err(refuse(
            "a pipeline runs in ranks started by `trainbench run` (through mpirun) or a launcher, one per stage; \
             this process has none",
        ));
    };
    // With tensor parallelism each stage's chunks are this rank's share of them (its tensor group's split).
    let tensor = check::tensor_parallel_for(plan, graph, ctx.tensor.take())?;
    set_threads(plan.cpu_threads);
    let probe = &mut *ctx.probe;
    let stages: &mut dyn Communicator = &mut *groups.stages;
    let data = groups.data.as_deref_mut().map(|d| -> &mut dyn Communicator { d });
    let result =
        catch_unwind(AssertUnwindSafe(|| crate::pipeline_run::run(plan, graph, dev, (stages, data), tensor, probe)));
    let mut raw = match result {
        Ok(r) => r?,
        Err(panic) => return Err(BackendError::from_panic(panic.as_ref(), plan.batch_size, "libtorch call panicked")),
    };
    raw.device = Some(device::info(dev));
    raw.versions = device::versions(dev);
    Ok(raw)
}
