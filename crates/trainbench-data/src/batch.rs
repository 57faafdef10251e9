//! A batch on the host and where batches come from: [`HostBatch`], the [`BatchSource`] a backend pulls from,
//! the evaluation split ([`EvalSet`]), and [`DataError`], why a dataset could not deliver.

use trainbench_graph::graph::NodeId;
use trainbench_graph::init::HostTensor;

/// One training batch on the host: the values of every graph input, batch first, in each input node's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct HostBatch {
    /// `(graph input, values)` for every input of the graph, in [`trainbench_graph::graph::Graph::inputs`] order.
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

    /// Samples of the whole dataset one epoch visits (all ranks together, the last partial batch dropped);
    /// `None` when the source has no epochs.
    fn samples_per_epoch(&self) -> Option<usize> {
        None
    }
}

impl HostBatch {
    /// Samples in this batch: the leading dimension of its inputs, given `graph`'s per-sample shapes (0 for a
    /// batch without inputs).
    pub fn samples(&self, graph: &trainbench_graph::graph::Graph) -> usize {
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

/// The evaluation split of a run with a target, held on the host: every batch is evaluated at each evaluation
/// (the last one may be smaller than the others; nothing is dropped).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalSet {
    /// The batches, each of any number of samples.
    pub batches: Vec<HostBatch>,
    /// Where it was read from, for messages.
    pub origin: String,
}
