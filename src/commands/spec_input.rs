//! Loading the spec a command works on, defined once for `analyze`, `plan`, `predict` and `validate`: parse the
//! `--set` overrides (malformed ones printed in the command's format), build the validator, check each file,
//! and print the diagnostics of a spec that does not load.

use std::path::Path;

use super::args::{OutputFormat, SetArgs};
use super::{CommandError, Outcome};
use crate::spec::diagnostics::render_text;
use crate::spec::{Checked, Overrides, SpecValidator, ValidatedSpec};

/// Why a command stops before its own work: what was wrong with the input is already printed (the command
/// returns the outcome), or an error ends it.
#[derive(Debug)]
pub enum Stopped {
    /// The problem was printed; the command ends with this outcome.
    Reported(Outcome),
    /// An error ends the command.
    Failed(CommandError),
}

impl Stopped {
    /// What the command's `execute` returns.
    pub fn into_result(self) -> Result<Outcome, CommandError> {
        match self {
            Stopped::Reported(outcome) => Ok(outcome),
            Stopped::Failed(error) => Err(error),
        }
    }
}

impl From<CommandError> for Stopped {
    fn from(error: CommandError) -> Self {
        Stopped::Failed(error)
    }
}

/// The overrides of `--set` with a validator: checks spec files as the command line asked.
pub struct SpecLoader {
    validator: SpecValidator,
    overrides: Overrides,
}

impl SpecLoader {
    /// Parse `--set` (malformed overrides are printed in `format`, and the command stops with
    /// [`Outcome::InvalidInput`]) and build the validator.
    pub fn new(set: &SetArgs, format: OutputFormat) -> Result<Self, Stopped> {
        let overrides = set.parse_or_print(format).map_err(Stopped::Reported)?;
        let validator = SpecValidator::new().map_err(CommandError::from)?;
        Ok(Self { validator, overrides })
    }

    /// Check one spec file, shown as `display` in diagnostics; the caller prints them.
    pub fn check(&self, path: &Path, display: &str) -> Checked {
        self.validator.check_file(path, display, &self.overrides)
    }

    /// Load one spec file; when it does not load, its diagnostics are printed on standard error and the command
    /// stops with [`Outcome::InvalidInput`].
    pub fn load(&self, path: &Path) -> Result<ValidatedSpec, Stopped> {
        self.check(path, &path.display().to_string()).into_result().map_err(|diagnostics| {
            eprint!("{}", render_text(&diagnostics));
            Stopped::Reported(Outcome::InvalidInput)
        })
    }
}

/// The spec of a command that takes one: `--set` parsed, the file loaded, problems printed (see
/// [`SpecLoader::load`]).
pub fn load_spec(path: &Path, set: &SetArgs, format: OutputFormat) -> Result<ValidatedSpec, Stopped> {
    SpecLoader::new(set, format)?.load(path)
}
