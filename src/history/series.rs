//! What makes a series: the configuration identity (what ran), the machine identity (where), and the metric;
//! and what a run records beside them (the software it used, which a series watches rather than splits on).
//! `docs/history.md` gives the reasons for each field.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::digest::sha256_hex;
use crate::result::RunResult;
use crate::result::identity::ConfigurationIdentity;

/// Hex digits of a SHA-256 kept in an identity key (64 bits: no collision among any realistic number of
/// configurations).
const KEY_DIGITS: usize = 16;

fn short_hash(text: &str) -> String {
    sha256_hex(text).chars().take(KEY_DIGITS).collect()
}

/// The configuration identity of a result, as a key: the digest of [`ConfigurationIdentity`], the one identity
/// report, compare and check pool repeats by (the spec's content without its budget, and the whole plan that
/// decides the performance).
pub fn configuration_key(r: &RunResult) -> String {
    short_hash(&ConfigurationIdentity::of(r).key())
}

/// Where a run ran, as far as it decides performance: never the host name or a path, so that a rebuilt runner
/// or another node of the same kind continues the series, while another device model or count never joins it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineIdentity {
    /// Backend (`tch`, `wgpu`, `mock`).
    pub backend: String,
    /// The device model the backend named (`NVIDIA H100 80GB HBM3`, `cpu`).
    pub device: String,
    /// Devices the run used (its world size).
    pub devices: usize,
    /// For a run on the CPU: the CPU model and its logical cores; `None` for accelerator runs.
    pub cpu: Option<(String, usize)>,
}

impl MachineIdentity {
    /// The machine identity of a result.
    pub fn of(r: &RunResult) -> Self {
        let device = r.environment.device.as_ref();
        let on_cpu = device.is_none_or(|d| d.kind.eq_ignore_ascii_case("cpu"));
        Self {
            backend: r.backend.clone(),
            device: device.map_or_else(|| "unknown".to_string(), |d| d.name.clone()),
            devices: r.plan.topology.world_size(),
            cpu: on_cpu.then(|| (r.environment.cpu.model.clone(), r.environment.cpu.logical_cores)),
        }
    }

    /// The identity as a key.
    pub fn key(&self) -> String {
        short_hash(&serde_json::to_string(self).unwrap_or_default())
    }

    /// The identity in words: `mock, Mock CPU x1, AMD EPYC 7B13 (16 cores)`.
    pub fn label(&self) -> String {
        let mut label = format!("{}, {} x{}", self.backend, self.device, self.devices);
        if let Some((model, cores)) = &self.cpu {
            label.push_str(&format!(", {model} ({cores} cores)"));
        }
        label
    }
}

/// A metric a series follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Median steady-state step time, seconds.
    StepTime,
    /// Samples per second.
    Throughput,
    /// Tokens per second (sequence models only).
    TokensPerS,
    /// Model FLOP utilisation, 0..1.
    Mfu,
    /// Peak allocated device memory, bytes.
    PeakMemory,
    /// Share of a step spent exchanging gradients (data-parallel runs).
    CommShare,
}

impl Metric {
    /// Every metric, in the order series are listed.
    pub const ALL: [Metric; 6] =
        [Metric::StepTime, Metric::Throughput, Metric::TokensPerS, Metric::Mfu, Metric::PeakMemory, Metric::CommShare];

    /// The name stored and printed.
    pub fn name(self) -> &'static str {
        match self {
            Metric::StepTime => "step_time",
            Metric::Throughput => "throughput",
            Metric::TokensPerS => "tokens_per_s",
            Metric::Mfu => "mfu",
            Metric::PeakMemory => "peak_memory",
            Metric::CommShare => "comm_share",
        }
    }

    /// The metric of a stored name.
    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Its unit.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::StepTime => "s",
            Metric::Throughput => "samples/s",
            Metric::TokensPerS => "tokens/s",
            Metric::Mfu | Metric::CommShare => "fraction",
            Metric::PeakMemory => "bytes",
        }
    }

    /// Whether a smaller value is the better one.
    pub fn lower_is_better(self) -> bool {
        matches!(self, Metric::StepTime | Metric::PeakMemory | Metric::CommShare)
    }
}

