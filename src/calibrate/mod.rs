//! Calibration: measuring a device through a backend's own training step, and fitting what was measured into
//! the coefficients the performance model reads. The suites of micro-graphs ([`elementwise`], [`firstnode`],
//! [`stepcost`]) share one differential measurement ([`harness`]: a graph with the nodes against the same graph
//! without them; on CUDA their batches from [`repeated_batch`]); `trainbench calibrate` (`crate::commands::calibrate`) runs them and writes the points into a
//! hardware profile. [`fit`] (its convolution grids: [`fit_conv`]) turns a profile's points into `crate::predict::rates::Coefficients`, once: when
//! `trainbench calibrate` writes the profile (format v2 stores them) or when a v1 profile is loaded
//! (`crate::hardware::load`). The model (`crate::predict`) reads those, never measures nor fits, and imports
//! nothing from here.

pub mod elementwise;
pub mod firstnode;
pub mod fit;
pub mod fit_conv;
pub mod fit_uncertainty;
pub mod harness;
pub mod machine_load;
pub mod micro_shapes;
pub mod repeated_batch;
pub mod stepcost;
