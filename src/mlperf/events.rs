//! A run's MLPerf Training log, derived from its result alone: every instant is one the JSON result records
//! (`environment.started_at` and `finished_at`, and the target's evaluation curve, in seconds from the first
//! training step), so the log and the result cannot disagree. `run_start` is written at `started_at`, each
//! evaluation ends `elapsed_s` after it and starts `eval_s` before that, `run_stop` is at the time to target (or
//! at the last evaluation of a run that missed it, with status `aborted`): `run_stop - run_start` is the result's
//! `time_to_target_s` to the millisecond.

use serde_json::{Value, json};

use super::clock::epoch_ms;
use super::line::{EventType, MllogLine};
use crate::result::RunResult;
use crate::spec::wire::{MlperfBenchmark, MlperfSpec};
use trainbench_graph::OptimizerSpec;

/// What the log says beyond the result: the submission fields and the model's sequence length.
#[derive(Debug, Clone, PartialEq)]
pub struct LogContext<'a> {
    /// The spec's `[mlperf]` table.
    pub submission: &'a MlperfSpec,
    /// Tokens per sample of a sequence model (`max_sequence_length`); `None` for other models.
    pub sequence_length: Option<u64>,
}

/// One line at `time_ms`, with `file` and `lineno` of the Rust line that logged it (as the reference logger
/// names its caller's Python line).
macro_rules! event {
    ($lines:expr, $time:expr, $kind:expr, $key:expr, $value:expr $(, $mk:literal => $mv:expr)* $(,)?) => {
        $lines.push(MllogLine {
            namespace: String::new(),
            time_ms: $time,
            event_type: $kind,
            key: $key.to_string(),
            value: $value,
            metadata: vec![
                ("file".to_string(), json!(file!())),
                ("lineno".to_string(), json!(line!())),
                $(($mk.to_string(), json!($mv)),)*
            ],
        })
    };
}

const POINT: EventType = EventType::PointInTime;
const START: EventType = EventType::IntervalStart;
const END: EventType = EventType::IntervalEnd;

/// The platform a run ran on when the spec names none: the workers and the device (`1xNVIDIA H200`).
pub fn default_platform(result: &RunResult) -> String {
    let device = result.environment.device.as_ref().map(|d| d.name.clone()).filter(|n| !n.trim().is_empty());
    format!("{}x{}", result.plan.topology.world_size(), device.unwrap_or_else(|| result.plan.device.to_string()))
}

/// The hyperparameters MLPerf names, as `(key, value)` in the order they are logged.
pub fn hyperparameters(result: &RunResult, sequence_length: Option<u64>) -> Vec<(&'static str, Value)> {
    let plan = &result.plan;
    let mut hp: Vec<(&'static str, Value)> = vec![
        ("seed", json!(plan.seed)),
        ("global_batch_size", json!(plan.samples_per_step())),
        ("gradient_accumulation_steps", json!(plan.schedule.micro_batches())),
    ];
    if let Some(n) = sequence_length {
        hp.push(("max_sequence_length", json!(n)));
    }
    match plan.optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => hp.extend([
            ("opt_name", json!(if nesterov { "sgd_nesterov" } else { "sgd" })),
            ("opt_base_learning_rate", json!(lr)),
            ("sgd_opt_momentum", json!(momentum)),
            ("opt_weight_decay", json!(weight_decay)),
        ]),
        OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay } => hp.extend([
            ("opt_name", json!("adam")),
            ("opt_base_learning_rate", json!(lr)),
            ("opt_adam_beta_1", json!(beta1)),
            ("opt_adam_beta_2", json!(beta2)),
            ("opt_adam_epsilon", json!(eps)),
            ("opt_weight_decay", json!(weight_decay)),
        ]),
        OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => hp.extend([
            ("opt_name", json!("adamw")),
            ("opt_base_learning_rate", json!(lr)),
            ("opt_adamw_beta_1", json!(beta1)),
            ("opt_adamw_beta_2", json!(beta2)),
            ("opt_adamw_epsilon", json!(eps)),
            ("opt_adamw_weight_decay", json!(weight_decay)),
        ]),
    }
    hp
}

