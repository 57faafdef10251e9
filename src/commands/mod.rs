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
pub mod single_copy;
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
    /// An exit code a calling program's protocol defines: the `history bisect` step speaks `git bisect run`'s
    /// (0 good, 1 bad, 125 skip, 128 and above abort the bisect).
    Code(u8),
}

/// An error that ends a command: one variant a kind of failure, each keeping the typed error it came from, so
/// that [`CommandError::exit_code`] (and any caller) can branch on the kind; the message is the source's own.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The user's input was wrong: a spec, an argument, a result file (exit 2).
    #[error("{0}")]
    Input(String),
    /// Reading or writing one of the user's files failed (exit 2).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The path of this program's own executable cannot be found (exit 1).
    #[error("the trainbench executable cannot be found: {0}")]
    OwnExecutable(#[source] std::io::Error),
    /// The current directory cannot be read (exit 1).
    #[error("the current directory: {0}")]
    CurrentDir(#[source] std::io::Error),
    /// A program the command runs (git) could not be started or waited for (exit 1).
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program, with the arguments that say what it was to do.
        program: String,
        /// Why it could not run.
        source: std::io::Error,
    },
    /// A program the command runs (git) ended in failure (exit 1).
    #[error("`{program}` failed: {said}")]
    ProgramFailed {
        /// The program and its arguments.
        program: String,
        /// What it wrote to stderr, or why it failed.
        said: String,
    },
    /// `history bisect` cannot measure at the good revision, so there is nothing to compare with (exit 1).
    #[error("at the good revision {revision}: {why}; there is nothing to compare with")]
    GoodRevisionFailed {
        /// The good revision, shortened.
        revision: String,
        /// Why the measurement failed.
        why: String,
    },
    /// The spec schema built into the program does not compile (a bug; exit 1).
    #[error(transparent)]
    SpecSchema(#[from] crate::spec::validate::SchemaCompileError),
    /// The hardware-profile schema built into the program does not compile (a bug; exit 1).
    #[error(transparent)]
    ProfileSchema(#[from] crate::hardware::load::HardwareSchemaError),
    /// A report or result does not encode as JSON (exit 1).
    #[error("cannot write the output as JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A hardware profile does not encode as TOML (exit 1).
    #[error("cannot write the profile as TOML: {0}")]
    Toml(#[from] toml::ser::Error),
    /// A backend failed to measure (exit 1).
    #[error(transparent)]
    Backend(#[from] trainbench_contract::BackendError),
    /// Running a suite failed (exit 1 when writing its results failed, else 2: the backend or the worker refused
    /// what the spec asks).
    #[error(transparent)]
    Run(#[from] crate::runner::RunnerError),
    /// Re-running a result to audit it failed (exit 1).
    #[error("re-running {path}: {source}")]
    Rerun {
        /// The result file.
        path: String,
        /// Why the re-run failed.
        source: crate::audit::RerunError,
    },
    /// Writing a report failed (exit 2 for an unwritable output path, else 1).
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// The results store failed (exit 2 for a newer, corrupt or unreachable store, which is the user's to fix;
    /// 1 for a failed statement).
    #[error(transparent)]
    Store(#[from] crate::history::store::StoreError),
    /// Slurm or a Slurm task failed (exit 2 for an invalid plan or an unreadable file, else 1).
    #[error(transparent)]
    Slurm(#[from] crate::slurm::SlurmError),
    /// The ranks of a data-parallel worker could not be started (exit 1).
    #[error(transparent)]
    Launch(#[from] crate::runner::dist::launch::LaunchError),
    /// A worker could not serve its job (exit 1).
    #[error(transparent)]
    Serve(#[from] crate::runner::isolate::child::ServeError),
    /// Something trainbench itself promises does not hold: a measured profile that does not validate, calibrations
    /// that do not merge into a profile, a history point without runs (a bug to report; exit 1). Only for broken
    /// invariants: a failure with a cause outside the program has its own variant.
    #[error("{0}")]
    Internal(String),
    /// Only the engine binary can answer (the front binary then hands the command over to it).
    #[error("{}", crate::backend_registry::NeedsEngine)]
    NeedsEngine,
}

impl CommandError {
    /// The process exit code: 2 when the user's input or the user's files are at fault, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        use crate::history::store::StoreError;
        use crate::report::ReportError;
        use crate::runner::RunnerError;
        use crate::slurm::SlurmError;
        let users_fault = match self {
            CommandError::Input(_) | CommandError::Io { .. } => true,
            CommandError::Run(e) => match e {
                RunnerError::Io { .. } => false,
                RunnerError::Backend(_) | RunnerError::Worker(_) => true,
            },
            CommandError::Report(e) => match e {
                ReportError::Io { .. } => true,
                ReportError::Plot { .. } | ReportError::Empty => false,
            },
            CommandError::Store(e) => match e {
                StoreError::Newer { .. } | StoreError::Corrupt { .. } | StoreError::Unreachable { .. } => true,
                StoreError::Database { .. } => false,
            },
            CommandError::Slurm(e) => match e {
                SlurmError::Invalid(_) | SlurmError::Io { .. } => true,
                SlurmError::Slurm(_) | SlurmError::Run(_) => false,
            },
            CommandError::OwnExecutable(_)
            | CommandError::CurrentDir(_)
            | CommandError::Spawn { .. }
            | CommandError::ProgramFailed { .. }
            | CommandError::GoodRevisionFailed { .. }
            | CommandError::SpecSchema(_)
            | CommandError::ProfileSchema(_)
            | CommandError::Json(_)
            | CommandError::Toml(_)
            | CommandError::Backend(_)
            | CommandError::Rerun { .. }
            | CommandError::Launch(_)
            | CommandError::Serve(_)
            | CommandError::Internal(_)
            | CommandError::NeedsEngine => false,
        };
        if users_fault { 2 } else { 1 }
    }
}

impl From<crate::backend_registry::NeedsEngine> for CommandError {
    fn from(_: crate::backend_registry::NeedsEngine) -> Self {
        CommandError::NeedsEngine
    }
}
