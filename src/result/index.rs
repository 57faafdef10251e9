//! [`SuiteIndex`]: the index of a results folder, one entry per run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::run::RunOutcome;

/// File name of the suite index inside a results folder.
pub const INDEX_FILE: &str = "index.json";

/// The index of a results folder: one entry per run, rewritten after each run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "trainbench suite index")]
pub struct SuiteIndex {
    /// Result format version.
    pub format_version: u32,
    /// Spec name the folder belongs to.
    pub spec_name: String,
    /// SHA-256 of the canonical spec the runs came from.
    pub spec_sha256: String,
    /// Last time the index was written, RFC 3339 UTC.
    pub updated_at: String,
    /// Runs in the order they ran.
    pub runs: Vec<IndexEntry>,
}

/// One run in a [`SuiteIndex`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// Run identifier.
    pub run_id: String,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Result file name, relative to the index.
    pub file: String,
    /// Steady-state samples per second, if measured.
    pub samples_per_s: Option<f64>,
}
