//! What the `history` subcommands share: the store argument and opening it, the output format, reading result
//! files for the store, and finding a series by name.

use std::path::PathBuf;

use crate::commands::CommandError;
use crate::history::order::{PointOrder, RevisionOrder};
use crate::history::points::Series;
use crate::history::record::{self, Prepared, Refused, RunRecord};
use crate::history::store::{self, Store, StoreError};
use crate::result::load;

/// `--store PATH|URL`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StoreArg {
    /// The history store: a SQLite file, or a `postgres://user:password@host/db` URL; default
    /// `$TRAINBENCH_STORE`, else `results/history.sqlite`.
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
}

impl StoreArg {
    /// The location asked for.
    pub fn location(&self) -> String {
        store::location(self.store.as_deref())
    }

    /// Open the store, creating it when missing (for the commands that write: `record`, `rebuild`, `ack`,
    /// `bisect`).
    pub fn open(&self) -> Result<Box<dyn Store>, CommandError> {
        crate::history::open(&self.location()).map_err(store_error)
    }

    /// Open a store that must already exist (for the commands that only read: `list`, `show`, `detect`,
    /// `report`, `gate`): a SQLite file that is not there is an error (exit 2), never an empty file created.
    pub fn open_existing(&self) -> Result<Box<dyn Store>, CommandError> {
        let location = self.location();
        if !store::is_postgres(&location) && !std::path::Path::new(&location).exists() {
            return Err(CommandError::Input(format!(
                "no history store at {location}; record results with `trainbench history record RESULTS...` (or \
                 `trainbench run --record`)"
            )));
        }
        self.open()
    }
}

/// A store error as a command error, its kind kept: [`CommandError::exit_code`] makes a newer or corrupt store,
/// or an unreachable server, the user's to fix (exit 2) and a failed statement not (exit 1).
pub fn store_error(e: StoreError) -> CommandError {
    CommandError::Store(e)
}

/// How a `history` command prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HistoryFormat {
    /// Text for people.
    #[default]
    Text,
    /// JSON for scripts (with a `format` name and a `version`).
    Json,
    /// Markdown (a PR comment, a job summary).
    Markdown,
}

/// The orders `--order` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OrderName {
    /// Each invocation's runs are a point, in the order they ran.
    #[default]
    Time,
    /// Each revision's runs are a point, in the topological order of the repository's commits.
    Revision,
}

/// `--order time|revision` and `--repo DIR`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OrderArg {
    /// How a series' points are ordered: `time` (each invocation's runs a point, in the order they ran) or
    /// `revision` (each revision's runs a point, in the order of the repository's history, `git rev-list
    /// --topo-order --reverse HEAD`; runs of a revision it does not hold are left out, and listed).
    #[arg(long, value_enum, default_value_t = OrderName::Time)]
    pub order: OrderName,
    /// `--order revision`: the git repository whose history orders the revisions (default: the current
    /// directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

impl OrderArg {
    /// The order asked for (reading the repository's history for `revision`).
    pub fn resolve(&self) -> Result<PointOrder, CommandError> {
        match (self.order, &self.repo) {
            (OrderName::Time, None) => Ok(PointOrder::Time),
            (OrderName::Time, Some(_)) => {
                Err(CommandError::Input("--repo names the history that orders revisions: add --order revision".into()))
            }
            (OrderName::Revision, repo) => {
                let dir = repo.clone().unwrap_or_else(|| PathBuf::from("."));
                RevisionOrder::of_repository(&dir)
                    .map(PointOrder::Revision)
                    .map_err(|e| CommandError::Input(e.to_string()))
            }
        }
    }
}

/// `--revision REV`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RevisionArg {
    /// The revision of the code under test the results measured; default `$GITHUB_SHA`, else
    /// `$CI_COMMIT_SHA`, else the commit checked out in the working directory.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
}

impl RevisionArg {
    /// The revision given, or the default.
    pub fn get(&self) -> Option<String> {
        self.revision.clone().or_else(record::default_revision)
    }
}

/// What reading result files for the store gave.
#[derive(Debug, Default)]
pub struct Read {
    /// The runs to record.
    pub runs: Vec<RunRecord>,
    /// Files with nothing measured: `(file, outcome)`.
    pub unmeasured: Vec<(String, &'static str)>,
    /// Files refused, with the reason.
    pub refused: Vec<String>,
}

/// Read result files and folders (recursively) for the store; `revision` gives each run its revision by key.
pub fn read_results(paths: &[PathBuf], revision: &dyn Fn(&RunRecord) -> Option<String>) -> Result<Read, CommandError> {
    let mut files = Vec::new();
    for path in paths {
        files.extend(load::result_files(path).map_err(|e| CommandError::Input(e.to_string()))?);
    }
    let mut read = Read::default();
    for prepared in record::prepare_all(&files) {
        match prepared {
            Ok(Prepared::Run(mut run)) => {
                run.revision = revision(&run);
                read.runs.push(*run);
            }
            Ok(Prepared::Unmeasured { path, status }) => read.unmeasured.push((path, status)),
            Err(e @ (Refused::Load(_) | Refused::Integrity { .. })) => read.refused.push(e.to_string()),
        }
    }
    Ok(read)
}

/// The series `name` names: the one of exactly that name, else the only one whose name contains it.
pub fn find_series<'a>(all: &'a [Series], name: &str) -> Result<&'a Series, CommandError> {
    if let Some(s) = all.iter().find(|s| s.id.name() == name) {
        return Ok(s);
    }
    let matching: Vec<&Series> = all.iter().filter(|s| s.id.name().contains(name)).collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(CommandError::Input(format!("no series named `{name}` (`trainbench history list` lists them)"))),
        many => Err(CommandError::Input(format!(
            "`{name}` names {} series: {}; give more of the name",
            many.len(),
            many.iter().take(5).map(|s| s.id.name()).collect::<Vec<_>>().join(", ")
        ))),
    }
}
