//! The calibration contract: what `trainbench calibrate` asks a backend to measure on a device (matrix products
//! and convolutions per precision at several sizes, a STREAM-like triad, the fixed cost of one operation, the
//! host-to-device copy), and what comes back. The performance model reads the result as an efficiency curve.

use serde::{Deserialize, Serialize};

use crate::device::{DeviceFamily, DeviceSelector};
use crate::measured::DeviceInfo;
use trainbench_graph::training::Precision;

/// One convolution shape to time: NCHW input, K filters of R x R at a stride, padded by (R - 1) / 2 (the same
/// size at stride 1 and an odd kernel; the input side over the stride at stride 2), or transposed (the input side
/// times the stride out, as a generator's 4 x 4 stride-2 up-sampling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvShape {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height and width.
    pub hw: usize,
    /// Output channels.
    pub k: usize,
    /// Kernel size.
    pub r: usize,
    /// Stride (1 in requests made before it was recorded).
    #[serde(default = "unit_stride")]
    pub stride: usize,
    /// Whether it is a transposed convolution.
    #[serde(default)]
    pub transposed: bool,
}

fn unit_stride() -> usize {
    1
}

impl ConvShape {
    /// A 3 x 3-style square shape at stride 1, not transposed: `n` images of `c` channels, `hw` on a side, into
    /// `k` channels through `r` x `r` filters.
    pub const fn square(n: usize, c: usize, hw: usize, k: usize, r: usize) -> Self {
        ConvShape { n, c, hw, k, r, stride: 1, transposed: false }
    }

    /// Zero padding on each side: (R - 1) / 2.
    pub fn padding(&self) -> usize {
        self.r.saturating_sub(1) / 2
    }

    /// Output height and width: `(hw + 2 p - r) / stride + 1`, or transposed `(hw - 1) stride - 2 p + r`.
    pub fn output_side(&self) -> usize {
        let (p, s) = (self.padding(), self.stride.max(1));
        if self.transposed {
            (self.hw.max(1) - 1) * s + self.r - 2 * p
        } else {
            (self.hw + 2 * p).saturating_sub(self.r) / s + 1
        }
    }

    /// FLOPs of the forward convolution (2 x multiply-adds): every output pixel's filters over its window, or,
    /// transposed, every input pixel's scattered through the filters.
    pub fn flops(&self) -> f64 {
        let side = if self.transposed { self.hw } else { self.output_side() };
        2.0 * (self.n * self.k * side * side * self.c * self.r * self.r) as f64
    }
}

/// What to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRequest {
    /// The device.
    pub device: DeviceSelector,
    /// Precisions of the matrix products and convolutions.
    pub precisions: Vec<Precision>,
    /// Square matrix product sizes (m = n = k).
    pub gemm_sizes: Vec<usize>,
    /// Products of unequal sides `[m x k] x [k x n]`, as `[m, k, n]`: a layer's batch rows against its weights
    /// (skinny when the batch is small), timed at the first precision only.
    #[serde(default)]
    pub gemm_shapes: Vec<[usize; 3]>,
    /// Convolution shapes.
    pub conv_shapes: Vec<ConvShape>,
    /// Convolutions on a grid of channels and pixels (forward and backward, first precision only): a layer's
    /// rate depends on its channels (few channels vectorise badly), not only on its FLOPs.
    #[serde(default)]
    pub conv_grid: Vec<ConvShape>,
    /// Elements of each triad vector.
    pub triad_elements: usize,
    /// Timed calls per kernel (the median is kept), after one untimed call.
    pub repeats: u32,
    /// Intra-op CPU threads (as `run.cpu_threads`); `None` keeps the library's default.
    pub cpu_threads: Option<u32>,
    /// Time with the process's CPU clock instead of the wall clock (CPU devices): on a shared machine, the time
    /// the work takes with a core to itself. Meaningful with one intra-op thread (more threads add their
    /// waiting to the CPU time).
    #[serde(default)]
    pub cpu_clock: bool,
    /// Measure what memory taken afresh from the operating system costs ([`FreshMemory`]); a backend whose
    /// allocator keeps its device's memory for reuse (CUDA's caching allocator) measures nothing.
    #[serde(default)]
    pub fresh_memory: bool,
    /// With `fresh_memory`: the step-like cycles to time ([`FreshMemory::cycled`]), each size held and given back
    /// with each pause; empty: none.
    #[serde(default)]
    pub fresh_cycles: Vec<FreshCycle>,
    /// Time the grids (`gemm_shapes`, `conv_grid`) at every precision of `precisions`, not the first only: on a
    /// GPU the half precisions run on tensor cores, whose rates by shape the first precision's (fp32) do not
    /// foretell, and the grids take seconds there, not minutes.
    #[serde(default)]
    pub grids_at_every_precision: bool,
}

