//! Evaluation of an evaluation split for a run with a target: the forward pass on the parameters without
//! autodiff (no gradients are taken), the loss summed as in training, and argmax accuracy of the cross-entropy
//! loss's logits read back to the host (a binary cross-entropy loss's logits, for the AUC).

use burn::tensor::Device;
use trainbench_contract::auc::binary_nodes;
use trainbench_contract::batch::check_batch;
use trainbench_contract::target::{EvalTally, classifier_nodes, count_correct};
use trainbench_data::EvalSet;
use trainbench_graph::Graph;
use trainbench_graph::init::HostTensor;

use crate::error::TrainError;
use crate::lower::{Forward, upload};
use crate::params::Store;

/// Evaluate every batch of `eval` with the parameters of `store` on `device` (a device without autodiff).
pub fn evaluate(graph: &Graph, store: &Store, eval: &EvalSet, device: &Device) -> Result<EvalTally, TrainError> {
    let classifier = classifier_nodes(graph);
    let binary = binary_nodes(graph).filter(|_| classifier.is_none());
    let values: Vec<_> = store.slots.iter().map(|s| s.value.clone()).collect();
    let mut tally = EvalTally::default();
    for batch in &eval.batches {
        let samples = check_batch(graph, batch, None).map_err(TrainError::Backend)?;
        let inputs = upload(graph, samples, &batch.inputs, device);
        let mut fwd = Forward::new(graph, store, &values, samples);
        fwd.keep = classifier.or(binary).map(|(logits, _)| logits);
        let loss = fwd.run(inputs)?;
        let loss = loss.try_into_scalar::<f32>().map_err(|e| TrainError::Device(format!("reading the loss: {e:?}")))?;
        let kept = match fwd.kept.take() {
            Some(value) => {
                let act = value.float("logits")?;
                let classes = act.shape.last().copied().unwrap_or(0);
                let host = act
                    .t
                    .clone()
                    .into_data()
                    .try_into_vec::<f32>()
                    .map_err(|e| TrainError::Device(format!("reading the logits: {e:?}")))?;
                Some((host, classes))
            }
            None => None,
        };
        let (correct, predictions) = match (classifier, &kept) {
            (Some((_, labels)), Some((host, classes))) => match batch.input(labels) {
                Some(HostTensor::Ids(ys)) => count_correct(host, *classes, ys),
                _ => (0, 0),
            },
            _ => (0, 0),
        };
        tally.add(samples as u64, f64::from(loss), correct, predictions);
        if let (Some((_, clicks)), Some((host, _))) = (binary, &kept) {
            if let Some(HostTensor::Dense(ys)) = batch.input(clicks) {
                tally.add_scores(host, ys);
            }
        }
    }
    Ok(tally)
}
