//! Process warm-up: one throw-away run before the first measured run on each backend and device of a process,
//! so one-time costs never land in a measurement.
//!
//! Some costs are paid once per process, not once per run: libtorch starts its OpenMP/intra-op thread pools and
//! initialises oneDNN lazily, a wgpu runtime compiles its kernels (why: docs/decisions/0008-process-warm-up.md).
//! A backend says how many iterations pay those costs ([`Backend::process_warmup_iterations`]); the runner
//! trains them once per (backend, device) and discards them. Nothing of the throw-away run reaches a result.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use trainbench_contract::{Backend, Budget, DeviceSelector, Probe, RunPlan};
use trainbench_graph::Graph;

use super::probe::StopFlag;

/// (backend name, device selector) pairs already warmed up in this process.
static WARMED: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());

/// Stops the throw-away run on Ctrl-C.
struct StopOnly(StopFlag);

impl Probe for StopOnly {
    fn should_stop(&self) -> bool {
        self.0.is_set()
    }
}

/// Whether `(backend, device)` still needs its process warm-up; marks it as done.
fn first_use(backend: &str, device: DeviceSelector) -> bool {
    WARMED.lock().unwrap_or_else(PoisonError::into_inner).insert((backend.to_string(), device.to_string()))
}

/// The plan of the throw-away run: `plan` itself, `iterations` measured steps, no warm-up, no phase timing.
fn warmup_plan(plan: &RunPlan, iterations: u64) -> RunPlan {
    RunPlan {
        id: format!("{}.process-warmup", plan.id),
        warmup: 0,
        budget: Budget::Iterations(iterations),
        phase_timing: false,
        // One rank on its own share of the batch: the throw-away run exchanges nothing (the other ranks and
        // the servers warm up the same way, each in its own process).
        batch_size: (plan.batch_size / plan.topology.world_size().max(1)).max(1),
        topology: Default::default(),
        ..plan.clone()
    }
}

/// Train the throw-away run when `plan` is the first on its backend and device in this process. Its outcome
/// is ignored: an error here (out of memory, say) recurs, and is recorded, in the measured run.
pub fn warm_up_process(backend: &mut dyn Backend, plan: &RunPlan, graph: &Graph, stop: &StopFlag) {
    let iterations = backend.process_warmup_iterations();
    if iterations == 0 || stop.is_set() || !first_use(backend.name(), plan.device) {
        return;
    }
    let _ = backend.run(&warmup_plan(plan, iterations), graph, &mut StopOnly(stop.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_and_device_warms_up_once() {
        assert!(first_use("test-backend", DeviceSelector::Cpu));
        assert!(!first_use("test-backend", DeviceSelector::Cpu));
        assert!(first_use("test-backend", DeviceSelector::Cuda(Some(0))));
        assert!(first_use("other-backend", DeviceSelector::Cpu));
    }
}
