//! The contract between a dataset pipeline and a backend: batches on the host, and the source they come from.
//!
//! The runner builds a [`BatchSource`] from a spec's `[dataset]` when it reads local files and hands it to the
//! backend through the contract's `RunContext::data`; with synthetic data there is none and the backend generates its
//! batches itself. Beside this file: what a model's batches hold ([`Layout`], `layout.rs`), one reader per
//! format (`npy.rs`, `raw.rs`, `cifar.rs`,
//! `image_folder.rs` with the image transform in `transform.rs`), and the pipeline that turns a [`Dataset`] into batches (`loader.rs`: epochs, shuffling,
//! sharding, worker threads, prefetching).

mod batch;
pub mod cifar;
pub mod clicks;
mod dataset;
pub mod image_folder;
mod layout;
pub mod loader;
pub mod memory;
pub mod npy;
mod open;
pub mod raw;
pub mod split;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "lib_tests.rs"]
mod tests;
pub mod transform;

pub use batch::{BatchSource, DataError, EvalSet, HostBatch};
pub use dataset::{Dataset, DatasetInfo, Format, InputOut, SampleOut};
pub use layout::{Layout, ValueKind};
pub use loader::{Loader, LoaderConfig, LoaderStats, OnError};
pub use memory::MemorySource;
pub use open::open;
