//! Spec version 1 as written in TOML: the wire types. Doc comments here become the JSON Schema's descriptions.

pub use super::wire_mlperf::{MlperfBenchmark, MlperfDivision, MlperfSpec, MlperfStatus};
pub use super::wire_topology::{BackendChoice, Interconnect, Isolation, Strategy, TopologyOverride, TopologySpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
pub use trainbench_contract::target::TargetMetric;
use trainbench_contract::target::{EvalEvery, TargetPlan};
use trainbench_graph::{ModelSpec, OptimizerSpec, Precision};

/// One benchmark: a model, its data, how it trains, what to sweep, where it runs and what to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "trainbench spec v1")]
pub struct SpecFile {
    /// Spec format version; must be 1.
    pub version: u32,
    /// Benchmark name: letters, digits, `-`, `_` and `.`, starting with a letter or digit (at most 64
    /// characters); used in run ids and result file names.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub name: String,
    /// What the benchmark measures and why.
    #[serde(default)]
    pub description: String,
    /// Free-form tags for selecting and grouping benchmarks.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The model to train.
    pub model: ModelSpec,
    /// The data fed to the model.
    #[serde(default)]
    pub dataset: DatasetSpec,
    /// Optimizer, loss scaling, precision and seed.
    #[serde(default)]
    pub training: TrainingSpec,
    /// Values to sweep; runs are the product of all lists.
    #[serde(default)]
    pub sweep: SweepSpec,
    /// Devices, nodes, parallelism strategy and backend.
    #[serde(default)]
    pub topology: TopologySpec,
    /// Warm-up, measurement budget, repeats and timeout.
    #[serde(default)]
    pub run: RunSpec,
    /// Metric groups to collect.
    #[serde(default)]
    pub metrics: MetricsSpec,
    /// An MLPerf Training log for every run: the submission fields and where the log goes (docs/mlperf.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlperf: Option<MlperfSpec>,
}

/// Where the training data comes from. Never downloaded.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    /// `synthetic` (generated on the device from the seed), `local` (read from `path`) or `clicks` (click
    /// samples with a learnable signal, generated on the host).
    #[serde(default)]
    pub source: DataSource,
    /// Informational dataset name the synthetic data stands in for (`imagenet`, `wmt14-en-de`, ...).
    #[serde(default)]
    pub name: Option<String>,
    /// Override of the per-sample input shape the model expects, e.g. `[3, 224, 224]`; must match the model.
    #[serde(default)]
    #[schemars(length(min = 1), inner(range(min = 1)))]
    pub input_shape: Option<Vec<usize>>,
    /// Override of the number of classes / vocabulary the labels range over; must match the model.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub classes: Option<usize>,
    /// Path to a local dataset (required when `source = "local"`), relative to the spec file.
    #[serde(default)]
    pub path: Option<String>,
    /// Format of the local dataset.
    #[serde(default)]
    pub format: Option<DataFormat>,
    /// Samples held by the synthetic dataset (cycled); larger values exercise memory more. With `source =
    /// "clicks"`: the clicks generated (evaluation split included; 8192 by default).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub samples: Option<u64>,
    /// Host threads reading and decoding batches ahead of training (local datasets); 0 (the default) reads
    /// each batch on the training thread when it is needed.
    #[serde(default)]
    #[schemars(range(max = 256))]
    pub workers: Option<u32>,
    /// Most batches the reading threads hold ahead of training (local datasets, `workers` > 0); default twice
    /// `workers`.
    #[serde(default)]
    #[schemars(range(min = 1, max = 4096))]
    pub prefetch: Option<u32>,
    /// What a sample that cannot be read (a corrupt file) does to a run: `fail` (the default) fails the run
    /// naming the file; `skip` counts it (recorded in the result) and takes the next sample in its place.
    #[serde(default)]
    pub on_error: Option<OnDataError>,
    /// The evaluation split of a run with a target (`[training.target]`): a dataset of the same `format` at this
    /// path, relative to the spec file. Exclusive with `eval_fraction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_path: Option<String>,
    /// The evaluation split of a run with a target, held out of `path`: this fraction of its samples (the last
    /// ones), never trained on. Exclusive with `eval_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub eval_fraction: Option<f64>,
}

/// What a sample that cannot be read does to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDataError {
    /// Fail the run, naming the file.
    #[default]
    Fail,
    /// Count the sample as skipped and go on with the next one.
    Skip,
}

