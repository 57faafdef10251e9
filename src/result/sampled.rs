//! [`Sampled`]: a figure from a sampler or a source that may be absent on this machine, with the reason when it is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A figure from a sampler or a source that may be absent on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Sampled<T> {
    /// The figures were measured.
    Available(T),
    /// They could not be measured here.
    Unavailable {
        /// Why (no NVIDIA driver, not collected, CPU-only run, ...).
        reason: String,
    },
}

impl<T> Sampled<T> {
    /// The figures, if available.
    pub fn get(&self) -> Option<&T> {
        match self {
            Sampled::Available(t) => Some(t),
            Sampled::Unavailable { .. } => None,
        }
    }
    /// Shorthand for an unavailable figure.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Sampled::Unavailable { reason: reason.into() }
    }
}
