//! The calibration contract: what `trainbench calibrate` asks a backend to measure on a device (matrix products
//! and convolutions per precision at several sizes, a STREAM-like triad, the fixed cost of one operation, the
//! host-to-device copy), and what comes back. The performance model reads the result as an efficiency curve.

use serde::{Deserialize, Serialize};

use crate::device::DeviceSelector;
use crate::measured::DeviceInfo;
use trainbench_graph::training::Precision;

/// One convolution shape to time (NCHW input, K filters of R x R, stride 1, same padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvShape {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Height and width.
    pub hw: usize,
    /// Output channels.
    pub k: usize,
    /// Kernel size.
    pub r: usize,
}

impl ConvShape {
    /// FLOPs of the forward convolution (2 x multiply-adds, same padding, stride 1).
    pub fn flops(&self) -> f64 {
        2.0 * (self.n * self.k * self.hw * self.hw * self.c * self.r * self.r) as f64
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FreshMemory {
    /// The largest allocation measured to be served from memory the process kept, bytes: larger ones are fresh.
    pub reused_up_to_bytes: f64,
    /// Seconds per byte an allocation larger than that costs beyond writing memory the process kept (mapping,
    /// page faults, zeroing, unmapping), measured at the largest size.
    pub seconds_per_byte: f64,
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
    /// How it was measured (library and version, threads, repetitions, statistic).
    pub method: String,
}

/// The default request: square GEMMs from 32 to 1024 (at most `max_gemm`), a few convolutions, a triad of
/// 8 M elements (96 MB moved per call, well past the last-level cache), 7 timed calls each.
pub fn default_request(device: DeviceSelector, precisions: Vec<Precision>, max_gemm: usize) -> CalibrationRequest {
    CalibrationRequest {
        device,
        precisions,
        gemm_sizes: [32, 64, 128, 256, 512, 1024].into_iter().filter(|&s| s <= max_gemm).collect(),
        gemm_shapes: gemm_shape_grid(max_gemm),
        conv_grid: conv_grid(),
        conv_shapes: vec![
            ConvShape { n: 1, c: 3, hw: 32, k: 16, r: 3 },
            ConvShape { n: 8, c: 16, hw: 32, k: 16, r: 3 },
            ConvShape { n: 8, c: 64, hw: 16, k: 64, r: 3 },
            ConvShape { n: 16, c: 64, hw: 32, k: 64, r: 3 },
            ConvShape { n: 8, c: 256, hw: 14, k: 256, r: 3 },
        ],
        triad_elements: 8 << 20,
        repeats: 7,
        cpu_threads: None,
        cpu_clock: false,
        fresh_memory: true,
    }
}

/// Rows of the products of [`gemm_shape_grid`]: a batch of 1 to several thousand rows (batch x positions).
pub const GEMM_ROWS: [usize; 5] = [1, 8, 64, 512, 4096];
/// Inner and output sides of the products of [`gemm_shape_grid`]: a layer's features.
pub const GEMM_SIDES: [usize; 4] = [16, 64, 256, 1024];

/// The grid of unequal products: every row count of [`GEMM_ROWS`] against every pair of sides of
/// [`GEMM_SIDES`] (sides above `max_gemm` left out).
pub fn gemm_shape_grid(max_gemm: usize) -> Vec<[usize; 3]> {
    let sides: Vec<usize> = GEMM_SIDES.into_iter().filter(|&s| s <= max_gemm.max(GEMM_SIDES[0])).collect();
    let mut v = Vec::new();
    for m in GEMM_ROWS {
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
/// (batch, height = width) of the convolutions of [`conv_grid`]: 256, 4,096, 32,768 and 131,072 output pixels
/// (the largest past a core's caches for a few channels: a small network's first stage at batch 64-128).
pub const CONV_PIXELS: [(usize, usize); 4] = [(1, 16), (4, 32), (32, 32), (128, 32)];
/// Channels up to which the largest pixel count of [`CONV_PIXELS`] is measured (beyond it a call takes seconds
/// and the rate no longer changes with size).
pub const CONV_LARGE_MAX_CHANNELS: usize = 32;

/// The convolution grid: 3 x 3, stride 1, same padding, every channel count of [`CONV_CHANNELS`] at every size
/// of [`CONV_PIXELS`].
pub fn conv_grid() -> Vec<ConvShape> {
    let mut v = Vec::new();
    for c in CONV_CHANNELS {
        for (n, hw) in CONV_PIXELS.into_iter().filter(|&(n, _)| n < 128 || c <= CONV_LARGE_MAX_CHANNELS) {
            v.push(ConvShape { n, c, hw, k: c, r: 3 });
        }
    }
    v
}
