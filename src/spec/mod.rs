//! The spec stage: TOML text -> [`wire::SpecFile`] (with spans) -> validated spec, with located diagnostics.

pub mod wire;
