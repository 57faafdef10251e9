//! Helpers shared by the per-family tests.

use crate::graph::Graph;

/// Output shape of the named node.
#[allow(clippy::unwrap_used)]
pub fn shape(g: &Graph, name: &str) -> Vec<usize> {
    g.node(name).unwrap_or_else(|| panic!("no node `{name}`")).shape.0.clone()
}
