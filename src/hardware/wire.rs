//! Hardware profiles as written in TOML (`hardware/*.toml`): the wire types, format versions 1 and 2. Doc
//! comments here become the descriptions of `schema/hardware.schema.json`. Version 2 adds `[fitted]`: the
//! coefficients the model reads, fitted from `[calibration]` when `trainbench calibrate` wrote the file; a
//! version 1 profile is fitted once, when it is loaded (`super::load`). The names a calibration records are the
//! model's typed names ([`ElementwiseClass`], [`NodeClass`], [`OptimizerKind`]) from the moment the file is read.
//!
//! A profile describes one machine as the performance model sees it: the device's peak FLOP/s per precision,
//! its memory bandwidth and capacity, the link between host and device, the link between the devices of one
//! machine and the network between machines; optionally the links a what-if may switch to, and what
//! `trainbench calibrate` measured on the machine. Figures are per device and per direction.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_graph::Precision;

pub use super::load_mark::LoadMark;
use crate::predict::price_classes::{ElementwiseClass, NodeClass, OptimizerKind};
use crate::predict::rates::Fitted;

/// One hardware profile. The top-level `kind = "hardware"` tells it apart from a spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "trainbench hardware profile")]
pub struct HardwareFile {
    /// Profile format version: 1 (measured points only, fitted when loaded) or 2 (the fitted coefficients
    /// stored in `fitted`, as `trainbench calibrate` writes them).
    pub version: u32,
    /// Always `hardware`: marks the file as a hardware profile (specs have no top-level `kind`).
    pub kind: ProfileKind,
    /// Profile name: letters, digits, `-`, `_` and `.` (at most 64 characters).
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub name: String,
    /// What machine this is, and where its figures come from.
    #[serde(default)]
    pub description: String,
    /// The accelerator (or CPU) that trains.
    pub device: DeviceProfile,
    /// Link between host memory and the device (input batches cross it); absent when the device is the host
    /// (a CPU), whose inputs need no copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link: Option<Link>,
    /// Link between the devices of one machine (PCIe through the host, or NVLink); absent for a machine with
    /// one device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_node: Option<Link>,
    /// Network between machines (Ethernet, InfiniBand); absent for a single machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Link>,
    /// Links and devices `trainbench predict --what-if` tries instead of this profile's own.
    #[serde(default, skip_serializing_if = "Alternatives::is_empty")]
    pub alternatives: Alternatives,
    /// What `trainbench calibrate` measured on this machine, and how; absent in datasheet profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// The coefficients the performance model reads, per precision, fitted from `calibration` (and the
    /// device's figures) by `trainbench calibrate`: present in version 2 only. Filled when a version 1 profile is
    /// loaded; a profile whose calibration or device is edited by hand needs them written again (recalibrate,
    /// or drop them and write `version = 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted: Option<Fitted>,
}

/// The marker value of [`HardwareFile::kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileKind {
    /// A hardware profile.
    Hardware,
}

/// The device's compute and memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    /// Product name (`NVIDIA Tesla V100-SXM2-16GB`, or the CPU model).
    #[schemars(length(min = 1))]
    pub name: String,
    /// `gpu` or `cpu`.
    pub kind: DeviceKind,
    /// Peak dense FLOP/s per precision, in TFLOP/s.
    pub peak_tflops: PeakTflops,
    /// Memory bandwidth in GB/s (10^9 bytes per second).
    #[schemars(range(min = 0.0))]
    pub memory_bandwidth_gbs: f64,
    /// Memory capacity in GiB.
    #[schemars(range(min = 0.0))]
    pub memory_gib: f64,
}

/// What kind of device trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    /// A GPU (or another accelerator with its own memory behind a host link).
    Gpu,
    /// The host CPU.
    Cpu,
}

/// Peak dense FLOP/s per precision, TFLOP/s (10^12 FLOP per second; a multiply-add counts 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeakTflops {
    /// fp32 on the general-purpose units (no tensor cores).
    #[schemars(range(min = 0.0))]
    pub fp32: f64,
    /// TF32 tensor-core peak, where the device has one (used for fp32 GEMMs and convolutions when TF32 is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub tf32: Option<f64>,
    /// fp16 peak (tensor cores where present, fp32 accumulation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub fp16: Option<f64>,
    /// bf16 peak (tensor cores where present, fp32 accumulation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub bf16: Option<f64>,
    /// FP8 tensor-core peak (dense), where the device has one (Hopper and later): the rate of a bf16 run's
    /// linear products under `training.float8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub fp8: Option<f64>,
}

