//! The backend registry: where a spec runs ([`place`]: `auto` resolved, the device mapped to one the backend
//! drives, decided once when the spec is planned), what its backend refuses before anything runs
//! ([`refusals`], from the static [`Capabilities`](trainbench_contract::Capabilities) and lowering rules, so it
//! needs no engine) and which implementation runs it ([`create`], from the [`Linked`] table the process
//! installed at start). The library links no backend: the `trainbench-engine` binary installs what its build
//! links ([`install`]); the `trainbench` front binary installs nothing and hands the commands that train over
//! to it ([`crate::cli`]). Whether a backend is in *this build* is [`built`] (cargo features, the same for both
//! binaries); whether *this process* can run it is the table.

use std::sync::OnceLock;

use serde::Serialize;
use trainbench_contract::linked::Linked;
use trainbench_contract::mock::{MockBackend, MockConfig};
use trainbench_contract::{
    Backend, BackendError, BackendKind, CpuFeatures, DeviceFamily, DeviceInfo, DeviceSelector, RawMeasurements,
    RunContext, RunPlan, WgpuAdapter,
};
use trainbench_graph::Graph;

static INSTALLED: OnceLock<Linked> = OnceLock::new();

/// Make `engines` this process's engines (the engine binary's `main`, tests that train in their own process).
/// The first call wins; later ones are ignored, so every test may call it.
pub fn install(engines: Linked) {
    let _ = INSTALLED.get_or_init(|| engines);
}

/// The engines this process can use: empty unless [`install`] was called.
pub fn linked() -> Linked {
    INSTALLED.get().copied().unwrap_or_default()
}

/// Whether this process trains (its engines are installed), as opposed to the front binary.
pub fn installed() -> bool {
    INSTALLED.get().is_some()
}

/// A plan-time question only a process that links the engines can answer (whether this host can start NCCL
/// ranks): the front binary hands the command over to `trainbench-engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this question needs the training engine (trainbench-engine)")]
pub struct NeedsEngine;

pub use crate::spec::wire::BackendChoice;

/// A backend this process cannot run, refusing every run with why: left out of this build
/// ([`Unavailable::not_built`]), or in this build but linked only into `trainbench-engine` (this is the front
/// binary; running it here is a bug in the hand-over, said plainly rather than a crash).
#[derive(Debug, Clone)]
pub struct Unavailable {
    kind: BackendKind,
    why: BackendError,
}

impl Unavailable {
    /// The stub of a backend left out of this build: its runs say which feature to rebuild with.
    pub fn not_built(kind: BackendKind) -> Self {
        let caps = kind.capabilities();
        Unavailable {
            kind,
            why: BackendError::NotBuilt { backend: caps.name, feature: caps.feature.unwrap_or(caps.name) },
        }
    }

    /// The stub of a backend this build has but this process does not link.
    fn unlinked(kind: BackendKind) -> Self {
        let why = BackendError::Framework(format!(
            "the {} backend runs in the `trainbench-engine` process, and this process is not one; run it through \
             `trainbench run` (or install the engines first when embedding the library: `backend_registry::install`)",
            kind.name()
        ));
        Unavailable { kind, why }
    }
}

impl Backend for Unavailable {
    fn kind(&self) -> BackendKind {
        self.kind
    }
    fn devices(&self) -> Vec<DeviceInfo> {
        Vec::new()
    }
    fn check(&self, _plan: &RunPlan, _graph: &Graph) -> Result<(), BackendError> {
        Err(self.why.clone())
    }
    fn run_in(
        &mut self,
        _plan: &RunPlan,
        _graph: &Graph,
        _ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        Err(self.why.clone())
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
    let caps = backend.capabilities();
    for plan in plans {
        match caps.refusal(plan, graph, CpuFeatures::host()) {
            Some(e) if !out.contains(&e) => out.push(e),
            _ => {}
        }
    }
    out
}

/// What stops `plans` from starting on this machine beyond what the backend refuses in `supports`: the engine
/// a data-parallel group needs (NCCL for CUDA ranks of tch) missing from this build or this host. Asked by
/// `plan` and `run`, not by `validate` (a spec stays valid where it cannot run). Each reason once.
/// [`NeedsEngine`] when only the engine process can tell (the front binary asked about CUDA ranks).
pub fn launch_refusals(backend: BackendKind, plans: &[RunPlan]) -> Result<Vec<String>, NeedsEngine> {
    let mut out: Vec<String> = Vec::new();
    for plan in plans {
        if let Some(why) = engine_refusal(backend, plan)?
            && !out.contains(&why)
        {
            out.push(why);
        }
    }
    Ok(out)
}

/// CUDA ranks of tch exchange through NCCL, which this host may not run. Without the tch backend in this build
/// its runs are refused as not built when they start; the other backends need no engine here.
fn engine_refusal(backend: BackendKind, plan: &RunPlan) -> Result<Option<String>, NeedsEngine> {
    let cuda_ranks = backend == BackendKind::Tch
        && !plan.topology.strategy.is_single()
        && matches!(plan.device, DeviceSelector::Cuda(_));
    if !cuda_ranks || !built(BackendKind::Tch) {
        return Ok(None);
    }
    let nccl = linked().nccl.ok_or(NeedsEngine)?;
    Ok((nccl.refusal)().map(|why| {
        format!(
            "`{}` with world size {} on CUDA trains through the NCCL engine: {why}",
            plan.topology.strategy.name(),
            plan.topology.world_size()
        )
    }))
}

/// The error a backend left out of this build gives; `None` when it is built in.
pub fn not_built(kind: BackendKind) -> Option<BackendError> {
    (!built(kind)).then(|| Unavailable::not_built(kind).why)
}

/// Instantiate a backend; `mock` uses the given settings. A backend left out of this build, or one this process
/// does not link (the front binary), is an [`Unavailable`] stub that refuses to run, saying why.
pub fn create(kind: BackendKind, mock: &MockConfig) -> Box<dyn Backend> {
    let linked = match kind {
        BackendKind::Tch => linked().tch,
        BackendKind::Wgpu => linked().wgpu,
        BackendKind::Mock => return Box::new(MockBackend::new(mock.clone())),
    };
    match linked {
        Some(make) => make(),
        None if built(kind) => Box::new(Unavailable::unlinked(kind)),
        None => Box::new(Unavailable::not_built(kind)),
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
        let graph = trainbench_graph::zoo::build(
            &serde_json::from_value(serde_json::json!({"family": "mlp", "inputs": 8, "hidden": [8], "classes": 2}))
                .unwrap(),
        )
        .unwrap();
        let plan = RunPlan {
            precision: trainbench_graph::Precision::Bf16,
            device: "wgpu".parse().unwrap(),
            ..RunPlan::for_tests("x", 1)
        };
        let refused = refusals(BackendKind::Wgpu, &[plan.clone(), plan], &graph);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].to_string().contains("bf16"), "{}", refused[0]);
    }
}
