//! The environment manifest of a run: build identity, canonical spec and its hash, host CPU, OS, GPUs (NVML),
//! performance-relevant environment variables and RFC 3339 timestamps.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use trainbench_contract::{CpuFeatures, DeviceInfo, RawMeasurements};

use crate::digest::sha256_hex;
use crate::result::{CpuInfo, Environment, OsInfo, ProcessInfo, SchedulerJob};

/// trainbench's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Git commit trainbench was built from (set by `build.rs`; `-dirty` when tracked files had changes).
pub fn git_commit() -> &'static str {
    option_env!("TRAINBENCH_GIT_COMMIT").filter(|s| !s.is_empty()).unwrap_or("unknown")
}

/// Environment variables recorded when set: exact names, then prefixes.
const ENV_NAMES: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "KMP_AFFINITY",
    "RAYON_NUM_THREADS",
    "LD_LIBRARY_PATH",
    "PYTORCH_CUDA_ALLOC_CONF",
    "WGPU_BACKEND",
    "WGPU_ADAPTER_NAME",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_VERBOSE",
];
const ENV_PREFIXES: &[&str] = &["LIBTORCH", "TORCH_", "NVIDIA_", "NCCL_", "CUDNN_", "TRAINBENCH_"];

/// The performance-relevant environment variables that are set (see `ENV_NAMES` and `ENV_PREFIXES`).
pub fn relevant_env_vars() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| ENV_NAMES.contains(&k.as_str()) || ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
        .collect()
}

/// Days since 1970-01-01 -> (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st
    let mp = (5 * doy + 2) / 153; // month index from March
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Format a time as RFC 3339 UTC with millisecond precision: `2026-11-30T01:02:03.456Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (y, mo, da) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{mo:02}-{da:02}T{:02}:{:02}:{:02}.{:03}Z", s / 3600, s % 3600 / 60, s % 60, d.subsec_millis())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Host CPU from `/proc/cpuinfo` and `/proc/meminfo`, with its instruction-set features and oneDNN cap
/// ([`CpuFeatures::host`]).
pub fn cpu_info() -> CpuInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string()).filter(|v| !v.is_empty())
        })
    };
    let model = field("model name").or_else(|| field("Model")).or_else(|| field("Hardware"));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_bytes = meminfo.lines().find_map(|l| {
        let kb: u64 = l.strip_prefix("MemTotal:")?.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    });
    let features = CpuFeatures::host();
    CpuInfo {
        model: model.unwrap_or_else(|| "unknown".into()),
        logical_cores: crate::metrics::cpu::available_cores(),
        memory_bytes,
        features: features.flags().to_vec(),
        onednn_isa_cap: features.onednn_cap().map(str::to_string),
        isa: features.best().map(|isa| isa.onednn_name().to_string()),
    }
}

/// Operating system.
pub fn os_info() -> OsInfo {
    let distribution = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())));
    OsInfo {
        family: std::env::consts::OS.to_string(),
        distribution,
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
    }
}

/// Host name (`/proc/sys/kernel/hostname`, `/etc/hostname`, `$HOSTNAME`), or `unknown`.
pub fn hostname() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
        .or_else(|| read_trimmed("/etc/hostname"))
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// Everything the manifest needs that is known before the run.
#[derive(Debug, Clone)]
pub struct ManifestInput<'a> {
    /// Canonical spec text.
    pub spec_canonical: &'a str,
    /// Seed of the run.
    pub seed: u64,
    /// When the run started.
    pub started: SystemTime,
    /// When it ended.
    pub finished: SystemTime,
    /// The device used, when known (from the measurements or the backend's device list).
    pub device: Option<DeviceInfo>,
    /// The process that trained the run.
    pub process: ProcessInfo,
}

/// Build the environment manifest of a run; `raw` supplies library versions (and the device) when the
/// backend got far enough to report them.
pub fn environment(input: ManifestInput<'_>, raw: Option<&RawMeasurements>) -> Environment {
    Environment {
        trainbench_version: VERSION.to_string(),
        git_commit: git_commit().to_string(),
        spec_sha256: sha256_hex(input.spec_canonical),
        spec_canonical: input.spec_canonical.to_string(),
        library_versions: raw.map(|r| r.versions.clone()).unwrap_or_default(),
        device: raw.and_then(|r| r.device.clone()).or(input.device),
        gpus: crate::metrics::nvml::inventory(),
        cpu: cpu_info(),
        os: os_info(),
        hostname: hostname(),
        env_vars: relevant_env_vars(),
        seed: input.seed,
        started_at: rfc3339(input.started),
        finished_at: rfc3339(input.finished),
        process: Some(input.process),
        scheduler: scheduler_job(|name| std::env::var(name).ok()),
    }
}

/// The Slurm job this process runs in, from its variables (`var` looks one up); `None` outside a job.
pub fn scheduler_job(var: impl Fn(&str) -> Option<String>) -> Option<SchedulerJob> {
    let get = |name: &str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    Some(SchedulerJob {
        kind: "slurm".into(),
        job_id: get("SLURM_JOB_ID")?,
        array_job_id: get("SLURM_ARRAY_JOB_ID"),
        array_task_id: get("SLURM_ARRAY_TASK_ID"),
        nodes: get("SLURM_JOB_NODELIST"),
        partition: get("SLURM_JOB_PARTITION"),
        cluster: get("SLURM_CLUSTER_NAME"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_slurm_job_is_read_from_its_variables() {
        assert_eq!(scheduler_job(|_| None), None);
        let vars = [
            ("SLURM_JOB_ID", "17"),
            ("SLURM_ARRAY_JOB_ID", "12"),
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_JOB_NODELIST", "n[1-2]"),
        ];
        let job = scheduler_job(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string())).unwrap();
        assert_eq!((job.kind.as_str(), job.job_id.as_str()), ("slurm", "17"));
        assert_eq!((job.array_job_id.as_deref(), job.array_task_id.as_deref()), (Some("12"), Some("3")));
        assert_eq!((job.nodes.as_deref(), job.partition.as_deref()), (Some("n[1-2]"), None));
    }

    #[test]
    fn rfc3339_known_instants() {
        let at = |s: u64, ms: u64| rfc3339(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a century leap year) 12:34:56.789
        assert_eq!(at(951_827_696, 789), "2000-02-29T12:34:56.789Z");
        // 2024-12-31T23:59:59 and the next second
        assert_eq!(at(1_735_689_599, 0), "2024-12-31T23:59:59.000Z");
        assert_eq!(at(1_735_689_600, 0), "2025-01-01T00:00:00.000Z");
        // 2100-03-01 (2100 is not a leap year)
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn host_facts_are_filled() {
        let cpu = cpu_info();
        assert!(cpu.logical_cores >= 1);
        if cfg!(target_os = "linux") {
            assert!(cpu.memory_bytes.unwrap() > 0);
            assert!(os_info().kernel.is_some());
        }
        assert!(!hostname().is_empty());
        let host = CpuFeatures::host();
        assert_eq!(cpu.features, host.flags());
        assert_eq!(cpu.isa.as_deref(), host.best().map(|isa| isa.onednn_name()));
    }
}
