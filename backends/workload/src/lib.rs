//! trainbench's backend contract: the workload graph, the model zoo that builds it, its static analysis,
//! and the [`Backend`] trait every training backend implements; the identity of devices and backends, decided
//! once here: the one device-selector parser ([`DeviceSelector`]), each backend's static [`Capabilities`] and
//! the host CPU's features ([`CpuFeatures`]). With feature `testing`, the conformance kit every backend's tests
//! run and `RunPlan::for_tests`.
//!
//! Both the CLI crate and the backend crates depend on this crate, and on nothing of each other.

pub mod analysis;
pub mod backend;
pub mod builder;
pub mod calibrate;
pub mod capability;
pub mod comm;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod cpu;
pub mod data;
pub mod device;
pub mod engines;
pub mod graph;
pub mod init;
pub mod lowering;
pub mod mock;
mod mock_prior;
pub mod model;
pub mod numerics;
pub mod params;
pub mod stats;
pub mod steady_loop;
pub mod steplog;
pub mod target;
pub mod zoo;

pub use backend::{
    Backend, BackendError, Budget, DeviceInfo, FreeRunning, MemoryMeasured, NoProbe, OptimizerSpec, PhaseTimes,
    Precision, Probe, RawMeasurements, RunContext, RunPlan,
};
pub use builder::{ConvCfg, GraphBuilder, ShapeError};
pub use capability::{BackendKind, Capabilities};
pub use cpu::{CpuFeatures, CpuIsa};
pub use device::{DeviceFamily, DeviceSelector, WgpuAdapter};
pub use graph::{Graph, Node, NodeId, Op, Shape};
pub use model::ModelSpec;
pub use numerics::{Numerics, Tf32};
