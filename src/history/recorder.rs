//! Recording results as `trainbench run --record` writes them: the file first, the store after, so the folder
//! is never behind the store (`history record` later adds whatever the store missed).

use std::path::Path;

use super::record::RunRecord;
use super::store::{Store, StoreError};
use crate::result::RunResult;

/// An open store that results are recorded into as they are written.
pub struct Recorder {
    store: Box<dyn Store>,
    revision: Option<String>,
}

impl Recorder {
    /// Open the store at `location`; `revision` is recorded with every run.
    pub fn open(location: &str, revision: Option<String>) -> Result<Self, StoreError> {
        Ok(Self { store: super::open(location)?, revision })
    }

    /// The store's location as printed.
    pub fn location(&self) -> &str {
        self.store.location()
    }

    /// Record a result just written to `path`; a run with nothing measured is not recorded (`Ok(false)`).
    pub fn record(&mut self, result: &RunResult, path: &Path) -> Result<bool, StoreError> {
        let run = RunRecord::of(result, path, self.revision.clone());
        if run.metrics.is_empty() {
            return Ok(false);
        }
        Ok(self.store.insert_runs(std::slice::from_ref(&run))? == 1)
    }
}
