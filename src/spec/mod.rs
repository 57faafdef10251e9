//! The spec stage: TOML text -> [`wire::SpecFile`] (with spans) -> [`ValidatedSpec`], with located diagnostics.
//!
//! Entry points: [`SpecValidator`] (reuse one for many files) or [`load_spec`] for a single file.

pub mod diagnostics;
pub mod humanize;
pub mod load;
pub mod overrides;
pub mod path;
pub mod rules;
pub mod schema;
pub mod validate;
pub mod validated;
pub mod wire;
pub mod wire_mlperf;
pub mod wire_topology;

pub use diagnostics::{Diagnostic, Severity};
pub use overrides::Overrides;
pub use validate::{Checked, SpecValidator, load_spec};
pub use validated::ValidatedSpec;
pub use wire::SpecFile;