impl PeakTflops {
    /// The peak of `precision`, TFLOP/s; `None` where the device has none (fp32 always has one).
    pub fn of(&self, precision: Precision) -> Option<f64> {
        match precision {
            Precision::Fp32 => Some(self.fp32),
            Precision::Fp16 => self.fp16,
            Precision::Bf16 => self.bf16,
        }
    }
}

/// A link: its kind, bandwidth and latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Kind of link.
    pub kind: LinkKind,
    /// What it is, as a reader would say it (`PCIe 3.0 x16`, `NVLink 2 (6 links)`, `25 Gbit Ethernet`).
    #[schemars(length(min = 1))]
    pub name: String,
    /// Generation (PCIe 3/4/5, NVLink 1..4), where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub generation: Option<u32>,
    /// PCIe lanes, where it has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub lanes: Option<u32>,
    /// Usable bandwidth per device and direction, GB/s (10^9 bytes per second; 25 Gbit/s = 3.125 GB/s).
    #[schemars(range(min = 0.0))]
    pub bandwidth_gbs: f64,
    /// One-way latency of a small message, microseconds.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub latency_us: f64,
}

/// The kinds of links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LinkKind {
    /// PCI Express.
    Pcie,
    /// NVIDIA NVLink.
    Nvlink,
    /// Shared host memory (ranks of one CPU machine).
    SharedMemory,
    /// Ethernet.
    Ethernet,
    /// InfiniBand.
    Infiniband,
}

impl LinkKind {
    /// Name as written in profiles.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Pcie => "pcie",
            LinkKind::Nvlink => "nvlink",
            LinkKind::SharedMemory => "shared-memory",
            LinkKind::Ethernet => "ethernet",
            LinkKind::Infiniband => "infiniband",
        }
    }
}

/// What `--what-if` may switch to, besides the strategy, the precision and the other shipped devices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Alternatives {
    /// Other host links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_link: Vec<Link>,
    /// Other links between the devices of one machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intra_node: Vec<Link>,
    /// Other networks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<Link>,
}

impl Alternatives {
    /// True when no alternative is listed.
    pub fn is_empty(&self) -> bool {
        self.host_link.is_empty() && self.intra_node.is_empty() && self.network.is_empty()
    }
}

/// What `trainbench calibrate` measured, and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// How it was measured (backend, library version, threads, repetitions, statistic).
    pub method: String,
    /// When (UTC, RFC 3339).
    pub measured_at: String,
    /// Backend that ran the kernels (`tch`, `mock`).
    pub backend: String,
    /// Device selector measured (`cpu`, `cuda:0`).
    pub device: String,
    /// Fixed cost of one framework operation (dispatch, kernel launch), microseconds: the median time of an
    /// element-wise add of a few elements.
    #[schemars(range(min = 0.0))]
    pub op_overhead_us: f64,
    /// Achieved memory bandwidth of a STREAM-like triad (`a = b + s * c`), GB/s.
    #[schemars(range(min = 0.0))]
    pub triad_gbs: f64,
    /// Achieved host-to-device copy bandwidth (CUDA, pinned memory), GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub host_to_device_gbs: Option<f64>,
    /// Matrix products measured: achieved FLOP/s against work per call (the efficiency curve of GEMMs).
    #[serde(default)]
    pub gemm: Vec<KernelPoint>,
    /// Convolutions measured (forward), the efficiency curve of convolutions.
    #[serde(default)]
    pub conv: Vec<KernelPoint>,
    /// Convolution backward passes measured (input and weight gradients, 2 x the forward's FLOPs), the
    /// efficiency curve of convolutions' backward; without it the forward curve is used.
    #[serde(default)]
    pub conv_backward: Vec<KernelPoint>,
    /// Fused attention kernels (scaled dot-product attention) measured or published: achieved FLOP/s of their
    /// products against the work of one call; without them a fused attention's products follow the GEMM curve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention: Vec<KernelPoint>,
    /// Memory bandwidth by working set: the same add over vectors of several sizes (from a few KiB, inside the
    /// caches, to `triad_gbs`'s, past them). A layer moving a few hundred KiB runs at its cache's speed, not at
    /// the memory's; without these points every size runs at `triad_gbs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bandwidth: Vec<BandwidthPoint>,
    /// Element-wise operations' own cost (dropout, normalisations, softmax, activations, attention's core,
    /// cross-entropy), measured by training a micro-graph with and without the operation through the backend,
    /// at several sizes; without a class, its nodes are priced by bytes over bandwidth alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elementwise: Vec<ElementwisePoint>,
    /// Fixed cost of one graph node in the backend's own training step (dispatch, autograd recording and its
    /// backward node, the backend's per-node work), by node class, measured by training stacks of tiny nodes;
    /// without it every framework operation costs `op_overhead_us`, forward and backward alike.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node: Vec<NodePoint>,
    /// The optimizer step as the backend runs it, by optimizer kind and size of the parameter set; without it
    /// the step is priced as one pass over parameters, gradients and state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optimizer: Vec<OptimizerPoint>,
    /// Matrix products of unequal sides (`[m x k] x [k x n]`: a layer's batch rows against its weights, and
    /// the backward's products), on a grid of sizes; without them every product follows the square `gemm`
    /// curve by its FLOPs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gemm_shapes: Vec<GemmShapePoint>,
    /// Convolutions on a grid of channels and output pixels (3 x 3, stride 1, as many channels out as in),
    /// forward and backward; without them every convolution follows the `conv` curves by its FLOPs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conv_shapes: Vec<ConvShapePoint>,
    /// The machine's load while it was measured (others' load, steal, a probe's spread) against a quiet
    /// machine's limits; `loaded = true` marks a calibration stored with `calibrate --allow-loaded`. Absent in
    /// calibrations written before the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadMark>,
    /// What memory taken afresh from the operating system costs, and from which size on (a CPU's allocator maps
    /// allocations above its threshold on every call); without it no allocation costs more than its bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_memory: Option<FreshMemoryPoint>,
    /// Seconds a square root of a zero element costs beyond a nonzero one's, per element (Adam's second moment
    /// in embedding rows no step has looked up); without it, nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub zero_sqrt_s_per_element: Option<f64>,
}

