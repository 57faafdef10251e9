//! The batches a micro-graph reads on a CUDA device while calibrating: one synthetic batch (the values the
//! backend's own pool would start with), generated once for a set of inputs at one size and handed out again at
//! every step, by every round and by the graphs with and without the measured nodes. A GPU's micro-graphs run at
//! up to tens of millions of elements per node (`super::elementwise::GPU_BATCHES`), where generating the
//! backend's pool of synthetic batches on the host for every run would take longer than the measurement; the
//! batch's copy to the device is a phase of its own, outside the forward and backward phases measured.

use std::sync::{Arc, Mutex};

use trainbench_data::{BatchSource, DataError, HostBatch};
use trainbench_graph::graph::Graph;
use trainbench_graph::init::{HostTensor, synthetic_input};

/// What makes two micro-graphs' batches the same: the samples, the seed, and each input's name, shape and kind.
type Key = (usize, u64, Vec<(String, Vec<usize>, String)>);

/// Each input's values by name.
type Values = Arc<Vec<(String, HostTensor)>>;

/// The batch generated last, kept for the next micro-graph with the same inputs (one at a time: at most a few
/// hundred MB).
static LAST: Mutex<Option<(Key, Values)>> = Mutex::new(None);

/// One synthetic batch of a graph's inputs, the same at every step.
pub struct RepeatedBatch {
    /// The batch handed out.
    batch: HostBatch,
}

impl RepeatedBatch {
    /// The batch of `graph`'s inputs at `samples` samples: step 0 of `trainbench_graph::init::synthetic_input`
    /// under `seed`, generated afresh unless the last one asked for had the same inputs, size and seed.
    pub fn new(graph: &Graph, samples: usize, seed: u64) -> Self {
        let key: Key = (
            samples,
            seed,
            graph.inputs().map(|(_, n)| (n.name.clone(), n.shape.0.clone(), format!("{:?}", n.op))).collect(),
        );
        let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let values = match last.as_ref() {
            Some((k, v)) if *k == key => Arc::clone(v),
            _ => {
                let v: Values = Arc::new(
                    graph
                        .inputs()
                        .map(|(id, n)| (n.name.clone(), synthetic_input(graph, id, samples, seed, 0)))
                        .collect(),
                );
                *last = Some((key, Arc::clone(&v)));
                v
            }
        };
        drop(last);
        let inputs = graph
            .inputs()
            .filter_map(|(id, n)| values.iter().find(|(name, _)| *name == n.name).map(|(_, t)| (id, t.clone())))
            .collect();
        Self { batch: HostBatch { inputs } }
    }
}

impl BatchSource for RepeatedBatch {
    fn next_batch(&mut self) -> Result<HostBatch, DataError> {
        Ok(self.batch.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use trainbench_graph::GraphBuilder;
    use trainbench_graph::graph::{InputKind, LossKind};

    use super::*;

    fn graph(extra_relus: usize) -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", &[4, 8], InputKind::Dense).unwrap();
        let t = b.input("t", &[4, 8], InputKind::Dense).unwrap();
        let mut y = b.linear("fc", x, 8, true).unwrap();
        for i in 0..extra_relus {
            y = b.act(&format!("relu{i}"), y, trainbench_graph::graph::Activation::Relu).unwrap();
        }
        b.loss("loss", LossKind::Mse, &[y, t]).unwrap();
        b.finish(1, "samples").unwrap()
    }

    /// Every step gets the same batch, holding what the backend's synthetic pool starts with, for each input of
    /// the graph by its own node ids; a graph with the same inputs and more nodes gets the same values.
    #[test]
    fn every_step_gets_the_pools_first_batch_for_each_input() {
        let (base, with) = (graph(0), graph(3));
        let mut source = RepeatedBatch::new(&base, 5, 7);
        let first = source.next_batch().unwrap();
        assert_eq!(first, source.next_batch().unwrap());
        let ids: Vec<_> = base.inputs().map(|(id, _)| id).collect();
        assert_eq!(first.inputs.iter().map(|(id, _)| *id).collect::<Vec<_>>(), ids);
        for (id, values) in &first.inputs {
            assert_eq!(*values, synthetic_input(&base, *id, 5, 7, 0));
        }
        let again = RepeatedBatch::new(&with, 5, 7).next_batch().unwrap();
        for ((_, a), (_, b)) in first.inputs.iter().zip(&again.inputs) {
            assert_eq!(a, b);
        }
        // Another size is generated afresh.
        let other = RepeatedBatch::new(&base, 2, 7).next_batch().unwrap();
        assert_eq!(other.inputs[0].1, synthetic_input(&base, ids[0], 2, 7, 0));
    }
}
