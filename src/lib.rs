//! trainbench: declarative, reproducible benchmarks of DNN training performance.
//!
//! The pipeline, one module per stage: `spec` (TOML -> validated spec) -> `plan` (runs) -> backend run ->
//! metrics -> result -> report / compare / snapshot. See ARCHITECTURE.md.

pub mod audit;
pub mod backend_registry;
pub mod calibrate;
pub mod check;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod digest;
pub mod format;
pub mod handoff;
pub mod hardware;
pub mod history;
pub mod manifest;
pub mod metrics;
pub mod mlperf;
pub mod plan;
pub mod predict;
pub mod report;
pub mod result;
pub mod runner;
pub mod slurm;
pub mod spec;
pub mod stats;
