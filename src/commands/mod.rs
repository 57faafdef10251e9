//! One module per subcommand: its `clap::Args` and the function that carries it out.
//!
//! Each `execute` returns an [`Outcome`]; `main` maps it (or an error) to the exit code. Arguments several
//! commands take live in [`args`], the loading of a command's spec in [`spec_input`]; no command module uses
//! another.

/// `print!` that never panics: a closed pipe (`trainbench ... | head`) or another stdout write error is ignored
/// (what was measured is already in the result files).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!` that never panics; see `out!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod analyze;
pub mod args;
pub mod audit;
pub mod calibrate;
pub mod check;
pub mod compare;
pub mod devices;
pub mod history;
pub mod import;
pub mod plan;
pub mod predict;
pub mod report;
pub mod run;
pub mod schema;
pub mod slurm_task;
pub mod spec_input;
pub mod status;
pub mod validate;
pub mod worker;

/// How a command ended, mapped to the process exit code by `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything succeeded (exit 0).
    Success,
    /// The command worked but found a failure to report: a regression, a shape mismatch (exit 1).
    Failure,
    /// Invalid input: a spec, a result file or an argument (exit 2).
    InvalidInput,
    /// The command could not decide (exit 3): `history gate` with too few runs or too much noise.
    Inconclusive,
}

/// An error that ends a command, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The user's input was wrong (exit 2).
    #[error("{0}")]
    Input(String),
    /// Reading or writing a file failed (exit 2 when it is the user's path, else 1).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Anything else (exit 1).
    #[error("{0}")]
    Other(String),
    /// Only the engine binary can answer (the front binary then hands the command over to it).
    #[error("{}", crate::backend_registry::NeedsEngine)]
    NeedsEngine,
}

impl From<crate::backend_registry::NeedsEngine> for CommandError {
    fn from(_: crate::backend_registry::NeedsEngine) -> Self {
        CommandError::NeedsEngine
    }
}
