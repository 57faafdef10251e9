//! `trainbench history`: results that accumulate. `record` adds results to the store, `list` and `show` print
//! the series, `detect` finds change points and says what changed in the environment, `gate` is the CI check,
//! `ack` accepts a known change, `report` writes the HTML page, `rebuild` recreates the store from the result files,
//! `bisect` finds the commit that made a benchmark slower. The front binary runs them all (no backend needed).

pub mod bisect;
pub mod bisect_step;
pub mod common;
pub mod gate;
pub mod ingest;
pub mod view;

use crate::commands::{CommandError, Outcome};

/// Arguments of `trainbench history`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The subcommand.
    #[command(subcommand)]
    pub command: HistoryCommand,
}

/// The `history` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum HistoryCommand {
    /// Add result files to the store (the same run twice is a no-op; inconsistent results are refused).
    Record(ingest::RecordArgs),
    /// List the series with their point count, last value and last change point.
    List(view::ListArgs),
    /// One series' points, change points and acknowledged changes.
    Show(view::ShowArgs),
    /// Change points of every series, each with the environment fields that changed (exit 1 on a regression
    /// not yet acknowledged).
    Detect(view::ListArgs),
    /// Gate candidate results against a baseline in the store: exit 0 pass, 1 regression, 3 inconclusive.
    Gate(gate::GateArgs),
    /// Accept a known change of a series: its statistics restart at that point.
    Ack(ingest::AckArgs),
    /// Write a static HTML page of every series over time, change points and acknowledged changes marked.
    Report(view::ReportArgs),
    /// Recreate the store from result files (revisions and acknowledgements of a readable store are kept).
    Rebuild(ingest::RecordArgs),
    /// Find the commit that made a benchmark slower: `git bisect run` with the gate (exit 0 found, 3 hidden by
    /// skipped commits, 130 interrupted).
    Bisect(bisect::BisectArgs),
    /// One step of `history bisect` (run by `git bisect run`).
    #[command(hide = true)]
    BisectStep(bisect_step::StepArgs),
}

/// Carry out `trainbench history`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    match &args.command {
        HistoryCommand::Record(a) => ingest::record(a),
        HistoryCommand::List(a) => view::list(a),
        HistoryCommand::Show(a) => view::show(a),
        HistoryCommand::Detect(a) => view::detect_all(a),
        HistoryCommand::Gate(a) => gate::execute(a),
        HistoryCommand::Ack(a) => ingest::ack(a),
        HistoryCommand::Report(a) => view::report(a),
        HistoryCommand::Rebuild(a) => ingest::rebuild(a),
        HistoryCommand::Bisect(a) => bisect::execute(a),
        HistoryCommand::BisectStep(a) => bisect_step::execute(a),
    }
}
