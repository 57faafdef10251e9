//! The shapes the element-wise classes are measured at, by device family: one sample of each class's micro-graph
//! and the batches it is timed at (`super::elementwise`), and for attention the grid of sequence lengths and head
//! sizes. On a CPU every class trains on 16 positions of 64 features (attention: 4 heads of 16 features), the
//! shapes every CPU profile was calibrated at. On a CUDA device a kernel's speed per element depends on its
//! shape as much as on its size, so each class is measured at the shape of the layers it stands for: rows of
//! 1,024 features (a Transformer's activations and softmax rows), batch normalisation over 64 channels of 32 x 32
//! pixels (a convolutional network's), and attention over 128 and 1,024 positions at 64 and 128 features per
//! head, each up to 8.4 M elements per node (33.5 M score elements for attention), past a launch's fixed time.

use trainbench_contract::{DeviceFamily, DeviceSelector};

use crate::hardware::wire::AttentionShape;
use crate::predict::price_classes::{ElementwiseClass, FirstKind};

/// One sample of the stacked classes on a CPU: 16 positions of 64 features (a small Transformer's
/// activations).
pub const CPU_SAMPLE: [usize; 2] = [16, 64];
/// Samples per step on a CPU: 1,024, 65,536, 262,144 and 1,048,576 elements per node (the third about where a
/// node's input and output outgrow a core's 2 MiB L2 on the development machine).
pub const CPU_BATCHES: [usize; 4] = [1, 64, 256, 1024];
/// Samples per step of the max-pooling graphs on a CPU (their samples are larger: 8 channels of 32 x 32).
pub const CPU_POOL_BATCHES: [usize; 4] = [1, 8, 32, 64];
/// One sample of the max-pooling graphs: 8 channels of 32 x 32 pixels.
pub const POOL_SAMPLE: [usize; 3] = [8, 32, 32];
/// Heads of every measured attention.
pub const ATTENTION_HEADS: usize = 4;

/// The attention shapes a CPU measures besides [`CPU_SAMPLE`]'s 16 positions of 16 features per head: (positions,
/// features per head, batches), 128 positions at 32 and at 64 features per head (a small and a large model's
/// heads), at 65 K and 524 K score elements per node (a few seconds a point). A fused attention's cost per score
/// on a CPU depends on its shape (on the Intel Xeon of 2026-12-06, PyTorch's causal core: 8.3 ns per score
/// forward at 16 x 16, 3.4 ns at 128 x 32), so a layer is priced at the nearest measured shape.
pub const CPU_ATTENTION: [(usize, usize, [usize; 2]); 2] = [(128, 32, [1, 8]), (128, 64, [1, 8])];
/// One sample of the row-wise classes on a CUDA device: 16 rows of 1,024 features.
pub const GPU_ROWS: [usize; 2] = [16, 1024];
/// Samples per step of [`GPU_ROWS`]: 16 K, 2.1 M and 8.4 M elements per node (the largest about 17 us of a large
/// GPU's memory traffic per fp32 operation, twice a launch; each step copies its batch to the device,
/// `super::repeated_batch`, which bounds the size).
pub const GPU_ROW_BATCHES: [usize; 3] = [1, 128, 512];
/// One sample of batch normalisation on a CUDA device: 64 channels of 32 x 32 pixels.
pub const GPU_CHANNELS: [usize; 3] = [64, 32, 32];
/// Samples per step of [`GPU_CHANNELS`]: 65 K, 2.1 M and 8.4 M elements per node.
pub const GPU_CHANNEL_BATCHES: [usize; 3] = [1, 32, 128];
/// Samples per step of the max-pooling graphs on a CUDA device (up to 8.4 M elements per node).
pub const GPU_POOL_BATCHES: [usize; 3] = [1, 256, 1024];
/// Samples per step of cross-entropy on a CUDA device (1,024 logits each: up to 8.4 M logits).
pub const GPU_CE_BATCHES: [usize; 3] = [1, 2048, 8192];
/// The attention grid on a CUDA device: (positions, features per head, batches), the batches giving 4.2 M and
/// 33.5 M score elements per node.
pub const GPU_ATTENTION: [(usize, usize, [usize; 2]); 3] =
    [(128, 64, [64, 512]), (1024, 64, [1, 8]), (1024, 128, [1, 8])];

