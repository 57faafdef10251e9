//! Reports of result sets: groups runs into configurations and series (`model.rs`), then writes a
//! self-contained HTML page, a Markdown page with SVG plots next to it, and a CSV of every run (one file per
//! format; the overview table both pages open with in `overview.rs`, the scaling of data-parallel runs in
//! `scaling.rs`, predicted against measured in `predicted.rs`, the expert load of MoE runs in `expert_load.rs`,
//! the plots in `plots/`).

pub mod csv;
pub mod error;
pub mod escape;
pub mod expert_load;
pub mod html;
pub mod markdown;
pub mod model;
pub mod overview;
pub mod plots;
pub mod predicted;
pub mod scaling;
pub mod text;
pub mod utilization;
pub mod write;

pub use error::ReportError;
pub use model::{ConfigRow, ReportModel, Series, device_name};
pub use text::{environment_summary, machines_note, summary_line};
pub use write::{ReportFiles, write_report};
