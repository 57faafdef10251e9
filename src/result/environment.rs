//! The environment manifest of a result: the machine, software, devices, process and scheduler a run had, enough
//! to reproduce or audit it (`src/manifest.rs` fills it in).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_contract::DeviceInfo;

use super::sampled::Sampled;

/// The environment manifest: enough to reproduce or audit the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// trainbench version (Cargo package version).
    pub trainbench_version: String,
    /// Git commit trainbench was built from (`unknown` outside a git checkout).
    pub git_commit: String,
    /// SHA-256 (hex) of `spec_canonical`.
    pub spec_sha256: String,
    /// The spec in canonical form (the spec stage's canonical TOML: every field written out with defaults
    /// filled in and `--set` overrides applied, in a fixed order), so layout, comments and spelled-out defaults
    /// do not change the hash.
    pub spec_canonical: String,
    /// Library versions the backend ran with (`libtorch`, `cuda`, `cudnn`, `burn`, `wgpu`, ...).
    pub library_versions: BTreeMap<String, String>,
    /// The device the run used, as the backend described it.
    pub device: Option<DeviceInfo>,
    /// GPUs seen through NVML, or why none could be listed.
    pub gpus: Sampled<GpuInventory>,
    /// The host CPU.
    pub cpu: CpuInfo,
    /// Operating system.
    pub os: OsInfo,
    /// Host name.
    pub hostname: String,
    /// Environment variables that change performance (CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS, TORCH_*, ...),
    /// as set for the run; unset ones are left out.
    pub env_vars: BTreeMap<String, String>,
    /// Seed of weights and synthetic data.
    pub seed: u64,
    /// When the run started, RFC 3339 UTC.
    pub started_at: String,
    /// When the run ended, RFC 3339 UTC.
    pub finished_at: String,
    /// The operating-system process that trained the run (absent in results written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessInfo>,
    /// The batch-scheduler job the run was trained in (an array task of `trainbench run --on slurm`, or any run
    /// started inside a Slurm job); absent outside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerJob>,
}

/// A batch scheduler's job, as its variables describe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulerJob {
    /// The scheduler: `slurm`.
    pub kind: String,
    /// The job id (`SLURM_JOB_ID`).
    pub job_id: String,
    /// Of an array task, the array's job id (`SLURM_ARRAY_JOB_ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<String>,
    /// Of an array task, its index (`SLURM_ARRAY_TASK_ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<String>,
    /// The nodes the job was given (`SLURM_JOB_NODELIST`, Slurm's compressed list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// The partition (`SLURM_JOB_PARTITION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The cluster (`SLURM_CLUSTER_NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// The process a run was trained in: tells `compare` whether a configuration's repeats sampled the noise between
/// processes (one process each) or only the noise within one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessInfo {
    /// Operating-system process id.
    pub pid: u32,
    /// True when the run's repeat had a fresh process of its own (`run.isolation = "process"` with repeats).
    pub own_process_per_repeat: bool,
}

/// NVIDIA driver and GPUs seen through NVML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuInventory {
    /// Driver version.
    pub driver_version: String,
    /// CUDA version the driver supports (`12.4`), if NVML reports it.
    pub cuda_driver_version: Option<String>,
    /// Devices in NVML index order.
    pub devices: Vec<GpuDevice>,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuDevice {
    /// NVML index.
    pub index: u32,
    /// Product name.
    pub name: String,
    /// Total memory, bytes.
    pub memory_bytes: u64,
    /// PCI bus id (`00000000:17:00.0`), which names the GPU to CUDA too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

/// Host CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CpuInfo {
    /// Model name (`/proc/cpuinfo` `model name`), or `unknown`.
    pub model: String,
    /// Logical cores available to the process.
    pub logical_cores: usize,
    /// Total physical memory, bytes, if known.
    pub memory_bytes: Option<u64>,
    /// The instruction-set flags that decide which CPU kernels can run (`avx2`, `avx512f`, `amx_bf16`, ...),
    /// those of the contract crate's recorded list that the host has, in the kernel's spelling (empty in results
    /// written before they were recorded).
    #[serde(default)]
    pub features: Vec<String>,
    /// The `ONEDNN_MAX_CPU_ISA` (or `DNNL_MAX_CPU_ISA`) cap on oneDNN's instruction sets in effect for the run,
    /// upper-cased; absent when none was set.
    #[serde(default)]
    pub onednn_isa_cap: Option<String>,
    /// The highest instruction-set level oneDNN could use for the run, in oneDNN's spelling
    /// (`AVX2`, `AVX512_CORE`, `AVX512_CORE_BF16`, `AVX512_CORE_AMX`), after the cap; absent when the host has
    /// none of them (or the result predates it).
    #[serde(default)]
    pub isa: Option<String>,
}

/// Operating system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OsInfo {
    /// OS family (`linux`, `macos`, `windows`).
    pub family: String,
    /// Distribution name (`/etc/os-release` `PRETTY_NAME`), if known.
    pub distribution: Option<String>,
    /// Kernel release (`uname -r`), if known.
    pub kernel: Option<String>,
    /// CPU architecture (`x86_64`, `aarch64`).
    pub arch: String,
}