/// One measured shape of a class: the sample its micro-graph trains on and the batches it is timed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MicroShape {
    /// One sample's dimensions: positions x features (the row-wise classes and attention), channels x height x
    /// width (batch normalisation on a GPU, max pooling).
    pub sample: Vec<usize>,
    /// Samples per step of each measured point, ascending.
    pub batches: Vec<usize>,
}

impl MicroShape {
    /// The attention shape this sample measures (positions, features per head of [`ATTENTION_HEADS`]).
    pub fn attention(&self) -> AttentionShape {
        let (t, e) = (self.sample.first().copied().unwrap_or(1), self.sample.get(1).copied().unwrap_or(1));
        AttentionShape { positions: t as u64, head_dim: (e / ATTENTION_HEADS).max(1) as u64 }
    }
}

/// The shapes `kind` is measured at on `device` (one, except attention on a GPU: its grid).
pub fn shapes(kind: FirstKind, device: DeviceSelector) -> Vec<MicroShape> {
    let shape = |sample: &[usize], batches: &[usize]| MicroShape { sample: sample.to_vec(), batches: batches.to_vec() };
    let gpu = device.family() == DeviceFamily::Cuda;
    match kind {
        FirstKind::Class(ElementwiseClass::MaxPool) if gpu => vec![shape(&POOL_SAMPLE, &GPU_POOL_BATCHES)],
        FirstKind::Class(ElementwiseClass::MaxPool) => vec![shape(&POOL_SAMPLE, &CPU_POOL_BATCHES)],
        FirstKind::Class(ElementwiseClass::CrossEntropy) if gpu => vec![shape(&CPU_SAMPLE, &GPU_CE_BATCHES)],
        FirstKind::Class(ElementwiseClass::BatchNorm) if gpu => vec![shape(&GPU_CHANNELS, &GPU_CHANNEL_BATCHES)],
        FirstKind::Class(c) if gpu && c.is_attention() => {
            GPU_ATTENTION.iter().map(|&(t, d, batches)| shape(&[t, d * ATTENTION_HEADS], &batches)).collect()
        }
        FirstKind::Class(c) if c.is_attention() => std::iter::once(shape(&CPU_SAMPLE, &CPU_BATCHES))
            .chain(CPU_ATTENTION.iter().map(|&(t, d, batches)| shape(&[t, d * ATTENTION_HEADS], &batches)))
            .collect(),
        FirstKind::Class(
            ElementwiseClass::Dropout
            | ElementwiseClass::LayerNorm
            | ElementwiseClass::Softmax
            | ElementwiseClass::Relu
            | ElementwiseClass::Gelu,
        ) if gpu => vec![shape(&GPU_ROWS, &GPU_ROW_BATCHES)],
        FirstKind::Class(
            ElementwiseClass::Dropout
            | ElementwiseClass::LayerNorm
            | ElementwiseClass::BatchNorm
            | ElementwiseClass::Softmax
            | ElementwiseClass::Relu
            | ElementwiseClass::Gelu
            | ElementwiseClass::Attention
            | ElementwiseClass::AttentionCausal
            | ElementwiseClass::AttentionCross
            | ElementwiseClass::CrossEntropy,
        )
        | FirstKind::Linear
        | FirstKind::Add => vec![shape(&CPU_SAMPLE, &CPU_BATCHES)],
    }
}

