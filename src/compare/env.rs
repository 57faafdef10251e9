//! Differences between the environments (and run configurations) of two results, and which of them make two
//! measurements not comparable.

use serde::Serialize;

use crate::result::RunResult;
use crate::result::distributed::DistributedResult;
use crate::result::identity::ConfigurationIdentity;

/// One field that differs between two results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvDifference {
    /// What differs (`device`, `library libtorch`, `trainbench version`, ...).
    pub field: String,
    /// Value in the first (baseline / original) result; `-` when absent.
    pub baseline: String,
    /// Value in the second (candidate / re-run) result; `-` when absent.
    pub candidate: String,
    /// True when the difference makes the step times not comparable (device, backend, library versions,
    /// precision, batch, world size, TF32 switches, cuDNN autotuning, data-parallel strategy, whether its
    /// exchange overlapped the computation and its bucket size, communication engine and its version; CPU model,
    /// cores and instruction-set level for CPU runs; anything else of the two configurations' identities, such
    /// as the topology, interconnect, step schedule, optimizer or the spec's content); false for informational
    /// differences (driver, trainbench version, spec hash, OS, environment variables, host, a data-parallel run's
    /// launcher and hosts, library file locations, an instruction-set level only one of the results recorded,
    /// fp16's initial loss scale, the device selector).
    pub blocking: bool,
}

impl EnvDifference {
    /// `field: baseline -> candidate`.
    pub fn describe(&self) -> String {
        format!("{} differs: {} vs {}", self.field, self.baseline, self.candidate)
    }
}

fn device_kind(r: &RunResult) -> String {
    r.environment.device.as_ref().map(|d| d.kind.clone()).unwrap_or_else(|| {
        if r.plan.device == trainbench_contract::DeviceSelector::Cpu {
            "cpu".to_string()
        } else {
            "unknown".to_string()
        }
    })
}

fn push(out: &mut Vec<EnvDifference>, field: &str, a: String, b: String, blocking: bool) {
    if a != b {
        out.push(EnvDifference { field: field.to_string(), baseline: a, candidate: b, blocking });
    }
}

fn or_dash(v: Option<&String>) -> String {
    v.cloned().unwrap_or_else(|| "-".to_string())
}

/// Every difference between `a` and `b` that matters for comparing their measurements, blocking ones first.
pub fn differences(a: &RunResult, b: &RunResult) -> Vec<EnvDifference> {
    let mut out = Vec::new();
    let (ea, eb) = (&a.environment, &b.environment);
    push(&mut out, "backend", a.backend.clone(), b.backend.clone(), true);
    push(&mut out, "device", crate::report::device_name(a), crate::report::device_name(b), true);
    push(&mut out, "precision", a.plan.precision.as_str().into(), b.plan.precision.as_str().into(), true);
    push(&mut out, "batch size", a.plan.batch_size.to_string(), b.plan.batch_size.to_string(), true);
    push(
        &mut out,
        "world size",
        a.plan.topology.world_size().to_string(),
        b.plan.topology.world_size().to_string(),
        true,
    );
    // What fp32 runs on (CUDA's TF32 switches) and cuDNN's autotuning change the kernels as much as a precision.
    let (na, nb) = (a.plan.numerics, b.plan.numerics);
    push(&mut out, "TF32", na.tf32.label().into(), nb.tf32.label().into(), true);
    push(&mut out, "cuDNN benchmark", na.cudnn_benchmark.to_string(), nb.cudnn_benchmark.to_string(), true);
    push(&mut out, "initial loss scale", na.loss_scale.to_string(), nb.loss_scale.to_string(), false);
    distribution(&mut out, a, b);
    let libs: std::collections::BTreeSet<&String> =
        ea.library_versions.keys().chain(eb.library_versions.keys()).collect();
    for lib in libs {
        let (va, vb) = (or_dash(ea.library_versions.get(lib)), or_dash(eb.library_versions.get(lib)));
        // Where a library was loaded from (a file path) does not change what it computes.
        let location = va.contains('/') && vb.contains('/');
        push(&mut out, &format!("library {lib}"), va, vb, !location);
    }
    let details = |r: &RunResult| r.environment.device.as_ref().map(|d| d.details.clone()).unwrap_or_default();
    let (da, db) = (details(a), details(b));
    let keys: std::collections::BTreeSet<&String> = da.keys().chain(db.keys()).collect();
    for key in keys {
        push(&mut out, &format!("device {key}"), or_dash(da.get(key)), or_dash(db.get(key)), false);
    }
    let cpu_run = device_kind(a) == "cpu" || device_kind(b) == "cpu";
    push(&mut out, "CPU model", ea.cpu.model.clone(), eb.cpu.model.clone(), cpu_run);
    push(&mut out, "CPU cores", ea.cpu.logical_cores.to_string(), eb.cpu.logical_cores.to_string(), cpu_run);
    // The instruction-set level decides which oneDNN kernels a CPU run used. A result written before it was
    // recorded has none, which says nothing about its host: such a difference is only informational.
    let (ia, ib) = (ea.cpu.isa.as_ref(), eb.cpu.isa.as_ref());
    push(&mut out, "CPU ISA", or_dash(ia), or_dash(ib), cpu_run && ia.is_some() && ib.is_some());
    let driver = |r: &RunResult| r.environment.gpus.get().map(|g| g.driver_version.clone());
    push(&mut out, "GPU driver", or_dash(driver(a).as_ref()), or_dash(driver(b).as_ref()), false);
    push(&mut out, "trainbench version", ea.trainbench_version.clone(), eb.trainbench_version.clone(), false);
    push(&mut out, "trainbench commit", ea.git_commit.clone(), eb.git_commit.clone(), false);
    push(&mut out, "spec SHA-256", short(&ea.spec_sha256), short(&eb.spec_sha256), false);
    push(&mut out, "OS", os(a), os(b), false);
    let vars: std::collections::BTreeSet<&String> = ea.env_vars.keys().chain(eb.env_vars.keys()).collect();
    for var in vars {
        push(&mut out, &format!("env {var}"), or_dash(ea.env_vars.get(var)), or_dash(eb.env_vars.get(var)), false);
    }
    push(&mut out, "host", ea.hostname.clone(), eb.hostname.clone(), false);
    configuration(&mut out, a, b);
    out.sort_by_key(|d| !d.blocking);
    out
}

