//! The backend registry: maps a backend choice to an implementation. The only place with `#[cfg(feature)]`
//! for backends: a compiled-out backend is a stub whose every call returns [`BackendError::NotBuilt`], so the
//! CLI and the runner never need conditional compilation.

use trainbench_workload::mock::{MockBackend, MockConfig};
use trainbench_workload::{Backend, BackendError, DeviceInfo, Graph, Probe, RawMeasurements, RunPlan};

pub use crate::spec::wire::BackendChoice;

/// A backend left out of this build.
#[derive(Debug, Clone, Copy)]
pub struct NotBuilt {
    /// Backend name.
    pub backend: &'static str,
    /// Cargo feature that enables it.
    pub feature: &'static str,
}

impl NotBuilt {
    fn error(&self) -> BackendError {
        BackendError::NotBuilt { backend: self.backend, feature: self.feature }
    }
}

impl Backend for NotBuilt {
    fn name(&self) -> &'static str {
        self.backend
    }
    fn devices(&self) -> Vec<DeviceInfo> {
        Vec::new()
    }
    fn check(&self, _plan: &RunPlan, _graph: &Graph) -> Result<(), BackendError> {
        Err(self.error())
    }
    fn run(
        &mut self,
        _plan: &RunPlan,
        _graph: &Graph,
        _probe: &mut dyn Probe,
    ) -> Result<RawMeasurements, BackendError> {
        Err(self.error())
    }
}

/// Whether the tch backend is compiled in.
pub const TCH_BUILT: bool = cfg!(feature = "tch");
/// Whether the wgpu backend is compiled in (not yet wired into this build).
pub const WGPU_BUILT: bool = false;

#[cfg(feature = "tch")]
fn tch() -> Box<dyn Backend> {
    Box::new(trainbench_tch::TchBackend::new())
}

#[cfg(not(feature = "tch"))]
fn tch() -> Box<dyn Backend> {
    Box::new(NotBuilt { backend: "tch", feature: "tch" })
}

fn wgpu() -> Box<dyn Backend> {
    Box::new(NotBuilt { backend: "wgpu", feature: "wgpu" })
}

/// The concrete backend `auto` resolves to: tch when built in, else wgpu when built in, else tch (whose stub
/// then explains how to rebuild).
pub fn resolve(choice: BackendChoice) -> BackendChoice {
    match choice {
        BackendChoice::Auto if TCH_BUILT => BackendChoice::Tch,
        BackendChoice::Auto if WGPU_BUILT => BackendChoice::Wgpu,
        BackendChoice::Auto => BackendChoice::Tch,
        other => other,
    }
}

/// Name of a backend choice as written in specs and on the command line.
pub fn name(choice: BackendChoice) -> &'static str {
    match choice {
        BackendChoice::Auto => "auto",
        BackendChoice::Tch => "tch",
        BackendChoice::Wgpu => "wgpu",
        BackendChoice::Mock => "mock",
    }
}

/// Instantiate a backend (after resolving `auto`); `mock` uses the given settings.
pub fn create(choice: BackendChoice, mock: &MockConfig) -> Box<dyn Backend> {
    match resolve(choice) {
        BackendChoice::Tch | BackendChoice::Auto => tch(),
        BackendChoice::Wgpu => wgpu(),
        BackendChoice::Mock => Box::new(MockBackend::new(mock.clone())),
    }
}