/// Data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataSource {
    /// Random tensors of the right shapes, generated from the seed.
    #[default]
    Synthetic,
    /// Files on disk.
    Local,
    /// Synthetic clicks with a learnable signal, for click models (`family = "dlrm"`): dense features and
    /// categorical ids drawn from a fixed seed, each click drawn from a fixed seeded rule of them plus noise
    /// (`dataset.samples` of them, 8192 by default; `dataset.eval_fraction` held out for a target).
    Clicks,
}

/// Local dataset formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DataFormat {
    /// A folder holding `inputs.npy` (`[samples, ..input shape]`: float32, float16 or uint8 for real-valued
    /// inputs, uint8 scaled by 1/255; int64, int32 or uint8 token ids for token models) and `labels.npy`
    /// (`[samples, ..label shape]`, int64, int32 or uint8 class ids). C order, little-endian; memory-mapped.
    Npy,
    /// A folder of images, one sub-folder per class (classes in sorted name order), JPEG or PNG; each sample
    /// decoded and put through the ImageNet training transform: random-resized crop to the model's `[3, H, W]`,
    /// horizontal flip, ImageNet mean/std normalisation; seeded per epoch and sample.
    ImageFolder,
    /// A folder holding `inputs.f32` (little-endian float32 samples of the model's input shape, back to back,
    /// no header) and `labels.i64` (little-endian int64 labels of the label shape, one per sample for a
    /// classifier); memory-mapped.
    RawF32,
    /// CIFAR-10's binary version: a folder of `data_batch_*.bin` files of 3,073-byte records (label byte,
    /// then 3x32x32 pixels as red, green and blue planes); pixels scaled to [0, 1] and normalised with the
    /// CIFAR-10 channel means and deviations. The model takes 3x32x32 images.
    #[serde(rename = "cifar10")]
    Cifar10,
}

impl DataFormat {
    /// The name written in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            DataFormat::Npy => "npy",
            DataFormat::ImageFolder => "image-folder",
            DataFormat::RawF32 => "raw-f32",
            DataFormat::Cifar10 => "cifar10",
        }
    }
}

/// How the model trains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainingSpec {
    /// Optimizer and its settings (`kind = "sgd" | "adam" | "adamw"`).
    #[serde(default)]
    pub optimizer: OptimizerSpec,
    /// Precision when not swept.
    #[serde(default)]
    pub precision: Precision,
    /// Seed for weights and synthetic data; repeats use seed + repeat index.
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Initial dynamic loss scale of fp16 runs on CUDA; a value other than the default is refused for a spec with
    /// no fp16 run on a CUDA device.
    #[serde(default = "d_loss_scale")]
    pub loss_scale: f64,
    /// Let cuDNN pick the fastest convolution algorithms (CUDA only; `false` is refused on other devices).
    #[serde(default = "d_true")]
    pub cudnn_benchmark: bool,
    /// TF32 for fp32 work on CUDA (compute capability 8.0 and later): `matmul` (cuBLAS, PyTorch's
    /// `torch.backends.cuda.matmul.allow_tf32`, default false) and `cudnn` (convolutions and recurrent layers,
    /// `torch.backends.cudnn.allow_tf32`, default true), PyTorch's defaults when left out. CUDA devices only:
    /// refused on others. The result records what the run used, and FLOP utilisation is measured against the
    /// TF32 tensor-core peak when either is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32: Option<trainbench_contract::Tf32>,
    /// FP8 for the linear layers' products of a bf16 run (TorchTitan's and torchao's Float8 training: e4m3
    /// forward, e5m2 gradients, dynamic scaling); false when left out. Refused unless every run is bf16.
    /// `predict` prices the linear products at the profile's FP8 peak and curve (refused on a device without
    /// one); `run` refuses it (no backend has FP8 kernels yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float8: Option<bool>,
    /// Train to a target (time-to-accuracy) instead of for `run.iterations`: the run evaluates the evaluation
    /// split as often as this says and stops when the metric reaches the value or a budget runs out. Needs a
    /// local dataset and an evaluation split (`dataset.eval_path` or `dataset.eval_fraction`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetSpec>,
    /// Activation checkpointing of the model's recomputable blocks (the layers of `gpt` and `vit`): `none`
    /// (the default) keeps every activation, `full` recomputes every block's forward in the backward pass,
    /// `every_n` one block in every `checkpoint_every`.
    #[serde(default, skip_serializing_if = "CheckpointingMode::is_none")]
    pub activation_checkpointing: CheckpointingMode,
    /// With `activation_checkpointing = "every_n"`: recompute blocks 0, n, 2n, ... (at least 1); refused with
    /// any other mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub checkpoint_every: Option<u32>,
    /// Micro-batches whose gradients accumulate into one optimizer step (1, the default: none). Each
    /// micro-batch holds the swept batch size, so a step trains on `grad_accumulation x batch_size` samples.
    #[serde(default = "d_one_u32", skip_serializing_if = "is_one_u32")]
    #[schemars(range(min = 1))]
    pub grad_accumulation: u32,
    /// LoRA fine-tuning: the model's weights frozen, low-rank adapters of `rank` trained on the `targets`
    /// projections (`q`, `k`, `v`, `o`, `gate`, `up`, `down`), scaled by `alpha / rank`, with `dropout` on
    /// their input. The tch backend trains it; wgpu refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<trainbench_graph::lora::LoraSpec>,
}