/// What a fresh allocation costs: one larger than the host allocator keeps for reuse is mapped from the operating
/// system on every call and unmapped when freed, so each call pays its pages' faults and zeroing again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreshMemoryPoint {
    /// The largest allocation measured to be served from memory the process kept, bytes: larger ones are fresh.
    #[schemars(range(min = 0.0))]
    pub reused_up_to_bytes: f64,
    /// Seconds per byte of a fresh allocation beyond writing memory the process kept.
    #[schemars(range(min = 0.0))]
    pub seconds_per_byte: f64,
    /// Fresh memory taken and given back in step-like cycles of gigabytes: what a byte costs beyond
    /// `seconds_per_byte` when the host reclaims memory left free (a virtual machine's free page reporting).
    /// Absent in calibrations before the cycles were measured: no byte costs more than `seconds_per_byte`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycled: Vec<crate::predict::fresh_rates::CycledFreshPoint>,
}

/// One measured convolution: of the 3 x 3 stride-1 grid, or of another kernel class (kernel, stride, transposed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvShapePoint {
    /// Precision it ran at.
    pub precision: Precision,
    /// Input channels (= output channels).
    #[schemars(range(min = 1))]
    pub channels: u64,
    /// Output pixels: batch x height x width.
    #[schemars(range(min = 1))]
    pub pixels: u64,
    /// Batch (images); absent in profiles calibrated before it was recorded, whose grid folds the batch into the
    /// pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub batch: Option<u64>,
    /// Kernel side.
    #[schemars(range(min = 1))]
    pub kernel: u64,
    /// Stride; absent (1) for the 3 x 3 grid and in profiles calibrated before kernel classes were measured.
    #[serde(default = "unit_stride", skip_serializing_if = "is_unit_stride")]
    #[schemars(range(min = 1))]
    pub stride: u64,
    /// Whether it is a transposed convolution (its `pixels` the output's, larger than the input's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transposed: bool,
    /// Median seconds of the forward call, overhead included.
    #[schemars(range(min = 0.0))]
    pub forward_s: f64,
    /// Median seconds of its backward (input and weight gradients), overhead included.
    #[schemars(range(min = 0.0))]
    pub backward_s: f64,
}

fn unit_stride() -> u64 {
    1
}

fn is_unit_stride(stride: &u64) -> bool {
    *stride == 1
}

/// One node class's fixed cost in a training step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodePoint {
    /// The class: `elementwise` (one operation on a few elements: every framework operation's fixed cost),
    /// `linear` (a linear layer with bias on a few elements), `step` (the measured micro-graph's whole step
    /// less its nodes: feeding the batch, summing the loss, starting backward); and layers of real size timed
    /// in the step, from which the model derives how much slower kernels run there than isolated: `conv`
    /// (16 -> 16 channels, 3 x 3, 16 x 16 pixels, batch 64), `conv-small` (4 -> 4 channels, 4 x 4 pixels,
    /// batch 1), `linear-wide` (256 -> 256 on 16 rows per sample, batch 64), `embedding-bag` (a 64 x 8 table
    /// summing 2 ids per sample, batch 64, with its add to a running sum); and `first-<class>` for an
    /// element-wise class: what the first such node of a step costs beyond the next ones (its cold start).
    pub class: NodeClass,
    /// Seconds of the forward phase per node (per step for `step`).
    #[schemars(range(min = 0.0))]
    pub forward_s: f64,
    /// Seconds of the backward phase per node (per step for `step`).
    #[schemars(range(min = 0.0))]
    pub backward_s: f64,
}

