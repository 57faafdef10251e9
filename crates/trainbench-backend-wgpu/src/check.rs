//! What the wgpu backend refuses before anything runs: precisions, layers and losses it cannot execute (its
//! declared capabilities and lowering, [`trainbench_contract::lowering::wgpu`], asked when a spec is validated and
//! planned), and data parallelism (asked before each run).

use trainbench_contract::capability::WGPU;
use trainbench_contract::{Backend, BackendError, RunPlan};
use trainbench_graph::Graph;

use crate::WgpuBackend;

/// Refuse a plan the backend cannot execute, naming the layer (or the precision) and why: a world size above
/// one, then [`Backend::supports`] (declared capabilities, then the lowering's refusals).
pub fn check(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    WGPU.check_world_size(plan, graph)?;
    WgpuBackend::new().supports(plan, graph)
}
