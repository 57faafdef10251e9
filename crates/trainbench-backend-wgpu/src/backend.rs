//! The wgpu backend as the contract sees it: [`WgpuBackend`] and its [`Backend`] implementation, the library
//! versions it records, and what it refuses before anything runs ([`check`]: precisions, layers and losses it
//! cannot execute, from its declared capabilities and lowering, [`trainbench_contract::lowering::wgpu`], asked
//! when a spec is validated and planned; and data parallelism, asked before each run).

use std::panic::{AssertUnwindSafe, catch_unwind};

use trainbench_contract::capability::WGPU;
use trainbench_contract::{
    Backend, BackendError, BackendKind, DeviceInfo, DeviceSelector, RawMeasurements, RunContext, RunPlan,
};
use trainbench_graph::Graph;

use crate::adapters::{self, Adapter, adapters};
use crate::error::TrainError;
use crate::{params, step};

/// burn, as pinned in this crate's manifest.
pub const BURN_VERSION: &str = "0.22.1";
/// wgpu, the version burn 0.22.1 brings (re-exported as `burn::tensor::wgpu::wgpu`).
pub const WGPU_VERSION: &str = "30.0.2";
/// cubecl, burn's kernel compiler and runtime.
pub const CUBECL_VERSION: &str = "0.11.3";

/// The wgpu backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct WgpuBackend;

impl WgpuBackend {
    /// A backend handle; adapters are discovered on first use.
    pub fn new() -> Self {
        Self
    }

    /// Parameter elements the backend allocates for `graph` (trained tensors only), on the adapter `selector`
    /// names; equal to the contract's count by construction, checked by the tests.
    pub fn parameter_count(&self, graph: &Graph, selector: DeviceSelector) -> Result<u64, BackendError> {
        let adapter = adapters::select(selector)?;
        let device = adapters::open(adapter, selector)?;
        guarded(0, || Ok(params::Store::new(graph, 0, &device).parameter_count()))
    }
}

/// Run `f`, turning a panic inside burn or the wgpu runtime into a [`BackendError`] (out-of-memory when the
/// message says so).
fn guarded<T>(batch_size: usize, f: impl FnOnce() -> Result<T, BackendError>) -> Result<T, BackendError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(BackendError::from_panic(payload.as_ref(), batch_size, "burn/wgpu failed")),
    }
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        adapters().iter().map(Adapter::device_info).collect()
    }

    fn check(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        check(plan, graph)?;
        adapters::select(plan.device).map(|_| ())
    }

    /// The wgpu runtime opens the adapter and cubecl compiles and caches its kernels on first use.
    fn process_warmup_iterations(&self) -> u64 {
        3
    }

    fn run_in(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        check(plan, graph)?;
        let adapter = adapters::select(plan.device)?;
        let device = adapters::open(adapter, plan.device)?;
        let mut out = guarded(plan.batch_size, || {
            step::train(plan, graph, &device, ctx).map_err(|e| match e {
                TrainError::Backend(b) => b,
                other => BackendError::Framework(other.to_string()),
            })
        })?;
        let info = adapter.device_info();
        out.versions.insert("burn".into(), BURN_VERSION.into());
        out.versions.insert("wgpu".into(), WGPU_VERSION.into());
        out.versions.insert("cubecl".into(), CUBECL_VERSION.into());
        out.versions.insert("graphics_api".into(), adapters::api_name(adapter.info.backend).into());
        let driver = format!("{} {}", adapter.info.driver, adapter.info.driver_info).trim().to_string();
        out.versions.insert("adapter_driver".into(), driver);
        out.device = Some(info);
        Ok(out)
    }
}

/// Refuse a plan the backend cannot execute, naming the layer (or the precision) and why: a world size above
/// one, then [`Backend::supports`] (declared capabilities, then the lowering's refusals).
pub fn check(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    WGPU.check_world_size(plan, graph)?;
    WgpuBackend::new().supports(plan, graph)
}
