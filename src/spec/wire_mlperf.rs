//! The `[mlperf]` table of spec version 1 as written in TOML: the submission fields of an MLPerf Training log
//! (`submission_benchmark`, `_division`, `_org`, `_platform`, `_status`) and where the log is written. Doc
//! comments here become the JSON Schema's descriptions; `wire.rs` re-exports these types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Write an MLPerf Training log (`:::MLLOG` lines, read by MLCommons' `mlperf_logging` tools) for every run,
/// with these submission fields. A run with `[mlperf]` must train to a `[training.target]` on the benchmark's
/// quality metric. See docs/mlperf.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MlperfSpec {
    /// `submission_benchmark`: the MLPerf Training benchmark the run is an entry of (the round 6.0 list).
    pub benchmark: MlperfBenchmark,
    /// `submission_division`: only `open` can hold for a trainbench run (the closed division's reference
    /// dataset and hyperparameters cannot; docs/mlperf.md says which rule and why).
    #[serde(default)]
    pub division: MlperfDivision,
    /// `submission_org`: the submitting organisation.
    #[schemars(length(min = 1, max = 200))]
    pub org: String,
    /// `submission_platform`: the system's name; when absent, the run's device and worker count
    /// (`1xNVIDIA H200`, `1xcpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub platform: Option<String>,
    /// `submission_status`: `onprem`, `cloud`, `available`, `preview` or `research`; left out of the log when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MlperfStatus>,
    /// Where each run's log is written, relative to the spec's results folder (`<out>/<spec name>/`), as
    /// `trainbench run --mllog` (which takes precedence) would: `{run_id}`, `{config}` and `{repeat}` are
    /// replaced by the run's; no two runs may share a file. Absent: no log unless `--mllog` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub log: Option<String>,
}

/// The benchmarks of MLPerf Training round 6.0 (`mlperf_logging`'s `open_common.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MlperfBenchmark {
    /// Flux.1 text-to-image.
    #[serde(rename = "flux1")]
    Flux1,
    /// DLRM-DCNv2 on Criteo 1TB multi-hot; quality metric AUC.
    #[serde(rename = "dlrm_dcnv2")]
    DlrmDcnv2,
    /// Llama-3.1-8B pre-training; quality metric log perplexity.
    #[serde(rename = "llama31_8b")]
    Llama31B8,
    /// Llama-2-70B LoRA fine-tuning.
    #[serde(rename = "llama2_70b_lora")]
    Llama2B70Lora,
    /// Llama-3.1-405B pre-training.
    #[serde(rename = "llama31_405b")]
    Llama31B405,
    /// gpt-oss-20B.
    #[serde(rename = "gpt_oss_20b")]
    GptOssB20,
    /// DeepSeek-V3-671B.
    #[serde(rename = "deepseekv3_671b")]
    DeepseekV3B671,
}

impl MlperfBenchmark {
    /// The name MLPerf's logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            MlperfBenchmark::Flux1 => "flux1",
            MlperfBenchmark::DlrmDcnv2 => "dlrm_dcnv2",
            MlperfBenchmark::Llama31B8 => "llama31_8b",
            MlperfBenchmark::Llama2B70Lora => "llama2_70b_lora",
            MlperfBenchmark::Llama31B405 => "llama31_405b",
            MlperfBenchmark::GptOssB20 => "gpt_oss_20b",
            MlperfBenchmark::DeepseekV3B671 => "deepseekv3_671b",
        }
    }
}

/// `submission_division`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MlperfDivision {
    /// Any model and hyperparameters of the benchmark's family, to its quality target.
    #[default]
    Open,
    /// The reference model, dataset and hyperparameters (refused: see docs/mlperf.md).
    Closed,
}

impl MlperfDivision {
    /// The name MLPerf's logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            MlperfDivision::Open => "open",
            MlperfDivision::Closed => "closed",
        }
    }
}

/// `submission_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MlperfStatus {
    /// On-premises system.
    Onprem,
    /// Cloud system.
    Cloud,
    /// Available system.
    Available,
    /// Preview system.
    Preview,
    /// Research, development or internal system.
    Research,
}

impl MlperfStatus {
    /// The name MLPerf's logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            MlperfStatus::Onprem => "onprem",
            MlperfStatus::Cloud => "cloud",
            MlperfStatus::Available => "available",
            MlperfStatus::Preview => "preview",
            MlperfStatus::Research => "research",
        }
    }
}