/// One cycle of fresh memory to time: `bytes` taken in allocations past the allocator's threshold and held
/// together, given back, then `pause_s` seconds with nothing taken.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FreshCycle {
    /// Bytes taken per cycle.
    pub bytes: f64,
    /// Seconds between giving them back and taking them again.
    pub pause_s: f64,
}

/// The CPU's default cycles: 1, 2 and 4 GiB (a large model's step takes and gives back gigabytes of gradients and
/// optimizer temporaries), each with a short pause (0.25 s) and a long one (2 s), as steps of different lengths
/// leave the memory free for.
pub fn cpu_fresh_cycles() -> Vec<FreshCycle> {
    let gib = (1u64 << 30) as f64;
    [1.0, 2.0, 4.0]
        .into_iter()
        .flat_map(|g| [0.25, 2.0].map(|pause_s| FreshCycle { bytes: g * gib, pause_s }))
        .collect()
}

/// One timed kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelTiming {
    /// `gemm`, `conv` (forward) or `conv_backward` (input and weight gradients: 2 x the forward's FLOPs).
    pub kind: String,
    /// Precision.
    pub precision: Precision,
    /// Shape as a reader writes it.
    pub shape: String,
    /// FLOPs per call.
    pub flops: f64,
    /// Median seconds per call.
    pub seconds: f64,
}

/// One timed convolution of the grid: forward, and backward (input and weight gradients).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvTiming {
    /// Precision.
    pub precision: Precision,
    /// The shape.
    pub shape: ConvShape,
    /// Median seconds of the forward call.
    pub forward_s: f64,
    /// Median seconds of the backward call.
    pub backward_s: f64,
}

/// One timed product `[m x k] x [k x n]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GemmShapeTiming {
    /// Precision.
    pub precision: Precision,
    /// `[m, k, n]`.
    pub dims: [usize; 3],
    /// Median seconds per call.
    pub seconds: f64,
}

/// What memory taken afresh from the operating system costs: an allocation larger than the host allocator keeps
/// for reuse (glibc's mmap threshold, which rises with what is freed to at most 32 MiB) is mapped on every call
/// and unmapped when freed, so each call pays its pages' faults and the kernel's zeroing again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreshMemory {
    /// The largest allocation measured to be served from memory the process kept, bytes: larger ones are fresh.
    pub reused_up_to_bytes: f64,
    /// Seconds per byte an allocation larger than that costs beyond writing memory the process kept (mapping,
    /// page faults, zeroing, unmapping), measured at the largest size.
    pub seconds_per_byte: f64,
    /// Fresh memory taken and given back in cycles, as a training step does: what a byte costs beyond the tight
    /// loop's fresh byte when gigabytes are held, given back and taken again a while later. Empty where not
    /// measured.
    #[serde(default)]
    pub cycled: Vec<CycledFresh>,
}

/// One cycle size and period of [`FreshMemory::cycled`]: on a virtual machine whose kernel reports free pages to
/// the hypervisor (free page reporting, a balloon's), memory given back and left free is handed to the host, and
/// taking it again faults it in from the host, several times dearer than a page the kernel kept.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CycledFresh {
    /// Bytes taken (in allocations past the allocator's threshold), held together, then given back, per cycle.
    pub bytes: f64,
    /// Seconds from one cycle's start to the next's (taking, giving back, the pause).
    pub period_s: f64,
    /// Seconds per byte of taking them beyond a fresh byte of the tight loop (`seconds_per_byte`'s), the mean
    /// over the cycles after the first.
    pub extra_seconds_per_byte: f64,
}

