//! The contract between a dataset pipeline and a backend: batches on the host, and the source they come from.
//!
//! The runner builds a [`BatchSource`] from a spec's `[dataset]` when it reads local files and hands it to the
//! backend through [`crate::RunContext::data`]; with synthetic data there is none and the backend generates its
//! batches itself. Readers, decoding and the prefetching pipeline live beside this file.

pub mod memory;

use crate::graph::NodeId;
use crate::init::HostTensor;

pub use memory::MemorySource;

/// One training batch on the host: the values of every graph input, batch first, in each input node's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct HostBatch {
    /// `(graph input, values)` for every input of the graph, in [`crate::Graph::inputs`] order.
    pub inputs: Vec<(NodeId, HostTensor)>,
}

/// Why a dataset could not deliver a batch: the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct DataError {
    /// The file (or folder) at fault, as the user would find it.
    pub file: String,
    /// What is wrong, and what to do about it where that is known.
    pub reason: String,
}

/// Where a run's training batches come from when they are read from a dataset.
pub trait BatchSource: Send {
    /// The next batch of this rank's shard, blocking until the pipeline has it: the time spent here is the
    /// run's input stall.
    fn next_batch(&mut self) -> Result<HostBatch, DataError>;
    /// Batches in one epoch of this rank's shard, when known; runs with a target that counts epochs need it.
    fn epoch_batches(&self) -> Option<u64> {
        None
    }
}

impl HostBatch {
    /// Samples in this batch: the leading dimension of its inputs, given `graph`'s per-sample shapes (0 for a
    /// batch without inputs).
    pub fn samples(&self, graph: &crate::Graph) -> usize {
        self.inputs
            .first()
            .map(|(id, t)| {
                let per = graph.nodes[*id].shape.numel().max(1) as usize;
                let len = match t {
                    HostTensor::Dense(v) => v.len(),
                    HostTensor::Ids(v) => v.len(),
                };
                len / per
            })
            .unwrap_or(0)
    }

    /// The values of graph input `id`, if the batch has them.
    pub fn input(&self, id: NodeId) -> Option<&HostTensor> {
        self.inputs.iter().find(|(i, _)| *i == id).map(|(_, t)| t)
    }
}

/// The samples of `batch`, checked against `graph`: every graph input present, each holding `samples` x its
/// per-sample element count, with integers where the graph takes ids or labels. `expected` is the plan's batch
/// size for training batches, `None` for evaluation batches (of any size).
pub fn check_batch(
    graph: &crate::Graph,
    batch: &HostBatch,
    expected: Option<usize>,
) -> Result<usize, crate::BackendError> {
    let samples = batch.samples(graph);
    if let Some(b) = expected.filter(|&b| b != samples) {
        return Err(crate::BackendError::Data(format!("a batch holds {samples} samples, the run's batch size is {b}")));
    }
    for (id, node) in graph.inputs() {
        let t = batch.input(id).ok_or_else(|| {
            crate::BackendError::Data(format!("a batch has no values for the model's input `{}`", node.name))
        })?;
        let per = node.shape.numel() as usize;
        let (len, dense) = match t {
            HostTensor::Dense(v) => (v.len(), true),
            HostTensor::Ids(v) => (v.len(), false),
        };
        let wants_dense = matches!(node.op, crate::Op::Input { kind: crate::graph::InputKind::Dense });
        if len != samples * per || dense != wants_dense {
            return Err(crate::BackendError::Data(format!(
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

/// The evaluation split of a run with a target, held on the host: every batch is evaluated at each evaluation
/// (the last one may be smaller than the others; nothing is dropped).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalSet {
    /// The batches, each of any number of samples.
    pub batches: Vec<HostBatch>,
    /// Where it was read from, for messages.
    pub origin: String,
}
