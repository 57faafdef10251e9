//! [`ReportError`]: why a report could not be written.

use std::path::PathBuf;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("drawing plot `{plot}`: {message}")]
    Plot {
        /// Plot identifier.
        plot: String,
        /// What plotters reported.
        message: String,
    },
    /// Nothing to report.
    #[error("no results to report")]
    Empty,
}
