//! The backend registry: where a spec runs ([`place`]: `auto` resolved, the device mapped to one the backend
//! drives, decided once when the spec is planned) and which implementation runs it ([`create`]). The only
//! place with `#[cfg(feature)]` for backends: a compiled-out backend is a stub whose runs return
//! [`BackendError::NotBuilt`] while its static [`Capabilities`](trainbench_workload::Capabilities) still
//! answer plan-time questions, so the CLI and the runner never need conditional compilation.

use serde::Serialize;
use trainbench_workload::mock::{MockBackend, MockConfig};
use trainbench_workload::{
    Backend, BackendError, BackendKind, DeviceFamily, DeviceInfo, DeviceSelector, Graph, RawMeasurements, RunContext,
    RunPlan, WgpuAdapter,
};

pub use crate::spec::wire::BackendChoice;

/// A backend left out of this build.
#[derive(Debug, Clone, Copy)]
pub struct NotBuilt {
    /// Which backend.
    pub kind: BackendKind,
}

impl NotBuilt {
    fn error(&self) -> BackendError {
        let caps = self.kind.capabilities();
        BackendError::NotBuilt { backend: caps.name, feature: caps.feature.unwrap_or(caps.name) }
    }
}

impl Backend for NotBuilt {
    fn kind(&self) -> BackendKind {
        self.kind
    }
    fn devices(&self) -> Vec<DeviceInfo> {
        Vec::new()
    }
    fn check(&self, _plan: &RunPlan, _graph: &Graph) -> Result<(), BackendError> {
        Err(self.error())
    }
    fn run_in(
        &mut self,
        _plan: &RunPlan,
        _graph: &Graph,
        _ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        Err(self.error())
    }
}

/// Whether a backend is compiled into this binary.
pub fn built(kind: BackendKind) -> bool {
    match kind {
        BackendKind::Tch => cfg!(feature = "tch"),
        BackendKind::Wgpu => cfg!(feature = "wgpu"),
        BackendKind::Mock => true,
    }
}

#[cfg(feature = "tch")]
fn tch() -> Box<dyn Backend> {
    Box::new(trainbench_tch::TchBackend::new())
}

#[cfg(not(feature = "tch"))]
fn tch() -> Box<dyn Backend> {
    Box::new(NotBuilt { kind: BackendKind::Tch })
}

#[cfg(feature = "wgpu")]
fn wgpu() -> Box<dyn Backend> {
    Box::new(trainbench_wgpu::WgpuBackend::new())
}

#[cfg(not(feature = "wgpu"))]
fn wgpu() -> Box<dyn Backend> {
    Box::new(NotBuilt { kind: BackendKind::Wgpu })
}

/// Where a spec's runs go: the backend (`auto` resolved) and a device that backend drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The backend that runs them.
    pub backend: BackendKind,
    /// The device they run on.
    pub device: DeviceSelector,
}

/// The backend `choice` stands for on `device`: an explicit choice is itself; `auto` is wgpu for a `wgpu...`
/// selector, else tch when built in, else wgpu when built in, else tch (whose stub then says how to rebuild).
pub fn resolve(choice: BackendChoice, device: DeviceSelector) -> BackendKind {
    match choice {
        BackendChoice::Tch => BackendKind::Tch,
        BackendChoice::Wgpu => BackendKind::Wgpu,
        BackendChoice::Mock => BackendKind::Mock,
        BackendChoice::Auto if device.family() == DeviceFamily::Wgpu => BackendKind::Wgpu,
        BackendChoice::Auto if built(BackendKind::Tch) => BackendKind::Tch,
        BackendChoice::Auto if built(BackendKind::Wgpu) => BackendKind::Wgpu,
        BackendChoice::Auto => BackendKind::Tch,
    }
}

/// Where `choice` runs a spec written for `device`: `device` itself when the backend drives that family, else
/// the backend's nearest default: `wgpu` (the best adapter) for a `cpu` or `cuda` selector on wgpu; `cuda` for
/// `wgpu:discrete` and `cpu` for any other `wgpu...` selector on tch. This is what lets
/// `trainbench run --backend wgpu` run a spec written for `device = "cpu"`.
pub fn place(choice: BackendChoice, device: DeviceSelector) -> Placement {
    let backend = resolve(choice, device);
    let device = match (backend, device) {
        (b, d) if b.capabilities().drives(d.family()) => d,
        (BackendKind::Tch, DeviceSelector::Wgpu(WgpuAdapter::Discrete)) => DeviceSelector::Cuda(None),
        (BackendKind::Tch, _) => DeviceSelector::Cpu,
        (_, _) => DeviceSelector::Wgpu(WgpuAdapter::Default),
    };
    Placement { backend, device }
}

