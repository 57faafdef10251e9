//! The [`Store`] trait both stores implement, its errors, and where a store is: a `postgres://` (or `postgresql://`)
//! URL, or a SQLite file path (default `results/history.sqlite`); [`super::open`] opens it.

use super::record::RunRecord;

/// Where the store is when neither `--store` nor `TRAINBENCH_STORE` says.
pub const DEFAULT_STORE: &str = "results/history.sqlite";

/// The environment variable naming the store.
pub const STORE_ENV: &str = "TRAINBENCH_STORE";

/// Seconds a PostgreSQL connection attempt may take before it is given up.
pub const CONNECT_TIMEOUT_S: u64 = 10;

/// Why the store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store was written by a newer trainbench (it was not modified).
    #[error(
        "{location}: the history store has schema version {found}, newer than the version {supported} this \
         trainbench reads; use a newer trainbench (the store was not modified)"
    )]
    Newer {
        /// The store.
        location: String,
        /// Its version.
        found: i64,
        /// The version this build writes.
        supported: i64,
    },
    /// The SQLite file is not a readable database.
    #[error(
        "{path}: not a readable history store ({message}); recreate it from the result files with \
         `trainbench history rebuild RESULTS... --store {path}`"
    )]
    Corrupt {
        /// The file.
        path: String,
        /// What SQLite said.
        message: String,
    },
    /// PostgreSQL could not be reached or refused the connection.
    #[error("cannot connect to the history store {url} (connect timeout {timeout_s} s): {message}")]
    Unreachable {
        /// The URL, without its password.
        url: String,
        /// The connect timeout.
        timeout_s: u64,
        /// What the client said.
        message: String,
    },
    /// A statement failed.
    #[error("{location}: {message}")]
    Database {
        /// The store.
        location: String,
        /// What the database said.
        message: String,
    },
}

/// An accepted change: the series' statistics restart at this run's point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// The series' name.
    pub series: String,
    /// The key of the first run of the point the series restarts at.
    pub at_run_key: String,
    /// Why the change is accepted.
    pub why: String,
}

/// One series as the store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesHead {
    /// Configuration identity.
    pub config_key: String,
    /// Machine identity.
    pub machine_key: String,
    /// Metric name.
    pub metric: String,
    /// The configuration in words.
    pub config_label: String,
    /// The machine in words.
    pub machine_label: String,
}

/// A results history store. Every method is one transaction or one read.
pub trait Store {
    /// The store's location as printed (a file path, or a URL without its password).
    fn location(&self) -> &str;
    /// Add runs (and their series) whose keys are new, in one transaction; returns how many were new.
    fn insert_runs(&mut self, runs: &[RunRecord]) -> Result<usize, StoreError>;
    /// Every series, in a fixed order.
    fn series(&mut self) -> Result<Vec<SeriesHead>, StoreError>;
    /// The runs of one configuration on one machine, in time order, with their metrics and steps.
    fn runs_of(&mut self, config_key: &str, machine_key: &str) -> Result<Vec<RunRecord>, StoreError>;
    /// The revision recorded with each run: `(run key, revision)`.
    fn revisions(&mut self) -> Result<Vec<(String, Option<String>)>, StoreError>;
    /// Add (or replace the reason of) an acknowledgement.
    fn add_ack(&mut self, ack: &Ack) -> Result<(), StoreError>;
    /// Every acknowledgement.
    fn acks(&mut self) -> Result<Vec<Ack>, StoreError>;
    /// Drop every table and create the current schema (for `rebuild`).
    fn reset(&mut self) -> Result<(), StoreError>;
}

/// The location asked for: `--store`, else `TRAINBENCH_STORE`, else [`DEFAULT_STORE`].
pub fn location(flag: Option<&str>) -> String {
    flag.map(str::to_string)
        .or_else(|| std::env::var(STORE_ENV).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_STORE.to_string())
}

/// Whether a location names a PostgreSQL server.
pub fn is_postgres(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}
