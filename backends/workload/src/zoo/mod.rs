//! The model zoo: builds the workload graph of each `[model]` family.

use crate::graph::Graph;
use crate::model::ModelSpec;

/// Why a model could not be built, located in the `[model]` table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ZooError {
    /// Path inside `[model]` of the offending field, e.g. `["layers", "3", "in_features"]`; empty = the table.
    pub path: Vec<String>,
    /// What is wrong, with both sizes when two disagree.
    pub message: String,
    /// How to fix it, when there is an obvious fix.
    pub hint: Option<String>,
}

/// Build the training graph of a model.
pub fn build(model: &ModelSpec) -> Result<Graph, ZooError> {
    Err(ZooError { path: vec![], message: format!("model family `{}` is not built yet", model.family()), hint: None })
}
