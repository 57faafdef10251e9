//! A backend's two checks at the data boundary: fetching the next batch of a source, timing the stall
//! ([`fetch`]), and checking a batch against the model's inputs ([`check_batch`]), both failing as
//! [`BackendError::Data`].

use crate::error::BackendError;
use trainbench_data::{BatchSource, HostBatch};
use trainbench_graph::graph::{Graph, InputKind, Op};
use trainbench_graph::init::HostTensor;

/// The next batch of `source` and the seconds spent waiting for it (the stall); a [`DataError`] becomes
/// [`BackendError::Data`], naming the file.
pub fn fetch(source: &mut dyn BatchSource) -> Result<(HostBatch, f64), BackendError> {
    let t = std::time::Instant::now();
    match source.next_batch() {
        Ok(b) => Ok((b, t.elapsed().as_secs_f64())),
        Err(e) => Err(BackendError::Data(e.to_string())),
    }
}

/// The samples of `batch`, checked against `graph`: every graph input present, each holding `samples` x its
/// per-sample element count, with integers where the graph takes ids or labels. `expected` is the plan's batch
/// size for training batches, `None` for evaluation batches (of any size).
pub fn check_batch(graph: &Graph, batch: &HostBatch, expected: Option<usize>) -> Result<usize, BackendError> {
    let samples = batch.samples(graph);
    if let Some(b) = expected.filter(|&b| b != samples) {
        return Err(BackendError::Data(format!("a batch holds {samples} samples, the run's batch size is {b}")));
    }
    for (id, node) in graph.inputs() {
        let t = batch.input(id).ok_or_else(|| {
            BackendError::Data(format!("a batch has no values for the model's input `{}`", node.name))
        })?;
        let per = node.shape.numel() as usize;
        let (len, dense) = match t {
            HostTensor::Dense(v) => (v.len(), true),
            HostTensor::Ids(v) => (v.len(), false),
        };
        let wants_dense = matches!(node.op, Op::Input { kind: InputKind::Dense });
        if len != samples * per || dense != wants_dense {
            return Err(BackendError::Data(format!(
                "input `{}` of a batch holds {len} {} values, the model takes {samples} x {} {}",
                node.name,
                if dense { "f32" } else { "integer" },
                node.shape,
                if wants_dense { "f32" } else { "integer" }
            )));
        }
    }
    Ok(samples)
}
