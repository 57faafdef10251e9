//! An imported MLPerf log as a trainbench [`RunResult`], so `report` can put it beside a user's runs: spec
//! `mlperf-<benchmark>`, run `<system>.r<N>` of configuration `<system>`, backend `mlperf`, no measured metrics,
//! the log's own statement in the `mlperf` section. The plan holds what the log states (global batch size,
//! seed, optimizer and learning rate); what a log does not state keeps a neutral value, named in
//! docs/mlperf.md: precision `fp32`, one worker on `cpu`, SGD for an optimizer trainbench has no kind for.

use serde_json::Value;
use trainbench_comm::Topology;
use trainbench_contract::{Budget, DeviceInfo, DeviceSelector, Numerics, RunPlan};
use trainbench_graph::training::{OptimizerSpec, Precision};

use super::clock::system_time;
use super::import::ImportedLog;
use crate::digest::sha256_hex;
use crate::manifest::rfc3339;
use crate::result::{CpuInfo, Environment, FORMAT_VERSION, OsInfo, RunOutcome, RunResult, Sampled};

fn number(log: &ImportedLog, key: &str) -> Option<f64> {
    log.record.hyperparameters.get(key).and_then(Value::as_f64)
}

fn optimizer(log: &ImportedLog) -> OptimizerSpec {
    let n = |key: &str, default: f64| number(log, key).unwrap_or(default);
    let lr = n("opt_base_learning_rate", 0.0);
    match log.record.hyperparameters.get("opt_name").and_then(Value::as_str) {
        Some("adamw") => OptimizerSpec::Adamw {
            lr,
            beta1: n("opt_adamw_beta_1", 0.9),
            beta2: n("opt_adamw_beta_2", 0.999),
            eps: n("opt_adamw_epsilon", 1e-8),
            weight_decay: n("opt_adamw_weight_decay", 0.0),
        },
        Some("adam") => OptimizerSpec::Adam {
            lr,
            beta1: n("opt_adam_beta_1", 0.9),
            beta2: n("opt_adam_beta_2", 0.999),
            eps: n("opt_adam_epsilon", 1e-8),
            weight_decay: n("opt_weight_decay", 0.0),
        },
        _ => OptimizerSpec::Sgd {
            lr,
            momentum: n("sgd_opt_momentum", 0.0),
            weight_decay: n("opt_weight_decay", 0.0),
            nesterov: false,
        },
    }
}

/// The result of an imported log (see the module docs).
pub fn to_result(log: &ImportedLog) -> RunResult {
    let r = &log.record;
    let config = r.system.clone();
    let id = format!("{config}.r{}", log.index);
    let seed = number(log, "seed").filter(|s| *s >= 0.0).map_or(0, |s| s as u64);
    let start = r.run_start_ms;
    let plan = RunPlan {
        id: id.clone(),
        config,
        batch_size: number(log, "global_batch_size").filter(|b| *b >= 0.0).map_or(0, |b| b as usize),
        precision: Precision::Fp32,
        device: DeviceSelector::Cpu,
        topology: Topology::single(),
        warmup: 0,
        budget: Budget::Seconds(r.run_s.max(0.0)),
        repeat: log.index,
        seed,
        optimizer: optimizer(log),
        phase_timing: false,
        timeout_s: None,
        cpu_threads: None,
        target: None,
        numerics: Numerics::default(),
        schedule: Default::default(),
        pipeline_layers: Vec::new(),
    };
    let desc =
        |key: &str| r.system_description.as_ref().and_then(|d| d.get(key)).and_then(Value::as_str).map(str::to_string);
    let device = desc("accelerator_model_name").filter(|n| !n.trim().is_empty()).map(|name| DeviceInfo {
        selector: "accelerator".into(),
        name,
        kind: "accelerator".into(),
        memory_bytes: None,
        peak_flops_fp32: None,
        details: Default::default(),
    });
    // One text per system and benchmark: its runs are repeats of one configuration.
    let canonical = format!("mlperf {} {}", r.benchmark, r.system);
    RunResult {
        format_version: FORMAT_VERSION,
        spec_name: format!("mlperf-{}", r.benchmark),
        run_id: id,
        backend: "mlperf".into(),
        plan,
        outcome: RunOutcome::Completed,
        metrics: None,
        analysis: None,
        environment: Environment {
            trainbench_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: "unknown".into(),
            spec_sha256: sha256_hex(&canonical),
            spec_canonical: canonical,
            library_versions: Default::default(),
            device,
            gpus: Sampled::unavailable("imported from an MLPerf log"),
            cpu: CpuInfo {
                model: desc("host_processor_model_name").unwrap_or_else(|| "unknown".into()),
                logical_cores: 0,
                memory_bytes: None,
                features: Vec::new(),
                onednn_isa_cap: None,
                isa: None,
            },
            os: OsInfo {
                family: "unknown".into(),
                distribution: desc("operating_system"),
                kernel: None,
                arch: "unknown".into(),
            },
            hostname: r.system.clone(),
            env_vars: Default::default(),
            seed,
            started_at: rfc3339(system_time(start)),
            finished_at: rfc3339(system_time(start + (r.run_s * 1000.0).round() as i64)),
            process: None,
            scheduler: None,
        },
        distributed: None,
        data: None,
        prediction: None,
        mlperf: Some(r.clone()),
    }
}
