//! Semantic rules the JSON Schema cannot express: cross-field consistency (batch vs world size, precision vs
//! backend and device, warm-up vs run length), value ranges of floats, duplicates in sweeps, local datasets,
//! and the model's input against the dataset's declared shape.
//!
//! Rules run on a [`PartialSpec`]: every top-level table that passed the schema, so a typo in `[sweep]` does not
//! hide a mistake in `[run]`. A rule involving several tables runs when all of them are present. Last, on a
//! complete spec, [`check_support`] asks the backend that will run it what it refuses (layers, precisions).

pub mod check;
pub mod clicks;
pub(crate) mod dataset;
mod expert;
pub mod finding;
mod float8;
pub mod mesh;
pub mod mlperf;
mod schedule;
mod support;
mod target;
pub(crate) mod topology;

pub use check::{PartialSpec, RuleContext, check, check_graph};
pub use clicks::check_clicks_graph;
pub use dataset::{check_local_data, reader_format};
pub use finding::Finding;
pub use mesh::check_mesh_graph;
pub use support::{check_launch, check_runnable, check_support, check_support_on};
pub use target::check_eval_data;
pub use topology::{EffectiveTopology, effective_precisions, effective_topologies};
