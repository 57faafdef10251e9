//! A [`BatchSource`] over batches held in memory, cycled in order: what tests of every backend hand a run to
//! check that it trains on the batches it is given, and a ready-made source for a dataset small enough to hold.

use crate::batch::{BatchSource, DataError, HostBatch};
use trainbench_graph::graph::{Graph, InputKind, Op};
use trainbench_graph::init::{HostTensor, synthetic_input};

/// Batches held in memory, handed out in order and cycled; one epoch is the whole list.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    batches: Vec<HostBatch>,
    next: usize,
    delivered: u64,
    fail_after: Option<(u64, DataError)>,
}

impl MemorySource {
    /// A source cycling through `batches` (an empty list delivers an error naming `"memory"`).
    pub fn new(batches: Vec<HostBatch>) -> Self {
        Self { batches, next: 0, delivered: 0, fail_after: None }
    }

    /// The same source, failing with `error` once it has delivered `batches` batches (as a corrupt file met
    /// mid-run would).
    pub fn failing_after(mut self, batches: u64, error: DataError) -> Self {
        self.fail_after = Some((batches, error));
        self
    }

    /// Batches delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

impl BatchSource for MemorySource {
    fn next_batch(&mut self) -> Result<HostBatch, DataError> {
        if let Some((n, e)) = &self.fail_after {
            if self.delivered >= *n {
                return Err(e.clone());
            }
        }
        let b = self
            .batches
            .get(self.next)
            .cloned()
            .ok_or_else(|| DataError { file: "memory".into(), reason: "the in-memory source holds no batch".into() })?;
        self.next = (self.next + 1) % self.batches.len();
        self.delivered += 1;
        Ok(b)
    }

    fn epoch_batches(&self) -> Option<u64> {
        (!self.batches.is_empty()).then_some(self.batches.len() as u64)
    }
}

/// The batches a run with synthetic data trains on at data steps `0..count` (`init::synthetic_input`), as
/// host batches: handed to a run through a source they must give the same losses as the synthetic path.
pub fn synthetic_batches(graph: &Graph, batch: usize, seed: u64, count: u64) -> Vec<HostBatch> {
    (0..count)
        .map(|step| HostBatch {
            inputs: graph.inputs().map(|(id, _)| (id, synthetic_input(graph, id, batch, seed, step))).collect(),
        })
        .collect()
}

/// [`synthetic_batches`] with every label input set to `label`: a dataset with one class, which a model learns
/// to a near-zero loss (random labels never give one).
pub fn constant_label_batches(graph: &Graph, batch: usize, seed: u64, count: u64, label: i64) -> Vec<HostBatch> {
    let mut batches = synthetic_batches(graph, batch, seed, count);
    for b in &mut batches {
        for (id, t) in &mut b.inputs {
            if matches!(graph.nodes[*id].op, Op::Input { kind: InputKind::Labels { .. } }) {
                if let HostTensor::Ids(v) = t {
                    v.iter_mut().for_each(|x| *x = label);
                }
            }
        }
    }
    batches
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use trainbench_graph::model::{MlpSpec, ModelSpec};

    #[test]
    fn cycles_its_batches_then_fails_where_told() {
        let g =
            trainbench_graph::zoo::build(&ModelSpec::Mlp(MlpSpec { inputs: 6, hidden: vec![5], classes: 4 })).unwrap();
        let batches = constant_label_batches(&g, 4, 1, 2, 3);
        let err = DataError { file: "x.npy".into(), reason: "truncated".into() };
        let mut s = MemorySource::new(batches.clone()).failing_after(3, err.clone());
        assert_eq!(s.epoch_batches(), Some(2));
        assert_eq!(s.next_batch().unwrap(), batches[0]);
        assert_eq!(s.next_batch().unwrap(), batches[1]);
        assert_eq!(s.next_batch().unwrap(), batches[0]);
        assert_eq!(s.next_batch(), Err(err));
        assert_eq!(s.delivered(), 3);
        assert_eq!(batches[0].samples(&g), 4);
        let labels: Vec<i64> = batches[0]
            .inputs
            .iter()
            .filter_map(|(_, t)| match t {
                HostTensor::Ids(v) => Some(v.clone()),
                HostTensor::Dense(_) => None,
            })
            .flatten()
            .collect();
        assert!(!labels.is_empty() && labels.iter().all(|&l| l == 3));
        assert!(MemorySource::new(Vec::new()).next_batch().is_err());
    }
}