/// One measured optimizer step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptimizerPoint {
    /// The optimizer: `sgd` (no momentum), `sgd-momentum`, `sgd-momentum-decay` (SGD with weight decay), `adam`
    /// (Adam and AdamW).
    pub kind: OptimizerKind,
    /// Parameter tensors updated.
    #[schemars(range(min = 1))]
    pub tensors: u64,
    /// Parameters (elements) updated.
    #[schemars(range(min = 1))]
    pub parameters: u64,
    /// Mean seconds of the optimizer phase per step.
    #[schemars(range(min = 0.0))]
    pub seconds: f64,
}

/// One measured product `[m x k] x [k x n]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GemmShapePoint {
    /// Precision it ran at.
    pub precision: Precision,
    /// Rows of the left operand (a layer's batch rows).
    #[schemars(range(min = 1))]
    pub m: u64,
    /// Inner dimension.
    #[schemars(range(min = 1))]
    pub k: u64,
    /// Columns of the right operand.
    #[schemars(range(min = 1))]
    pub n: u64,
    /// Median seconds per call, overhead included.
    #[schemars(range(min = 0.0))]
    pub seconds: f64,
}

/// One element-wise operation class's measured cost for one call on `elements` elements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElementwisePoint {
    /// The class: `dropout`, `layer_norm`, `batch_norm`, `softmax`, `relu` (and other piecewise-linear
    /// activations), `gelu` (and tanh, sigmoid), `attention` (its fused core, by score element) or
    /// `cross_entropy` (by logit). A class may be measured at several sizes; the model interpolates between
    /// them.
    pub op: ElementwiseClass,
    /// Elements of the measured call's output (attention: its scores; cross-entropy: its logits).
    #[schemars(range(min = 0.0))]
    pub elements: f64,
    /// Seconds of one forward call, overhead included.
    #[schemars(range(min = 0.0))]
    pub forward_s: f64,
    /// Seconds of its backward, overhead included.
    #[schemars(range(min = 0.0))]
    pub backward_s: f64,
    /// The precision the micro-graph trained at (absent: fp32, as every calibration before precisions were
    /// measured apart). A precision's coefficients read its own points, else those of the other half precision,
    /// else the fp32 ones (`crate::calibrate::fit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// Attention only: the measured shape, query (= key) positions and features per head (absent: the 16
    /// positions of 16 features of the first calibrations). The model prices an attention node at the measured
    /// shape nearest its own (`crate::predict::rates::Coefficients::attention_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_shape: Option<AttentionShape>,
}

/// The shape of a measured attention: positions of the query (and key) sequence and features per head.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttentionShape {
    /// Query (and key) positions per sample.
    #[schemars(range(min = 1))]
    pub positions: u64,
    /// Features per head.
    #[schemars(range(min = 1))]
    pub head_dim: u64,
}

/// One measured add: the bytes it moved per call (its three vectors) and the median seconds per call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BandwidthPoint {
    /// Bytes moved by one call (3 vectors of 4-byte elements).
    #[schemars(range(min = 0.0))]
    pub bytes: f64,
    /// Median seconds per call, overhead included.
    #[schemars(range(min = 0.0))]
    pub seconds: f64,
    /// Where the figure comes from, when it was not measured by `trainbench calibrate` (a published
    /// micro-benchmark: vendor documentation, a paper, a benchmark's published results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One measured kernel: its shape, work and achieved rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KernelPoint {
    /// Precision it ran at.
    pub precision: Precision,
    /// Shape, as a reader would write it (`m=n=k=256`, `N=8 C=64 H=W=32 K=64 3x3`).
    pub shape: String,
    /// FLOPs of one call (2 x multiply-adds).
    #[schemars(range(min = 0.0))]
    pub flops: f64,
    /// Median seconds per call, overhead included.
    #[schemars(range(min = 0.0))]
    pub seconds: f64,
    /// Where the figure comes from, when it was not measured by `trainbench calibrate` (a published
    /// micro-benchmark: vendor documentation, a paper, a benchmark's published results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}