/// The keys a benchmark's ruleset names beyond [`hyperparameters`], with the values a trainbench run used:
/// DLRM-DCNv2's learning-rate schedule (warm-up steps, decay start and decay steps), 0 as the reference writes
/// them for no warm-up and no decay, since trainbench's learning rate is constant.
pub fn benchmark_keys(benchmark: MlperfBenchmark) -> Vec<(&'static str, Value)> {
    match benchmark {
        MlperfBenchmark::DlrmDcnv2 => vec![
            ("opt_learning_rate_warmup_steps", json!(0)),
            ("opt_learning_rate_decay_start_step", json!(0)),
            ("opt_learning_rate_decay_steps", json!(0)),
        ],
        MlperfBenchmark::Flux1
        | MlperfBenchmark::Llama31B8
        | MlperfBenchmark::Llama2B70Lora
        | MlperfBenchmark::Llama31B405
        | MlperfBenchmark::GptOssB20
        | MlperfBenchmark::DeepseekV3B671 => Vec::new(),
    }
}

/// The log of one run, line by line.
pub fn run_log(result: &RunResult, cx: &LogContext<'_>) -> Vec<MllogLine> {
    let mut lines = Vec::new();
    let env = &result.environment;
    let t0 = epoch_ms(&env.started_at).unwrap_or(0);
    let finished = epoch_ms(&env.finished_at).unwrap_or(t0).max(t0);
    let at = |seconds: f64| t0 + (seconds.max(0.0) * 1000.0).round() as i64;
    let s = cx.submission;
    let target = result.metrics.as_ref().and_then(|m| m.time_to_target.as_ref());

    // trainbench does not drop the page cache before a run: the value says so.
    event!(lines, t0, POINT, "cache_clear", json!(false));
    event!(lines, t0, START, "init_start", Value::Null);
    event!(lines, t0, POINT, "submission_benchmark", json!(s.benchmark.as_str()));
    event!(lines, t0, POINT, "submission_division", json!(s.division.as_str()));
    event!(lines, t0, POINT, "submission_org", json!(s.org));
    let platform = s.platform.clone().unwrap_or_else(|| default_platform(result));
    event!(lines, t0, POINT, "submission_platform", json!(platform));
    if let Some(status) = s.status {
        event!(lines, t0, POINT, "submission_status", json!(status.as_str()));
    }
    for (key, value) in hyperparameters(result, cx.sequence_length).into_iter().chain(benchmark_keys(s.benchmark)) {
        event!(lines, t0, POINT, key, value);
    }
    let train_samples = result.data.as_ref().map(|d| d.samples_per_epoch + d.dropped_per_epoch).unwrap_or(0);
    event!(lines, t0, POINT, "train_samples", json!(train_samples));
    event!(lines, t0, POINT, "eval_samples", json!(target.map(|t| t.eval_samples).unwrap_or(0)));
    event!(lines, t0, END, "init_stop", Value::Null);
    event!(lines, t0, START, "run_start", Value::Null);

    let per_step = result.plan.samples_per_step();
    let metric = result.plan.target.as_ref().map(|t| t.metric);
    let (mut block_from, mut samples_from) = (t0, 0u64);
    for point in target.map(|t| t.curve.as_slice()).unwrap_or(&[]) {
        let stop = at(point.elapsed_s);
        let start = at(point.elapsed_s - point.eval_s.unwrap_or(0.0)).max(block_from);
        let samples = point.step * per_step;
        let epoch = point.epoch;
        event!(lines, block_from, START, "block_start", Value::Null, "samples_count" => samples_from, "epoch_num" => epoch);
        event!(lines, start, END, "block_stop", Value::Null, "samples_count" => samples, "epoch_num" => epoch);
        event!(lines, start, START, "eval_start", Value::Null, "samples_count" => samples, "epoch_num" => epoch);
        event!(lines, stop, END, "eval_stop", Value::Null, "samples_count" => samples, "epoch_num" => epoch);
        let value = match metric {
            Some(trainbench_contract::target::TargetMetric::Accuracy) => json!(point.accuracy),
            Some(trainbench_contract::target::TargetMetric::Auc) => json!(point.auc),
            Some(trainbench_contract::target::TargetMetric::Loss) | None => json!(point.loss),
        };
        event!(lines, stop, POINT, "eval_accuracy", value, "samples_count" => samples, "epoch_num" => epoch);
        (block_from, samples_from) = (stop, samples);
    }
    let (stop, status) = match target {
        Some(t) if t.reached => (t.time_to_target_s.map(at).unwrap_or(block_from), "success"),
        Some(_) => (block_from, "aborted"),
        None => (finished, "aborted"),
    };
    event!(lines, stop, END, "run_stop", Value::Null, "status" => status);
    lines
}

/// The log's text: one line each, newline-terminated.
pub fn render(lines: &[MllogLine]) -> String {
    lines.iter().map(|l| l.encode() + "\n").collect()
}
