//! Arguments several subcommands share, defined once: the output format (`--format text|json`, with `--json`
//! kept as a hidden alias), the `--set` overrides and the printing of malformed ones, and `--precision`.
//!
//! The backend argument (`--backend auto|tch|wgpu|mock`) is [`crate::backend_registry::BackendChoice`] itself, which
//! derives `clap::ValueEnum`: the spec's `topology.backend` and the command line name the same values.

use trainbench_graph::Precision;

use super::Outcome;
use crate::spec::diagnostics::{FileReport, render_text};
use crate::spec::{Diagnostic, Overrides};

/// How a command prints what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Text for people: tables and sentences.
    #[default]
    Text,
    /// JSON on standard output, for scripts.
    Json,
}

/// `--format text|json` of a command that prints structured output. `--json`, which some commands took
/// before `--format`, still means `--format json` (hidden from the help).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct FormatArg {
    /// Output format: `text` for people, `json` for scripts.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// The same as `--format json` (kept for older scripts).
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
}

impl FormatArg {
    /// The format asked for.
    pub fn get(&self) -> OutputFormat {
        if self.json { OutputFormat::Json } else { self.format }
    }
}

/// `--set KEY=VALUE` (repeatable): spec values overridden before the spec is checked.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SetArgs {
    /// Override a spec value, e.g. `--set run.iterations=20 --set sweep.batch_sizes=[32,64]` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub values: Vec<String>,
}

impl SetArgs {
    /// The overrides, or the diagnostics of the malformed ones.
    pub fn parse(&self) -> Result<Overrides, Vec<Diagnostic>> {
        Overrides::parse(&self.values)
    }

    /// The overrides; malformed ones are printed on standard output in `format` and the command's outcome is
    /// returned as the error ([`Outcome::InvalidInput`]).
    pub fn parse_or_print(&self, format: OutputFormat) -> Result<Overrides, Outcome> {
        self.parse().map_err(|diagnostics| print_override_errors(format, diagnostics))
    }
}

/// A precision named on the command line that trainbench does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown precision `{0}` (expected fp32, fp16 or bf16)")]
pub struct UnknownPrecision(String);

/// `--precision fp32|fp16|bf16` (`analyze`, `calibrate`).
pub fn parse_precision(s: &str) -> Result<Precision, UnknownPrecision> {
    match s {
        "fp32" => Ok(Precision::Fp32),
        "fp16" => Ok(Precision::Fp16),
        "bf16" => Ok(Precision::Bf16),
        _ => Err(UnknownPrecision(s.to_string())),
    }
}

/// Print malformed `--set` arguments (as text, or as one JSON file report naming `--set`) and say the input is
/// invalid.
fn print_override_errors(format: OutputFormat, diagnostics: Vec<Diagnostic>) -> Outcome {
    match format {
        OutputFormat::Json => {
            let report = FileReport {
                file: "--set".into(),
                valid: false,
                name: None,
                sha256: None,
                runs: None,
                kind: None,
                diagnostics,
            };
            outln!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
        OutputFormat::Text => out!("{}", render_text(&diagnostics)),
    }
    Outcome::InvalidInput
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Probe {
        #[command(flatten)]
        format: FormatArg,
        #[command(flatten)]
        set: SetArgs,
    }

    fn parse(args: &[&str]) -> Result<Probe, clap::Error> {
        Probe::try_parse_from(std::iter::once("probe").chain(args.iter().copied()))
    }

    #[test]
    fn json_is_an_alias_of_format_json() {
        assert_eq!(parse(&[]).unwrap().format.get(), OutputFormat::Text);
        assert_eq!(parse(&["--format", "json"]).unwrap().format.get(), OutputFormat::Json);
        assert_eq!(parse(&["--json"]).unwrap().format.get(), OutputFormat::Json);
        assert!(parse(&["--json", "--format", "text"]).is_err());
    }

    #[test]
    fn sets_are_repeatable_and_parsed() {
        let p = parse(&["--set", "run.iterations=5", "--set", "run.warmup=1"]).unwrap();
        assert_eq!(p.set.values, ["run.iterations=5", "run.warmup=1"]);
        assert!(p.set.parse().is_ok());
        let bad = parse(&["--set", "run.iterations"]).unwrap();
        assert!(bad.set.parse().is_err());
    }
}
