//! The contract between a dataset pipeline and a backend: batches on the host, and the source they come from.
//!
//! The runner builds a [`BatchSource`] from a spec's `[dataset]` when it reads local files and hands it to the
//! backend through [`crate::RunContext::data`]; with synthetic data there is none and the backend generates its
//! batches itself. Readers, decoding and the prefetching pipeline live beside this file.

use crate::graph::NodeId;
use crate::init::HostTensor;

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
}