/// How the element-wise classes were measured on `device`, for the profile's `method`.
pub fn describe(device: DeviceSelector) -> String {
    if device.family() != DeviceFamily::Cuda {
        return format!(
            "input [{}, {}] per sample (attention: {ATTENTION_HEADS} heads over its positions) at batch {CPU_BATCHES:?}, \
             and attention also at {}; max pooling over [8, 32, 32] at batch {CPU_POOL_BATCHES:?}",
            CPU_SAMPLE[0],
            CPU_SAMPLE[1],
            CPU_ATTENTION
                .iter()
                .map(|(t, d, b)| format!("{t} positions x {d} features per head at batch {b:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let attention: Vec<String> =
        GPU_ATTENTION.iter().map(|(t, d, b)| format!("{t} positions x {d} features per head at batch {b:?}")).collect();
    format!(
        "dropout, layer norm, softmax and activations over input [{}, {}] per sample at batch {GPU_ROW_BATCHES:?}; \
         batch norm over [64, 32, 32] (input -> conv 1x1 -> the operations) at batch {GPU_CHANNEL_BATCHES:?}; \
         attention ({ATTENTION_HEADS} heads) at {}; cross-entropy at batch {GPU_CE_BATCHES:?}; max pooling over \
         [8, 32, 32] at batch {GPU_POOL_BATCHES:?}",
        GPU_ROWS[0],
        GPU_ROWS[1],
        attention.join(", ")
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_measures_every_class_at_the_shapes_of_its_first_calibrations() {
        let first = MicroShape { sample: CPU_SAMPLE.to_vec(), batches: CPU_BATCHES.to_vec() };
        for kind in FirstKind::all().filter(|k| *k != FirstKind::Class(ElementwiseClass::MaxPool)) {
            // Attention first at the first calibrations' shape, then at 128 positions (below).
            assert_eq!(shapes(kind, DeviceSelector::Cpu)[0], first, "{kind:?}");
        }
        let legacy = shapes(FirstKind::Class(ElementwiseClass::Attention), DeviceSelector::Cpu)[0].attention();
        assert_eq!((legacy.positions, legacy.head_dim), (16, 16));
    }

    #[test]
    fn a_cpu_also_measures_attention_at_128_positions_of_32_and_64_features_per_head() {
        for class in ElementwiseClass::ALL.into_iter().filter(|c| c.is_attention()) {
            let grid = shapes(FirstKind::Class(class), DeviceSelector::Cpu);
            let measured: Vec<(u64, u64)> =
                grid.iter().map(|s| (s.attention().positions, s.attention().head_dim)).collect();
            assert_eq!(measured, [(16, 16), (128, 32), (128, 64)]);
            for s in &grid[1..] {
                let scores = |b: usize| b * ATTENTION_HEADS * s.sample[0] * s.sample[0];
                assert_eq!((scores(s.batches[0]), scores(s.batches[1])), (1 << 16, 1 << 19), "{s:?}");
            }
        }
        for class in ElementwiseClass::ALL.into_iter().filter(|c| !c.is_attention()) {
            assert_eq!(shapes(FirstKind::Class(class), DeviceSelector::Cpu).len(), 1, "{class:?}");
        }
    }

    #[test]
    fn a_gpu_measures_attention_over_sequence_lengths_and_head_sizes_up_to_33_million_scores() {
        let grid = shapes(FirstKind::Class(ElementwiseClass::AttentionCausal), DeviceSelector::Cuda(Some(0)));
        let measured: Vec<(u64, u64)> =
            grid.iter().map(|s| (s.attention().positions, s.attention().head_dim)).collect();
        assert_eq!(measured, [(128, 64), (1024, 64), (1024, 128)]);
        for s in &grid {
            let scores = |b: usize| b * ATTENTION_HEADS * s.sample[0] * s.sample[0];
            assert_eq!((scores(s.batches[0]), scores(s.batches[1])), (1 << 22, 1 << 25), "{s:?}");
        }
    }

    #[test]
    fn a_gpus_largest_point_of_every_class_is_8_million_elements_per_node() {
        for class in ElementwiseClass::ALL.into_iter().filter(|c| !c.is_attention()) {
            let s = shapes(FirstKind::Class(class), DeviceSelector::Cuda(Some(0))).pop().unwrap();
            let per_sample = if class == ElementwiseClass::CrossEntropy { 1024 } else { s.sample.iter().product() };
            assert_eq!(s.batches.last().unwrap() * per_sample, 1 << 23, "{class:?}");
        }
    }
}