/// How much of the forward pass activation checkpointing recomputes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointingMode {
    /// Keep every activation.
    #[default]
    None,
    /// Recompute every block.
    Full,
    /// Recompute one block in every `checkpoint_every`.
    EveryN,
}

impl CheckpointingMode {
    /// Whether it is `none` (left out when serialized).
    pub fn is_none(&self) -> bool {
        *self == CheckpointingMode::None
    }
    /// Name as written in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointingMode::None => "none",
            CheckpointingMode::Full => "full",
            CheckpointingMode::EveryN => "every_n",
        }
    }
}

/// A training target: metric, value, evaluation cadence and the budget that ends a run that never reaches it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// `accuracy` (classification accuracy on the evaluation split, reached when at least `value`; needs a
    /// model with a cross-entropy loss) or `loss` (mean loss on the evaluation split, reached when at most
    /// `value`).
    pub metric: TargetMetric,
    /// The value to reach.
    pub value: f64,
    /// Evaluate every this many training steps (exclusive with `eval_every_epochs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub eval_every_steps: Option<u64>,
    /// Evaluate every this many epochs of the training split (exclusive with `eval_every_steps`; the default
    /// is every epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub eval_every_epochs: Option<u64>,
    /// Give up after this many epochs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_epochs: Option<u64>,
    /// Give up after this many training steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_steps: Option<u64>,
    /// Give up after this many seconds of training and evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
}

impl TargetSpec {
    /// The target as a run plan carries it (cadence in steps or epochs; every epoch when neither is given).
    pub fn plan(&self) -> TargetPlan {
        TargetPlan {
            metric: self.metric,
            value: self.value,
            every: match (self.eval_every_steps, self.eval_every_epochs) {
                (Some(n), _) => EvalEvery::Steps(n),
                (None, n) => EvalEvery::Epochs(n.unwrap_or(1)),
            },
            max_epochs: self.max_epochs,
            max_steps: self.max_steps,
            max_seconds: self.max_seconds,
        }
    }
}

impl Default for TrainingSpec {
    fn default() -> Self {
        Self {
            optimizer: OptimizerSpec::default(),
            precision: Precision::Fp32,
            seed: d_seed(),
            loss_scale: d_loss_scale(),
            cudnn_benchmark: true,
            tf32: None,
            float8: None,
            target: None,
            activation_checkpointing: CheckpointingMode::None,
            lora: None,
            checkpoint_every: None,
            grad_accumulation: 1,
        }
    }
}

impl TrainingSpec {
    /// The numerical settings every planned run carries (TF32 switches, cuDNN autotuning, initial loss scale,
    /// FP8 products).
    pub fn numerics(&self) -> trainbench_contract::Numerics {
        trainbench_contract::Numerics {
            tf32: self.tf32.unwrap_or_default(),
            cudnn_benchmark: self.cudnn_benchmark,
            loss_scale: self.loss_scale,
            float8: self.float8.unwrap_or(false),
        }
    }
}

impl TrainingSpec {
    /// The step schedule every planned run carries (checkpointing and accumulation); `every_n` without its
    /// `checkpoint_every` (refused by the rules) is read as 1.
    pub fn schedule(&self) -> trainbench_graph::training::StepSchedule {
        use trainbench_graph::training::Checkpointing;
        let checkpointing = match self.activation_checkpointing {
            CheckpointingMode::None => Checkpointing::None,
            CheckpointingMode::Full => Checkpointing::Full,
            CheckpointingMode::EveryN => Checkpointing::EveryN { n: self.checkpoint_every.unwrap_or(1).max(1) },
        };
        trainbench_graph::training::StepSchedule { checkpointing, grad_accumulation: self.grad_accumulation.max(1) }
    }
}

