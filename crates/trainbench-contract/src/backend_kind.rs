//! Which backend a run uses ([`BackendKind`]): the spec's `auto` resolved, named as specs and messages write it.
//! What each kind can run is declared in `capability.rs` ([`BackendKind::capabilities`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A concrete training backend: the spec's `auto` resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// libtorch through tch (CPU, CUDA).
    Tch,
    /// burn's wgpu backend (any wgpu adapter).
    Wgpu,
    /// The deterministic mock backend (tests trainbench itself; measures nothing real).
    Mock,
}

impl BackendKind {
    /// Name as written in specs, on the command line and in messages.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Tch => "tch",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Mock => "mock",
        }
    }
}