/// The differences of the two configurations' identities ([`ConfigurationIdentity::differences`]) that the
/// fields above do not already name: the topology, interconnect, step schedule, optimizer, per-phase
/// synchronisation, CPU threads, target and the spec's content, and the planned overlap where the engines did
/// not record theirs. They make the measurements not comparable; only the plan's device selector (`cuda:0` vs
/// `cuda:1`) is informational, the device model being compared above.
fn configuration(out: &mut Vec<EnvDifference>, a: &RunResult, b: &RunResult) {
    let named_as = |field: &'static str| -> &'static str {
        match field {
            "TF32 matmul" | "TF32 cuDNN" => "TF32",
            "overlap" => "exchange overlapped",
            "device" => "device selector",
            other => other,
        }
    };
    for d in ConfigurationIdentity::of(a).differences(&ConfigurationIdentity::of(b)) {
        let field = named_as(d.field);
        // What the engines did decides above when both recorded it (one bucket has nothing to overlap).
        let engines_said = d.field == "overlap" && a.distributed.is_some() && b.distributed.is_some();
        if engines_said || out.iter().any(|o| o.field == field || o.field == d.field) {
            continue;
        }
        out.push(EnvDifference {
            field: field.to_string(),
            baseline: d.a,
            candidate: d.b,
            blocking: field != "device selector",
        });
    }
}

/// How the workers of a data-parallel run were combined: `all-reduce`, `parameter-server (2 servers)`.
fn strategy(r: &RunResult) -> String {
    match r.plan.topology.strategy.servers() {
        0 => r.plan.topology.strategy.name().to_string(),
        1 => format!("{} (1 server)", r.plan.topology.strategy.name()),
        n => format!("{} ({n} servers)", r.plan.topology.strategy.name()),
    }
}

/// The differences in how two data-parallel runs were spread: the strategy and the engine decide what the
/// exchange costs (blocking); the launcher and the hosts are informational.
fn distribution(out: &mut Vec<EnvDifference>, a: &RunResult, b: &RunResult) {
    push(out, "strategy", strategy(a), strategy(b), true);
    let (da, db) = (a.distributed.as_ref(), b.distributed.as_ref());
    let both = da.is_some() && db.is_some();
    // What the engine did, not what the spec asked: one bucket, or one unit, has nothing to overlap; a result
    // written before it was recorded never overlapped.
    let overlapped = |d: &DistributedResult| if d.overlapped.unwrap_or(false) { "yes" } else { "no" }.to_string();
    push(out, "exchange overlapped", field_of(da, &overlapped), field_of(db, &overlapped), both);
    let bucketed = |r: &RunResult| {
        use trainbench_comm::DataParallel::{AllReduce, Zero1, Zero2};
        matches!(r.plan.topology.strategy, AllReduce | Zero1 | Zero2)
    };
    let bucket = |r: &RunResult| format!("{:.2} MiB", r.plan.topology.bucket_bytes as f64 / (1u64 << 20) as f64);
    push(out, "bucket size", bucket(a), bucket(b), bucketed(a) && bucketed(b));
    let field = field_of;
    let hosts = |d: &DistributedResult| {
        let mut h = d.hosts.clone();
        h.sort();
        h.dedup();
        h.join(", ")
    };
    push(out, "engine", field(da, &|d| d.engine.clone()), field(db, &|d| d.engine.clone()), both);
    let version = |d: &DistributedResult| d.engine_version.clone();
    push(out, "engine version", field(da, &version), field(db, &version), both);
    push(out, "launcher", field(da, &|d| d.launcher.clone()), field(db, &|d| d.launcher.clone()), false);
    push(out, "hosts", field(da, &hosts), field(db, &hosts), false);
}

/// `f` of a data-parallel run's section; `-` without one.
fn field_of(d: Option<&DistributedResult>, f: &dyn Fn(&DistributedResult) -> String) -> String {
    d.map_or("-".into(), f)
}

fn short(sha: &str) -> String {
    sha.get(..12).unwrap_or(sha).to_string()
}

fn os(r: &RunResult) -> String {
    let o = &r.environment.os;
    format!("{} {} {}", o.distribution.as_deref().unwrap_or(&o.family), o.kernel.as_deref().unwrap_or("-"), o.arch)
}
