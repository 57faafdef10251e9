//! Empty stand-in for burn-tch (see this package's Cargo.toml): it exists only so that burn 0.22's
//! optional burn-tch dependency does not pull torch-sys 0.22 into trainbench's lock file, where it would
//! collide with torch-sys 0.26 (`links = "tch"`). Nothing in trainbench enables burn's `tch` feature.