/// What a backend measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The device measured.
    pub device: DeviceInfo,
    /// Matrix products and convolutions (precisions the device cannot run are left out).
    pub kernels: Vec<KernelTiming>,
    /// Products of unequal sides (the request's `gemm_shapes`).
    #[serde(default)]
    pub gemm_shapes: Vec<GemmShapeTiming>,
    /// Convolutions of the request's `conv_grid`.
    #[serde(default)]
    pub conv_grid: Vec<ConvTiming>,
    /// Median seconds of one element-wise add of a few elements with autograd recording (dispatch, launch).
    pub op_overhead_s: f64,
    /// Triad bandwidth (`a = b + s * c`: 3 vectors moved), bytes per second.
    pub triad_bytes_per_s: f64,
    /// Host-to-device copy bandwidth (pinned memory), bytes per second; `None` when the device is the host.
    pub host_to_device_bytes_per_s: Option<f64>,
    /// What fresh memory costs (the request's `fresh_memory`), where the device's allocator hands it out.
    #[serde(default)]
    pub fresh_memory: Option<FreshMemory>,
    /// Seconds a square root of a zero element costs beyond that of a nonzero one, per element (CPU: libtorch's
    /// vectorised square root takes a slow path on zeros; Adam's second moment is zero in every embedding row no
    /// step has looked up). `None` where not measured.
    #[serde(default)]
    pub zero_sqrt_s_per_element: Option<f64>,
    /// How it was measured (library and version, threads, repetitions, statistic).
    pub method: String,
}

/// The default request: square GEMMs from 32 up to `max_gemm` by powers of two, the grids of unequal products
/// and convolutions, a few fixed convolutions and a triad, 7 timed calls each. The grids and the triad are sized
/// for the device: on the host (and on a wgpu adapter, which may be software Vulkan) as [`gemm_shape_grid`] and
/// [`conv_grid`]; on a CUDA device as [`gpu_gemm_shape_grid`] and [`gpu_conv_grid`], whose largest calls run well
/// past a kernel launch's fixed cost and a large GPU's cache (a host-sized grid there measures launches only,
/// and every larger layer would be priced at the small calls' rate).
pub fn default_request(device: DeviceSelector, precisions: Vec<Precision>, max_gemm: usize) -> CalibrationRequest {
    let gpu = device.family() == DeviceFamily::Cuda;
    CalibrationRequest {
        device,
        precisions,
        gemm_sizes: square_sizes(max_gemm),
        gemm_shapes: if gpu { gpu_gemm_shape_grid(max_gemm) } else { gemm_shape_grid(max_gemm) },
        conv_grid: if gpu { gpu_conv_grid() } else { [conv_grid(), conv_class_grid()].concat() },
        conv_shapes: vec![
            ConvShape::square(1, 3, 32, 16, 3),
            ConvShape::square(8, 16, 32, 16, 3),
            ConvShape::square(8, 64, 16, 64, 3),
            ConvShape::square(16, 64, 32, 64, 3),
            ConvShape::square(8, 256, 14, 256, 3),
        ],
        // 8 M elements (96 MB moved per call) is past a CPU's last-level cache; a GPU's L2 holds tens of MB, so
        // there 64 M (768 MB per call).
        triad_elements: if gpu { 64 << 20 } else { 8 << 20 },
        repeats: 7,
        cpu_threads: None,
        cpu_clock: false,
        fresh_memory: true,
        fresh_cycles: if gpu { Vec::new() } else { cpu_fresh_cycles() },
        grids_at_every_precision: gpu,
    }
}

/// Square product sizes: 32, 64, ... up to `max_gemm` (powers of two; 32 alone when `max_gemm` is below it).
pub fn square_sizes(max_gemm: usize) -> Vec<usize> {
    let mut v = vec![32usize];
    let mut side = 32usize;
    while let Some(next) = side.checked_mul(2).filter(|&s| s <= max_gemm) {
        v.push(next);
        side = next;
    }
    v
}

/// Rows of the products of [`gemm_shape_grid`]: a batch of 1 to several thousand rows (batch x positions).
pub const GEMM_ROWS: [usize; 5] = [1, 8, 64, 512, 4096];
/// Inner and output sides of the products of [`gemm_shape_grid`]: a layer's features.
pub const GEMM_SIDES: [usize; 4] = [16, 64, 256, 1024];

