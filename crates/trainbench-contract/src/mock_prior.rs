//! What the mock backend learns from the batches it is given: the frequency of each label (a prior-only
//! classifier). Its loss is the cross-entropy of a batch's labels under the frequencies counted before it, so
//! a dataset with one class drives it towards zero while uniformly random labels keep it near `ln(classes)`;
//! its prediction is the most frequent label, and a binary model's score is the same for every sample (an AUC
//! of one half). Batches without labels are scored by the mean square of their
//! dense values (the loss of predicting zero). A simple, honest learner, so tests can see the data flow
//! through the mock; it says nothing about any framework.

use crate::error::BackendError;
use crate::target::EvalTally;
use trainbench_data::HostBatch;
use trainbench_graph::graph::{Graph, InputKind, Op};
use trainbench_graph::init::HostTensor;

/// Label counts seen so far.
#[derive(Debug, Clone)]
pub(crate) struct Prior {
    counts: Vec<f64>,
    total: f64,
}

/// The label values of `batch` (every labels input, flattened) and their class count; `None` when the graph
/// has no labels input.
fn labels(graph: &Graph, batch: &HostBatch) -> Result<Option<(Vec<i64>, usize)>, BackendError> {
    let mut out: Option<(Vec<i64>, usize)> = None;
    for (id, t) in &batch.inputs {
        if let Op::Input { kind: InputKind::Labels { classes } } = graph.nodes[*id].op {
            let HostTensor::Ids(v) = t else {
                return Err(BackendError::Data(format!("labels `{}` are not integers", graph.nodes[*id].name)));
            };
            if let Some(bad) = v.iter().find(|&&l| l < 0 || l as usize >= classes) {
                return Err(BackendError::Data(format!(
                    "label {bad} of `{}` is outside 0..{classes}",
                    graph.nodes[*id].name
                )));
            }
            let entry = out.get_or_insert_with(|| (Vec::new(), classes));
            entry.0.extend_from_slice(v);
        }
    }
    Ok(out)
}

fn mean_square(batch: &HostBatch) -> f64 {
    let (mut sum, mut n) = (0.0f64, 0usize);
    for (_, t) in &batch.inputs {
        if let HostTensor::Dense(v) = t {
            sum += v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>();
            n += v.len();
        }
    }
    if n > 0 { sum / n as f64 } else { 0.0 }
}

impl Prior {
    /// No label seen yet.
    pub(crate) fn new() -> Self {
        Self { counts: Vec::new(), total: 0.0 }
    }

    fn probability(&self, label: i64, classes: usize) -> f64 {
        let c = self.counts.get(label as usize).copied().unwrap_or(0.0);
        (c + 1.0) / (self.total + classes as f64)
    }

    /// The loss of `batch` under what was learned so far: mean cross-entropy of its labels (or the mean square
    /// of its dense values), without learning from it.
    pub(crate) fn loss(&self, graph: &Graph, batch: &HostBatch) -> Result<f64, BackendError> {
        Ok(match labels(graph, batch)? {
            Some((ls, classes)) if !ls.is_empty() => {
                ls.iter().map(|&l| -self.probability(l, classes).ln()).sum::<f64>() / ls.len() as f64
            }
            _ => mean_square(batch),
        })
    }

    /// The loss of `batch` (see [`Prior::loss`]), then count its labels.
    pub(crate) fn train(&mut self, graph: &Graph, batch: &HostBatch) -> Result<f64, BackendError> {
        let loss = self.loss(graph, batch)?;
        if let Some((ls, classes)) = labels(graph, batch)? {
            if self.counts.len() < classes {
                self.counts.resize(classes, 0.0);
            }
            for l in ls {
                self.counts[l as usize] += 1.0;
                self.total += 1.0;
            }
        }
        Ok(loss)
    }

    /// Add `batch` to an evaluation: its loss, how many of its labels equal the most frequent label, and for a
    /// binary model one score (zero) for every target.
    pub(crate) fn evaluate(&self, graph: &Graph, batch: &HostBatch, tally: &mut EvalTally) -> Result<(), BackendError> {
        let loss = self.loss(graph, batch)?;
        let samples = batch.samples(graph) as u64;
        match labels(graph, batch)? {
            Some((ls, _)) => {
                let best =
                    (0..self.counts.len()).fold(0usize, |b, k| if self.counts[k] > self.counts[b] { k } else { b });
                let correct = ls.iter().filter(|&&l| l as usize == best).count() as u64;
                tally.add(samples, loss, correct, ls.len() as u64);
            }
            None => tally.add(samples, loss, 0, 0),
        }
        if let Some((_, clicks)) = crate::auc::binary_nodes(graph) {
            if let Some(HostTensor::Dense(ys)) = batch.input(clicks) {
                tally.add_scores(&vec![0.0; ys.len()], ys);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::conformance::fixtures;
    use trainbench_data::memory::{constant_label_batches, synthetic_batches};

    #[test]
    fn one_class_is_learned_and_random_labels_are_not() {
        let g = fixtures::build("mlp").unwrap().unwrap();
        let mut one = Prior::new();
        let mut random = Prior::new();
        let (mut last_one, mut last_random) = (0.0, 0.0);
        for b in constant_label_batches(&g, 16, 3, 20, 2) {
            last_one = one.train(&g, &b).unwrap();
        }
        for b in synthetic_batches(&g, 16, 3, 20) {
            last_random = random.train(&g, &b).unwrap();
        }
        assert!(last_one < 0.05, "{last_one}");
        assert!(last_random > 1.0, "{last_random}");
        let mut tally = EvalTally::default();
        one.evaluate(&g, &constant_label_batches(&g, 5, 9, 1, 2)[0], &mut tally).unwrap();
        assert_eq!((tally.correct, tally.predictions, tally.samples), (5, 5, 5));
    }
}