/// The value of each metric a result measured (none for a run without metrics).
pub fn metric_values(r: &RunResult) -> Vec<(Metric, f64)> {
    let Some(m) = &r.metrics else { return Vec::new() };
    let mut out = vec![(Metric::StepTime, m.step_time.median_s), (Metric::Throughput, m.throughput.samples_per_s)];
    if m.throughput.item_unit == "tokens" {
        out.push((Metric::TokensPerS, m.throughput.items_per_s));
    }
    if let Some(mfu) = m.flops.mfu.as_ref().and_then(|s| s.get()) {
        out.push((Metric::Mfu, mfu.mfu));
    }
    if let Some(peak) = m.memory.measured.peak_allocated_bytes {
        out.push((Metric::PeakMemory, peak as f64));
    }
    if let Some(share) = r.distributed.as_ref().and_then(|d| d.comm_share) {
        out.push((Metric::CommShare, share));
    }
    out.retain(|(_, v)| v.is_finite());
    out
}

/// The software and host a run used: recorded with each point, never part of a key, and what explains a change
/// point (`libtorch`, `cuda`, `nvidia driver`, `trainbench`, `trainbench commit`, `host`, ...).
pub fn software(r: &RunResult) -> BTreeMap<String, String> {
    let env = &r.environment;
    let mut out: BTreeMap<String, String> = env.library_versions.clone();
    out.insert("trainbench".into(), env.trainbench_version.clone());
    out.insert("trainbench commit".into(), env.git_commit.clone());
    if let Some(gpus) = env.gpus.get() {
        out.insert("nvidia driver".into(), gpus.driver_version.clone());
        if let Some(cuda) = &gpus.cuda_driver_version {
            out.insert("cuda driver".into(), cuda.clone());
        }
    }
    if r.environment.device.as_ref().is_some_and(|d| !d.kind.eq_ignore_ascii_case("cpu")) {
        out.insert("cpu".into(), env.cpu.model.clone());
    }
    if let Some(distribution) = &env.os.distribution {
        out.insert("os".into(), distribution.clone());
    }
    if let Some(kernel) = &env.os.kernel {
        out.insert("kernel".into(), kernel.clone());
    }
    out.insert("host".into(), env.hostname.clone());
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fixture() -> RunResult {
        serde_json::from_str(include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json"))
            .unwrap()
    }

    #[test]
    fn budget_host_and_software_do_not_split_a_series_but_batch_and_device_do() {
        let a = fixture();
        let mut b = a.clone();
        b.environment.spec_canonical = b.environment.spec_canonical.replace("repeats = 2", "repeats = 7");
        b.environment.hostname = "elsewhere".into();
        b.environment.library_versions.insert("libtorch".into(), "9.9.9".into());
        assert_eq!(configuration_key(&a), configuration_key(&b));
        assert_eq!(MachineIdentity::of(&a).key(), MachineIdentity::of(&b).key());
        assert_ne!(software(&a), software(&b));
        let mut c = a.clone();
        c.plan.batch_size += 1;
        assert_ne!(configuration_key(&a), configuration_key(&c));
        let mut d = a.clone();
        if let Some(device) = &mut d.environment.device {
            device.name.push_str(" v2");
        }
        d.environment.cpu.logical_cores += 1;
        assert_ne!(MachineIdentity::of(&a).key(), MachineIdentity::of(&d).key());
    }

    #[test]
    fn metric_names_round_trip() {
        for m in Metric::ALL {
            assert_eq!(Metric::parse(m.name()), Some(m));
        }
        assert_eq!(Metric::parse("speed"), None);
    }
}