/// The grid of unequal products: every row count of [`GEMM_ROWS`] against every pair of sides of
/// [`GEMM_SIDES`] (sides above `max_gemm` left out).
pub fn gemm_shape_grid(max_gemm: usize) -> Vec<[usize; 3]> {
    product_grid(&GEMM_ROWS, &GEMM_SIDES, max_gemm)
}

/// Rows of the products of [`gpu_gemm_shape_grid`]: one row to a large model's tokens per step (batch x
/// positions of thousands).
pub const GPU_GEMM_ROWS: [usize; 5] = [1, 64, 512, 4096, 32768];
/// Inner and output sides of the products of [`gpu_gemm_shape_grid`]: a small layer's features to a large
/// model's hidden and feed-forward sizes.
pub const GPU_GEMM_SIDES: [usize; 5] = [64, 256, 1024, 4096, 8192];

/// The grid of unequal products on a CUDA device: every row count of [`GPU_GEMM_ROWS`] against every pair of
/// sides of [`GPU_GEMM_SIDES`] (sides above `max_gemm` left out, 1024 kept at least).
pub fn gpu_gemm_shape_grid(max_gemm: usize) -> Vec<[usize; 3]> {
    product_grid(&GPU_GEMM_ROWS, &GPU_GEMM_SIDES, max_gemm.max(1024))
}

fn product_grid(rows: &[usize], sides: &[usize], max_side: usize) -> Vec<[usize; 3]> {
    let sides: Vec<usize> = sides.iter().copied().filter(|&s| s <= max_side.max(sides[0])).collect();
    let mut v = Vec::new();
    for &m in rows {
        for &k in &sides {
            for &n in &sides {
                v.push([m, k, n]);
            }
        }
    }
    v
}

/// Channels (in = out) of the convolutions of [`conv_grid`].
pub const CONV_CHANNELS: [usize; 6] = [4, 8, 16, 32, 64, 128];
/// Image sides (height = width) of the convolutions of [`conv_grid`]: 64 to 4,096 pixels per image.
pub const CONV_SIDES: [usize; 4] = [8, 16, 32, 64];
/// Batches of the convolutions of [`conv_grid`]. The batch is an axis of its own: libtorch's CPU convolution at
/// 2 images of 16 x 16 and 8 channels took 1.6 times the time per pixel of 1 or 4 images, and 4 images of 16 x 16
/// 1.7 times the backward time per pixel of 1 image of 32 x 32, so pixels alone (batch x height x width) do not
/// say what a convolution costs.
pub const CONV_BATCHES: [usize; 5] = [1, 2, 4, 16, 64];
/// Forward FLOPs up to which a combination of [`conv_grid`] is measured (beyond them a call takes tens of
/// milliseconds on a core, and the rate no longer changes with size; the fit carries the largest batch measured
/// at a channel count and side to the larger ones).
pub const CONV_MAX_FLOPS: f64 = 2.5e9;

/// The convolution grid: 3 x 3, stride 1, same padding, every channel count of [`CONV_CHANNELS`] at every side of
/// [`CONV_SIDES`] and batch of [`CONV_BATCHES`] up to [`CONV_MAX_FLOPS`] forward (batch 1 always).
pub fn conv_grid() -> Vec<ConvShape> {
    let mut v = Vec::new();
    for c in CONV_CHANNELS {
        for hw in CONV_SIDES {
            for n in CONV_BATCHES {
                let shape = ConvShape::square(n, c, hw, c, 3);
                if n == 1 || shape.flops() <= CONV_MAX_FLOPS {
                    v.push(shape);
                }
            }
        }
    }
    v
}

/// The kernel classes [`conv_class_grid`] measures beside the 3 x 3 stride-1 grid, as (kernel, stride,
/// transposed): the 1 x 1 projections of a bottleneck, the stride-2 down-samplings of ResNets and detectors (1 x 1,
/// 3 x 3, 7 x 7 stems), and a GAN's 4 x 4 stride-2 convolutions both ways. libtorch's CPU convolution runs each
/// through its own path: a WGAN-GP's 4 x 4 stride-2 and transposed layers ran their backward at 0.14 to 0.74 times
/// the rate of a 3 x 3 stride-1 one of the same channels and output.
pub const CONV_CLASSES: [(usize, usize, bool); 6] =
    [(1, 1, false), (1, 2, false), (3, 2, false), (7, 2, false), (4, 2, false), (4, 2, true)];
