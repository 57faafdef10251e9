//! Calibration: measuring a device through a backend's own training step, and fitting what was measured into
//! the coefficients the performance model reads. The suites of micro-graphs ([`elementwise`], [`firstnode`],
//! [`stepcost`]) share one differential measurement ([`harness`]: a graph with the nodes against the same graph
//! without them); `trainbench calibrate` (`crate::commands::calibrate`) runs them and writes the points into a
//! hardware profile. [`fit`] turns a profile's points into `crate::predict::rates::Coefficients`; the model
//! (`crate::predict`) reads those and never measures.

pub mod elementwise;
pub mod firstnode;
pub mod fit;
pub mod harness;
pub mod stepcost;
