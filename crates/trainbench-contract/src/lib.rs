//! trainbench's backend contract: the [`Backend`] trait every training backend implements, what a run asks of
//! it ([`RunPlan`]) and gets back ([`RawMeasurements`], recorded through the [`steplog`]), each backend's static
//! [`Capabilities`] with the plan-time refusals of `lowering/`, and the identity of devices and CPUs
//! ([`DeviceSelector`], [`CpuFeatures`]). With feature `testing`, the conformance kit every backend's tests run.
//!
//! Built on the graph (`trainbench-graph`), data (`trainbench-data`) and communication (`trainbench-comm`)
//! crates. The front crate and the backend crates depend on this one, and on nothing of each other.

pub mod auc;
pub mod backend;
pub mod backend_kind;
pub mod batch;
pub mod calibrate;
pub mod capability;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod cpu;
pub mod device;
pub mod error;
pub mod linked;
pub mod lowering;
pub mod measured;
pub mod mock;
mod mock_prior;
pub mod numerics;
pub mod phases;
pub mod plan;
pub mod routing;
pub mod stats;
pub mod steady_loop;
pub mod steplog;
pub mod target;

pub use backend::{Backend, NoProbe, PipelineGroups, Probe, RunContext};
pub use backend_kind::BackendKind;
pub use capability::Capabilities;
pub use cpu::{CpuFeatures, CpuIsa};
pub use device::{DeviceFamily, DeviceSelector, WgpuAdapter};
pub use error::BackendError;
pub use measured::{
    DeviceInfo, ExpertTraffic, FreeRunning, GradientSquares, MemoryMeasured, PipelineMeasured, RawMeasurements,
    TensorTraffic,
};
pub use numerics::{Numerics, Tf32};
pub use phases::PhaseTimes;
pub use plan::{Budget, RunPlan};
pub use routing::{LayerRouting, RoutingTally};