/// Channels (in = out) of [`conv_class_grid`]: past the 3 x 3 grid's largest at the last, where a class's share
/// keeps moving (a 1 x 1 stride-2 projection ran at a quarter of the grid's rate at 128 channels and half of it
/// at ResNet-50's 1024): measured at the smallest side and batch 1 only.
pub const CONV_CLASS_CHANNELS: [usize; 4] = [8, 32, 128, 512];
/// Input sides of [`conv_class_grid`] (output sides 8 and 16 at stride 2, 32 and 64 transposed).
pub const CONV_CLASS_SIDES: [usize; 2] = [16, 32];
/// Batches of [`conv_class_grid`].
pub const CONV_CLASS_BATCHES: [usize; 2] = [1, 16];

/// The kernel-class points: every class of [`CONV_CLASSES`] at every channel count of [`CONV_CLASS_CHANNELS`],
/// input side of [`CONV_CLASS_SIDES`] and batch of [`CONV_CLASS_BATCHES`] up to [`CONV_MAX_FLOPS`] forward (batch
/// 1 always; past the grid's channels, the smallest side at batch 1 alone). Each output falls on the 3 x 3 grid's
/// axes (its channels clamped to the grid's largest), whose rate there the fit divides it by.
pub fn conv_class_grid() -> Vec<ConvShape> {
    let mut v = Vec::new();
    for (r, stride, transposed) in CONV_CLASSES {
        for c in CONV_CLASS_CHANNELS {
            for hw in CONV_CLASS_SIDES {
                for n in CONV_CLASS_BATCHES {
                    let shape = ConvShape { n, c, hw, k: c, r, stride, transposed };
                    let wide = c > CONV_CHANNELS[CONV_CHANNELS.len() - 1];
                    if wide && (n > 1 || hw > CONV_CLASS_SIDES[0]) {
                        continue;
                    }
                    if n == 1 || shape.flops() <= CONV_MAX_FLOPS {
                        v.push(shape);
                    }
                }
            }
        }
    }
    v
}

/// Channels (in = out) of the convolutions of [`gpu_conv_grid`]: a small network's first stage to a ResNet's
/// last.
pub const GPU_CONV_CHANNELS: [usize; 5] = [16, 64, 128, 256, 512];
/// (batch, height = width) of the convolutions of [`gpu_conv_grid`]: 256 to 401,408 output pixels (a ResNet's
/// 56 x 56 stage at batch 128).
pub const GPU_CONV_PIXELS: [(usize, usize); 4] = [(1, 16), (8, 28), (32, 56), (128, 56)];