fn d_one_u32() -> u32 {
    1
}
fn is_one_u32(v: &u32) -> bool {
    *v == 1
}
fn d_seed() -> u64 {
    42
}
fn d_loss_scale() -> f64 {
    trainbench_contract::Numerics::DEFAULT_LOSS_SCALE
}
fn d_true() -> bool {
    true
}

/// Sweep axes; the runs are their product (batch x precision x topology x repeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Global batch sizes to run.
    #[serde(default = "d_batches")]
    #[schemars(length(min = 1), inner(range(min = 1)))]
    pub batch_sizes: Vec<usize>,
    /// Precisions to run; defaults to `training.precision`.
    #[serde(default)]
    pub precisions: Vec<Precision>,
    /// Topologies to run, each overriding fields of `[topology]`; defaults to `[topology]` alone.
    #[serde(default)]
    pub topologies: Vec<TopologyOverride>,
}

impl Default for SweepSpec {
    fn default() -> Self {
        Self { batch_sizes: d_batches(), precisions: Vec::new(), topologies: Vec::new() }
    }
}

fn d_batches() -> Vec<usize> {
    vec![32]
}

/// How long each run lasts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Iterations run and discarded before measuring (graph capture, autotuning, caches).
    #[serde(default = "d_warmup")]
    pub warmup: u64,
    /// Measured iterations; ignored when `time_budget_s` is set.
    #[serde(default = "d_iterations")]
    #[schemars(range(min = 1))]
    pub iterations: u64,
    /// Measure for this many seconds instead of a fixed number of iterations.
    #[serde(default)]
    pub time_budget_s: Option<f64>,
    /// Independent repeats of each configuration (fresh weights from seed + repeat).
    #[serde(default = "d_repeats")]
    #[schemars(range(min = 1))]
    pub repeats: u32,
    /// Where repeats run: `process` gives each repeat a fresh process of its own (its own allocator, thread
    /// pools and caches), so repeats sample the run-to-run noise between processes that `compare` must see, and
    /// a run with a `timeout_s` that hangs inside the backend is killed; `shared` runs everything in the
    /// `trainbench run` process (faster to start, narrower intervals, no hard timeout).
    #[serde(default)]
    pub isolation: Isolation,
    /// Intra-op CPU threads the backend may use (tch: `torch.set_num_threads`, for CPU kernels and the CPU side
    /// of GPU runs); unset keeps the library's default, one per core. Pinning it makes CPU step times
    /// repeatable where threads compete for a few cores. The wgpu backend does not use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub cpu_threads: Option<u32>,
    /// Stop a run after this many seconds, keeping what it measured.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Synchronise the device between phases so data/forward/backward/optimizer times are exact.
    #[serde(default = "d_true")]
    pub phase_timing: bool,
    /// Sampling period of the background collectors (GPU, CPU), in milliseconds.
    #[serde(default = "d_sample_ms")]
    #[schemars(range(min = 1))]
    pub sample_interval_ms: u64,
}

impl Default for RunSpec {
    fn default() -> Self {
        Self {
            warmup: d_warmup(),
            iterations: d_iterations(),
            time_budget_s: None,
            repeats: d_repeats(),
            isolation: Isolation::default(),
            cpu_threads: None,
            timeout_s: None,
            phase_timing: true,
            sample_interval_ms: d_sample_ms(),
        }
    }
}

fn d_warmup() -> u64 {
    10
}
fn d_iterations() -> u64 {
    50
}
fn d_repeats() -> u32 {
    1
}
fn d_sample_ms() -> u64 {
    100
}

/// Metric groups to collect; all are on by default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsSpec {
    /// Groups to collect; an empty list means all of them.
    #[serde(default)]
    pub collect: Vec<MetricGroup>,
}

/// A group of related metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MetricGroup {
    /// Samples (and tokens) per second.
    Throughput,
    /// Step-time statistics.
    StepTime,
    /// Data / forward / backward / communication / optimizer shares.
    Phases,
    /// GPU compute utilisation from NVML.
    GpuUtilization,
    /// Peak and used device memory.
    Memory,
    /// Memory split into weights, gradients, optimizer state, activations and workspace.
    MemoryBreakdown,
    /// Power draw and energy (NVML).
    PowerEnergy,
    /// Process CPU utilisation and resident memory.
    CpuUtilization,
    /// Achieved FLOP/s over the device peak.
    FlopUtilization,
    /// Training loss at the first and last measured step.
    Loss,
}
