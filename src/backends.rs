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
/// Whether the wgpu backend is compiled in.
pub const WGPU_BUILT: bool = cfg!(feature = "wgpu");

#[cfg(feature = "tch")]
fn tch() -> Box<dyn Backend> {
    Box::new(trainbench_tch::TchBackend::new())
}

#[cfg(not(feature = "tch"))]
fn tch() -> Box<dyn Backend> {
    Box::new(NotBuilt { backend: "tch", feature: "tch" })
}

#[cfg(feature = "wgpu")]
fn wgpu() -> Box<dyn Backend> {
    Box::new(trainbench_wgpu::WgpuBackend::new())
}

#[cfg(not(feature = "wgpu"))]
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

/// The concrete backend that runs on `device`: `auto` picks wgpu for a `wgpu...` selector (as spec validation
/// does), else [`resolve`].
pub fn resolve_for(choice: BackendChoice, device: &str) -> BackendChoice {
    match choice {
        BackendChoice::Auto if is_wgpu_selector(device) => BackendChoice::Wgpu,
        other => resolve(other),
    }
}

fn is_wgpu_selector(device: &str) -> bool {
    device == "wgpu" || device.starts_with("wgpu:")
}

/// The device `choice` (resolved) runs a plan written for `device` on: `device` itself when the backend drives
/// that kind of device, else the backend's nearest default: `wgpu` (the best adapter) for a `cpu` or `cuda`
/// selector; `cuda` for `wgpu:discrete` and `cpu` for any other `wgpu...` selector on tch. This is what lets
/// `trainbench run --backend wgpu` run a spec written for `device = "cpu"`.
pub fn device_for(choice: BackendChoice, device: &str) -> String {
    match (resolve_for(choice, device), is_wgpu_selector(device)) {
        (BackendChoice::Wgpu, false) => "wgpu".into(),
        (BackendChoice::Tch, true) if device == "wgpu:discrete" => "cuda".into(),
        (BackendChoice::Tch, true) => "cpu".into(),
        _ => device.to_string(),
    }
}

/// What `choice` refuses of `plans` without touching a device ([`Backend::supports`]: layers, losses,
/// precisions), each distinct refusal once, in plan order. Each plan runs on
/// [`device_for`]`(choice, plan.device)`. A backend left out of this build refuses nothing here (running it
/// then says how to rebuild).
pub fn refusals(choice: BackendChoice, plans: &[RunPlan], graph: &Graph) -> Vec<BackendError> {
    let mut out: Vec<BackendError> = Vec::new();
    let Some(first) = plans.first() else {
        return out;
    };
    let backend = create(resolve_for(choice, &first.device), &MockConfig::default());
    for plan in plans {
        let mut plan = plan.clone();
        plan.device = device_for(choice, &plan.device);
        match backend.supports(&plan, graph) {
            Err(e) if !out.contains(&e) => out.push(e),
            _ => {}
        }
    }
    out
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

/// The error a backend left out of this build gives (after resolving `auto`); `None` when it is built in.
pub fn not_built(choice: BackendChoice) -> Option<BackendError> {
    match resolve(choice) {
        BackendChoice::Tch | BackendChoice::Auto if !TCH_BUILT => {
            Some(NotBuilt { backend: "tch", feature: "tch" }.error())
        }
        BackendChoice::Wgpu if !WGPU_BUILT => Some(NotBuilt { backend: "wgpu", feature: "wgpu" }.error()),
        _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_follow_the_backend() {
        assert_eq!(resolve_for(BackendChoice::Auto, "wgpu:1"), BackendChoice::Wgpu);
        assert_eq!(device_for(BackendChoice::Wgpu, "cpu"), "wgpu");
        assert_eq!(device_for(BackendChoice::Wgpu, "wgpu:cpu"), "wgpu:cpu");
        assert_eq!(device_for(BackendChoice::Auto, "wgpu:0"), "wgpu:0");
        assert_eq!(device_for(BackendChoice::Tch, "wgpu:discrete"), "cuda");
        assert_eq!(device_for(BackendChoice::Tch, "wgpu"), "cpu");
        assert_eq!(device_for(BackendChoice::Tch, "cuda:1"), "cuda:1");
        assert_eq!(device_for(BackendChoice::Mock, "cpu"), "cpu");
    }
}