/// The convolution grid on a CUDA device: 3 x 3, stride 1, same padding, every channel count of
/// [`GPU_CONV_CHANNELS`] at every size of [`GPU_CONV_PIXELS`] (the largest call about 2 TFLOP forward).
pub fn gpu_conv_grid() -> Vec<ConvShape> {
    let mut v = Vec::new();
    for c in GPU_CONV_CHANNELS {
        for (n, hw) in GPU_CONV_PIXELS {
            v.push(ConvShape::square(n, c, hw, c, 3));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--max-gemm` bounds the squares as its help says (32, 64, ... up to it), on the host as on a GPU; the
    /// host's default (1024) measures what it always did.
    #[test]
    fn squares_run_up_to_max_gemm() {
        assert_eq!(square_sizes(1024), [32, 64, 128, 256, 512, 1024]);
        assert_eq!(square_sizes(8192).last(), Some(&8192));
        assert_eq!(square_sizes(100), [32, 64]);
        assert_eq!(square_sizes(0), [32]);
        assert_eq!(square_sizes(usize::MAX).len(), usize::BITS as usize - 5);
    }

    /// A CUDA device gets grids whose largest calls are far past a launch (a 32768 x 8192 x 8192 product, a
    /// 512-channel convolution over 401,408 pixels) and a triad past its L2; the host keeps its own grids.
    #[test]
    fn a_gpu_gets_grids_past_a_launch_and_the_host_keeps_its_own() {
        let host = default_request(DeviceSelector::Cpu, vec![Precision::Fp32], 1024);
        assert_eq!(host.gemm_shapes, gemm_shape_grid(1024));
        assert_eq!(host.conv_grid, [conv_grid(), conv_class_grid()].concat());
        assert_eq!(host.triad_elements, 8 << 20);
        assert_eq!(host.gemm_sizes, [32, 64, 128, 256, 512, 1024]);
        let gpu = default_request(DeviceSelector::Cuda(Some(0)), vec![Precision::Fp32], 8192);
        assert!(gpu.gemm_shapes.contains(&[32768, 8192, 8192]));
        assert_eq!(gpu.gemm_shapes.len(), 5 * 5 * 5);
        let largest = gpu.conv_grid.iter().map(ConvShape::flops).fold(0.0, f64::max);
        assert!(largest > 1.5e12, "{largest}");
        assert!(gpu.triad_elements * 12 > 600 << 20);
        assert!(gpu.grids_at_every_precision && !host.grids_at_every_precision);
        // A smaller --max-gemm trims the sides, never below 1024.
        let quick = default_request(DeviceSelector::Cuda(None), vec![Precision::Fp32], 256);
        assert!(quick.gemm_shapes.iter().all(|s| s[1] <= 1024 && s[2] <= 1024));
        assert!(quick.gemm_shapes.contains(&[32768, 1024, 1024]));
    }

    /// Each kernel class's outputs fall on the 3 x 3 grid's sides (the fit reads the grid's rate there), its
    /// FLOPs are its windows' (a transposed one's, its inputs'), and every class is measured at batch 1 at least.
    #[test]
    fn the_kernel_classes_land_on_the_grid_and_count_their_windows() {
        let down = ConvShape { n: 2, c: 8, hw: 32, k: 16, r: 4, stride: 2, transposed: false };
        assert_eq!((down.padding(), down.output_side()), (1, 16));
        assert_eq!(down.flops(), 2.0 * (2 * 16 * 16 * 16 * 8 * 16) as f64);
        let up = ConvShape { transposed: true, ..down };
        assert_eq!(up.output_side(), 64);
        assert_eq!(up.flops(), 2.0 * (2 * 16 * 32 * 32 * 8 * 16) as f64);
        let stem = ConvShape { r: 7, ..down };
        assert_eq!((stem.padding(), stem.output_side()), (3, 16));
        assert_eq!(ConvShape { r: 1, ..down }.output_side(), 16);
        assert_eq!(ConvShape::square(1, 3, 32, 16, 3).output_side(), 32);
        let classes = conv_class_grid();
        for (r, stride, transposed) in CONV_CLASSES {
            let of = classes.iter().filter(|s| (s.r, s.stride, s.transposed) == (r, stride, transposed));
            assert!(of.clone().any(|s| s.n == 1), "{r} {stride} {transposed}");
            assert!(of.clone().all(|s| CONV_SIDES.contains(&s.output_side())), "{r} {stride} {transposed}");
        }
        assert!(classes.iter().all(|s| s.n == 1 || s.flops() <= CONV_MAX_FLOPS));
        let wide: Vec<_> = classes.iter().filter(|s| s.c > CONV_CHANNELS[CONV_CHANNELS.len() - 1]).collect();
        assert_eq!(wide.len(), CONV_CLASSES.len(), "one point past the grid's channels per class");
        assert!(wide.iter().all(|s| s.n == 1 && s.hw == CONV_CLASS_SIDES[0] && s.flops() < 2.2e9));
    }

    /// The host's convolution grid measures every channel count and side at batches 1 and 2 (the fit's
    /// condition for reading the batch as an axis of its own) and nothing past its FLOPs bound but batch 1.
    #[test]
    fn the_host_conv_grid_has_the_batch_as_an_axis_within_its_bound() {
        let grid = conv_grid();
        for c in CONV_CHANNELS {
            for hw in CONV_SIDES {
                for n in [1, 2] {
                    assert!(grid.contains(&ConvShape::square(n, c, hw, c, 3)), "c {c} side {hw} batch {n}");
                }
            }
        }
        assert!(grid.iter().all(|s| s.n == 1 || s.flops() <= CONV_MAX_FLOPS));
        assert!(grid.iter().any(|s| s.n == 64 && s.c == 32));
        assert!(grid.len() < 120, "{}", grid.len());
    }
}
