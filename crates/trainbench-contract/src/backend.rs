//! The backend boundary: the [`Backend`] trait, what it is handed for one run ([`RunContext`]) and who observes
//! the run ([`Probe`]). What a run asks ([`RunPlan`]) and gets back ([`RawMeasurements`]) sit below, in `plan.rs`,
//! `measured.rs`, `phases.rs` and `error.rs`, re-exported here.

use trainbench_comm::{Communicator, GradientExchange};
use trainbench_data::{BatchSource, EvalSet};
use trainbench_graph::graph::Graph;

use crate::backend_kind::BackendKind;
pub use crate::error::BackendError;
pub use crate::measured::{DeviceInfo, FreeRunning, MemoryMeasured, PipelineMeasured, RawMeasurements, weights_digest};
pub use crate::phases::PhaseTimes;
pub use crate::plan::{Budget, RunPlan};
pub use crate::target::{TargetOutcome, TargetPlan};

/// Observes a run as it goes (progress bars, samplers); every method has a no-op default.
pub trait Probe {
    /// Called after each iteration (warm-up included; `measured` tells which).
    fn step(&mut self, _index: u64, _measured: bool, _phases: &PhaseTimes) {}
    /// Polled between iterations; returning true stops the run early, keeping what was measured.
    fn should_stop(&self) -> bool {
        false
    }
}

/// A probe that observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProbe;
impl Probe for NoProbe {}

/// What a backend is handed for one run besides its plan and graph. Each concern the runner supplies (where
/// iterations are reported; later stages add where batches come from and how gradients are exchanged) is one
/// field, so adding one does not change the [`Backend`] signature.
pub struct RunContext<'a> {
    /// Receives every iteration and says when to stop.
    pub probe: &'a mut dyn Probe,
    /// Where training batches come from: `None` means synthetic data the backend generates itself
    /// (`init::synthetic_input`); `Some` is a dataset read on the host, whose batches the backend copies to its
    /// device, timing the wait for each batch and the copy separately.
    pub data: Option<&'a mut dyn BatchSource>,
    /// The data-parallel exchange this worker calls after each backward pass (`None`: a single worker). It
    /// also says which slice of the global batch this worker trains on ([`GradientExchange::worker`]).
    pub exchange: Option<&'a mut dyn GradientExchange>,
    /// The evaluation split of a run with a target ([`RunPlan::target`]): every batch is evaluated (forward
    /// only) at each evaluation; `None` when the plan has no target.
    pub eval: Option<&'a EvalSet>,
    /// A mesh run with `tensor_parallel` > 1: the communicator of this rank's tensor group (its ranks in tensor
    /// order), which the backend takes; `None` otherwise. The exchange then runs along the data-parallel group.
    pub tensor: Option<Box<dyn Communicator>>,
    /// A pipeline-parallel run's groups (the plan's mesh has `pipeline_parallel` > 1); `None` otherwise.
    pub pipeline: Option<PipelineGroups<'a>>,
    /// An expert-parallel run's groups (`RunPlan`'s `topology.mesh.expert_parallel` above 1), split from the
    /// world by the runner before the exchange took it; the backend takes them. `None` otherwise.
    pub expert: Option<trainbench_comm::ExpertGroups>,
}

/// The groups a pipeline rank talks over.
pub struct PipelineGroups<'a> {
    /// The ranks of this rank's model replica, rank `s` running stage `s`, between which activations and their
    /// gradients are sent point to point.
    pub stages: &'a mut dyn Communicator,
    /// The ranks holding the same stage in the other replicas, over which its gradients are averaged (the
    /// data-parallel dimension); `None` with one replica.
    pub data: Option<&'a mut dyn Communicator>,
}

impl<'a> RunContext<'a> {
    /// A context that only reports to `probe`: synthetic data, a single rank.
    pub fn new(probe: &'a mut dyn Probe) -> Self {
        RunContext { probe, data: None, exchange: None, eval: None, pipeline: None, tensor: None, expert: None }
    }

    /// The next training batch from [`RunContext::data`] and the seconds spent waiting for it (the stall);
    /// `None` with synthetic data. A [`DataError`](trainbench_data::DataError) becomes [`BackendError::Data`],
    /// naming the file.
    pub fn next_batch(&mut self) -> Option<Result<(trainbench_data::HostBatch, f64), BackendError>> {
        Some(crate::batch::fetch(self.data.as_deref_mut()?))
    }
}

/// A training backend: lowers a workload graph and trains it, measuring as it goes.
pub trait Backend {
    /// Which backend this is; its static [`crate::Capabilities`] follow from it.
    fn kind(&self) -> BackendKind;
    /// Short name (`tch`, `wgpu`, `mock`).
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// Devices this backend can run on here.
    fn devices(&self) -> Vec<DeviceInfo>;
    /// Refuse, before anything runs, a plan this backend cannot execute (unsupported layer or precision) or a
    /// device it cannot open here.
    fn check(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError>;
    /// Iterations of a throw-away run the runner trains before the first measured run on each device in a
    /// process, to pay one-time costs (thread pools, lazy library initialisation, kernel compilation) outside
    /// every measurement; 0 (the default) when the backend has none.
    fn process_warmup_iterations(&self) -> u64 {
        0
    }
    /// Refuse, from the plan and graph alone, what this backend cannot run on this host: what its static
    /// [`crate::Capabilities`] declare (device family, precision, layers it never runs, layers whose CPU
    /// feature this host lacks, then what its lowering refuses: [`crate::lowering`]). No device is opened and
    /// no engine is needed, so specs are checked with it when they are validated and planned. Topologies
    /// (world size) are left to `check`, since one sweep may mix runnable and unrunnable ones.
    fn supports(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        match self.kind().capabilities().refusal(plan, graph, crate::cpu::CpuFeatures::host()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    /// Train `graph` as `plan` says with what `ctx` supplies, reporting each iteration to `ctx.probe`.
    fn run_in(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError>;
    /// Measure the device for the performance model (`trainbench calibrate`): matrix products and convolutions
    /// per precision, a memory triad, the fixed cost of one operation and, on an accelerator, the host-to-device
    /// copy. The default refuses: a backend that cannot time its own kernels says so.
    fn calibrate(
        &mut self,
        request: &crate::calibrate::CalibrationRequest,
    ) -> Result<crate::calibrate::Measurement, BackendError> {
        Err(BackendError::Framework(format!(
            "the {} backend cannot calibrate `{}`: it has no kernel timing; calibrate with the tch backend",
            self.name(),
            request.device
        )))
    }
    /// Train `graph` as `plan` says on its own (synthetic data, one rank), reporting each iteration to `probe`.
    fn run(&mut self, plan: &RunPlan, graph: &Graph, probe: &mut dyn Probe) -> Result<RawMeasurements, BackendError> {
        self.run_in(plan, graph, &mut RunContext::new(probe))
    }
}