/// What `backend` refuses of `plans` without touching a device ([`Backend::supports`]: its declared
/// capabilities, then what its lowering knows), each distinct refusal once, in plan order. A backend left out
/// of this build answers from its declared capabilities alone (running it then says how to rebuild).
pub fn refusals(backend: BackendKind, plans: &[RunPlan], graph: &Graph) -> Vec<BackendError> {
    let mut out: Vec<BackendError> = Vec::new();
    let instance = create(backend, &MockConfig::default());
    for plan in plans {
        match instance.supports(plan, graph) {
            Err(e) if !out.contains(&e) => out.push(e),
            _ => {}
        }
    }
    out
}

/// What stops `plans` from starting on this machine beyond what the backend refuses in `supports`: the engine
/// a data-parallel group needs (NCCL for CUDA ranks of tch) missing from this build or this host. Asked by
/// `plan` and `run`, not by `validate` (a spec stays valid where it cannot run). Each reason once.
pub fn launch_refusals(backend: BackendKind, plans: &[RunPlan]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for plan in plans {
        if let Some(why) = engine_refusal(backend, plan)
            && !out.contains(&why)
        {
            out.push(why);
        }
    }
    out
}

#[cfg(feature = "tch")]
fn engine_refusal(backend: BackendKind, plan: &RunPlan) -> Option<String> {
    (backend == BackendKind::Tch).then(|| trainbench_tch::check::engine_refusal(plan)).flatten()
}

/// Without the tch backend, its runs are refused as not built (by `supports`); the others need no engine here.
#[cfg(not(feature = "tch"))]
fn engine_refusal(_backend: BackendKind, _plan: &RunPlan) -> Option<String> {
    None
}

/// The error a backend left out of this build gives; `None` when it is built in.
pub fn not_built(kind: BackendKind) -> Option<BackendError> {
    (!built(kind)).then(|| NotBuilt { kind }.error())
}

/// Instantiate a backend; `mock` uses the given settings.
pub fn create(kind: BackendKind, mock: &MockConfig) -> Box<dyn Backend> {
    match kind {
        BackendKind::Tch => tch(),
        BackendKind::Wgpu => wgpu(),
        BackendKind::Mock => Box::new(MockBackend::new(mock.clone())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn placed(choice: BackendChoice, device: &str) -> (BackendKind, String) {
        let p = place(choice, device.parse().unwrap());
        (p.backend, p.device.to_string())
    }

    #[test]
    fn devices_follow_the_backend() {
        assert_eq!(placed(BackendChoice::Auto, "wgpu:1"), (BackendKind::Wgpu, "wgpu:1".into()));
        assert_eq!(placed(BackendChoice::Wgpu, "cpu"), (BackendKind::Wgpu, "wgpu".into()));
        assert_eq!(placed(BackendChoice::Wgpu, "wgpu:cpu"), (BackendKind::Wgpu, "wgpu:cpu".into()));
        assert_eq!(placed(BackendChoice::Tch, "wgpu:discrete"), (BackendKind::Tch, "cuda".into()));
        assert_eq!(placed(BackendChoice::Tch, "wgpu"), (BackendKind::Tch, "cpu".into()));
        assert_eq!(placed(BackendChoice::Tch, "cuda:1"), (BackendKind::Tch, "cuda:1".into()));
        assert_eq!(placed(BackendChoice::Mock, "cpu"), (BackendKind::Mock, "cpu".into()));
        assert_eq!(placed(BackendChoice::Mock, "wgpu:0"), (BackendKind::Mock, "wgpu:0".into()));
    }

    #[test]
    fn a_backend_left_out_still_refuses_from_its_declaration() {
        let graph = trainbench_workload::zoo::build(
            &serde_json::from_value(serde_json::json!({"family": "mlp", "inputs": 8, "hidden": [8], "classes": 2}))
                .unwrap(),
        )
        .unwrap();
        let plan = RunPlan {
            precision: trainbench_workload::Precision::Bf16,
            device: "wgpu".parse().unwrap(),
            ..RunPlan::for_tests("x", 1)
        };
        let refused = refusals(BackendKind::Wgpu, &[plan.clone(), plan], &graph);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].to_string().contains("bf16"), "{}", refused[0]);
    }
}
