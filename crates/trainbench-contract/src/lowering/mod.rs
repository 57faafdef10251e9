//! What each backend's lowering refuses beyond its declared [`Capabilities`](crate::Capabilities): layers whose
//! shapes or wiring it cannot lower, named with the reason. Decided from the plan and the graph alone, so a
//! process that links no backend (the `trainbench` front binary: `validate`, `plan`) answers exactly what the
//! backend's own [`Backend::supports`](crate::Backend::supports) answers in a training process. Each declaration
//! points at its function here ([`Capabilities::lowering`](crate::Capabilities::lowering)).

use crate::backend_kind::BackendKind;
use crate::error::BackendError;
use crate::plan::RunPlan;
use trainbench_graph::graph::Graph;

pub mod pipeline;
pub mod tch;
pub mod wgpu;

/// The mock backend computes nothing, so it only needs a batch to simulate.
pub fn mock(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    if plan.batch_size == 0 {
        return Err(BackendError::Unsupported {
            backend: BackendKind::Mock.name(),
            layer: graph.name.clone(),
            op: "batch".into(),
            reason: "the mock backend needs a batch size of at least 1".into(),
        });
    }
    Ok(())
}
