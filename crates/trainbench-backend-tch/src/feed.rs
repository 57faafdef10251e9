//! Batches read from a dataset (`RunContext::data`) onto the device: each host batch checked against the graph's
//! input shapes and turned into tensors (on CUDA through pinned memory with a non-blocking copy), and the
//! evaluation of an evaluation split for a run with a target (forward only, no gradients).

use tch::{Device, Kind, TchError, Tensor};
use trainbench_contract::auc::binary_nodes;
use trainbench_contract::target::{EvalTally, classifier_nodes};
use trainbench_data::HostBatch;
use trainbench_graph::Op;
use trainbench_graph::graph::{Graph, NodeId};
use trainbench_graph::init::HostTensor;

use crate::lower::{EvalOpts, Lowered};

/// One batch on the device: a tensor per graph input.
pub type DeviceBatch = Vec<(NodeId, Tensor)>;

pub use trainbench_contract::batch::check_batch;

/// Copy `batch` (already checked) to `device`: a tensor made from the host values (the conversion, on the CPU),
/// pinned and copied without blocking on CUDA.
pub fn to_device(graph: &Graph, batch: &HostBatch, samples: usize, device: Device) -> Result<DeviceBatch, TchError> {
    let mut out = Vec::with_capacity(batch.inputs.len());
    for (id, values) in &batch.inputs {
        let mut shape = vec![samples as i64];
        shape.extend(graph.nodes[*id].shape.0.iter().map(|&d| d as i64));
        let t = match values {
            HostTensor::Dense(v) => Tensor::f_from_slice(v)?,
            HostTensor::Ids(v) => Tensor::f_from_slice(v)?,
        }
        .f_reshape(shape)?;
        let t =
            if device.is_cuda() { crate::lower::pinned(&t)?.f_to_device_(device, t.kind(), true, false)? } else { t };
        out.push((*id, t));
    }
    Ok(out)
}

/// Add the evaluation of one batch to `tally`: the weighted sum of the loss nodes' batch means, and, when the
/// graph has a cross-entropy loss, how many argmax predictions of its logits equal the labels; when it has a
/// binary cross-entropy loss, its logits and targets (for the AUC).
pub fn evaluate(
    model: &Lowered,
    graph: &Graph,
    batch: DeviceBatch,
    samples: usize,
    tally: &mut EvalTally,
) -> Result<(), TchError> {
    let classifier = classifier_nodes(graph);
    let mut targets = graph.losses.clone();
    if let Some((logits, labels)) = classifier {
        targets.extend([logits, labels]);
    }
    let binary = binary_nodes(graph);
    if let Some((logits, clicks)) = binary {
        targets.extend([logits, clicks]);
    }
    let mut env: Vec<Option<Tensor>> = (0..graph.nodes.len()).map(|_| None).collect();
    for (id, t) in batch {
        env[id] = Some(t);
    }
    tch::no_grad(|| model.eval(graph, &mut env, &targets, &EvalOpts::plain()))?;
    let mut loss = 0.0;
    for &l in &graph.losses {
        let weight = match graph.nodes[l].op {
            Op::Loss { weight, .. } => f64::from(weight),
            Op::Input { .. }
            | Op::Conv { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::RmsNorm { .. }
            | Op::Linear { .. }
            | Op::Embedding { .. }
            | Op::Rnn { .. }
            | Op::Attention { .. }
            | Op::Rotary { .. }
            | Op::Sdpa { .. }
            | Op::ClassToken { .. }
            | Op::EmbeddingBag { .. }
            | Op::Pool { .. }
            | Op::AdaptivePool { .. }
            | Op::Act { .. }
            | Op::Softmax
            | Op::Dropout { .. }
            | Op::Add
            | Op::Mul
            | Op::Concat { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Mean { .. }
            | Op::MatMul { .. }
            | Op::SinusoidalPositions { .. }
            | Op::LearnedPositions { .. }
            | Op::CriticBatch
            | Op::RoiAlign { .. }
            | Op::Lora { .. }
            | Op::Moe { .. } => 1.0,
        };
        let v = env[l].as_ref().ok_or_else(|| TchError::Kind("internal: eval loss not computed".into()))?;
        loss += weight * v.f_double_value(&[])?;
    }
    let (correct, predictions) = match classifier {
        Some((logits, labels)) => {
            let (Some(z), Some(y)) = (&env[logits], &env[labels]) else {
                return Err(TchError::Kind("internal: logits or labels not kept".into()));
            };
            let hits = z.f_argmax(-1, false)?.f_eq_tensor(y)?.f_sum(Kind::Int64)?.f_int64_value(&[])?;
            (hits.max(0) as u64, y.numel() as u64)
        }
        None => (0, 0),
    };
    tally.add(samples as u64, loss, correct, predictions);
    if let Some((logits, clicks)) = binary {
        let (Some(z), Some(y)) = (&env[logits], &env[clicks]) else {
            return Err(TchError::Kind("internal: binary logits or targets not kept".into()));
        };
        let host = |t: &Tensor| -> Result<Vec<f32>, TchError> {
            Vec::<f32>::try_from(t.f_to_kind(Kind::Float)?.f_flatten(0, -1)?.to_device(Device::Cpu))
        };
        tally.add_scores(&host(z)?, &host(y)?);
    }
    Ok(())
}
