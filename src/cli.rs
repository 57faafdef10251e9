//! The command line both binaries share: the arguments (`clap`), which commands need the training engine, and
//! the mapping of outcomes and errors to exit codes. The `trainbench` front binary links no backend: the
//! commands that train or touch a device (`run`, `devices`, `calibrate`, `audit` with a re-run, and the internal
//! `worker` and `slurm-task`) are handed over to `trainbench-engine` ([`crate::handoff`]) before anything
//! happens; the others run where they are and start in milliseconds.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{self, CommandError, Outcome};
use crate::handoff;

/// Which binary is running: the front (no engines) or the engine binary, whose `main` installed its engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `trainbench`: hands the commands that need an engine to `trainbench-engine`.
    Front,
    /// `trainbench-engine`: runs every command itself.
    Engine,
}

/// Declarative, reproducible benchmarks of DNN training performance.
#[derive(Debug, Parser)]
#[command(name = "trainbench", version, about, long_about = None)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check spec files (and folders of them) against the schema and the semantic rules.
    Validate(commands::validate::Args),
    /// Print the runs a spec expands to (the sweep product).
    Plan(commands::plan::Args),
    /// Print parameters, FLOPs and the memory estimate of a spec's model.
    Analyze(commands::analyze::Args),
    /// Measure this machine's device (GEMM and convolution rates, memory bandwidth, per-op overhead) into a
    /// hardware profile for `predict`.
    Calibrate(commands::calibrate::Args),
    /// Predict step time, throughput and the data/compute/comm shares on hardware profiles (PAI's model).
    Predict(commands::predict::Args),
    /// Run benchmarks and write one result file per run (here, or on a Slurm cluster with `--on slurm`).
    Run(Box<commands::run::Args>),
    /// Where the runs of a Slurm submission stand; `--resume` submits the failed or missing ones again.
    Status(commands::status::Args),
    /// Print the JSON Schema of specs (or of results).
    Schema(commands::schema::Args),
    /// Compare the shape of results (metrics, units, series lengths) with golden files.
    Check(commands::check::Args),
    /// Compare a candidate result set with a baseline: ratio of medians, confidence interval, verdict.
    Compare(commands::compare::Args),
    /// Write an HTML + Markdown report with SVG plots and a CSV of every run.
    Report(commands::report::Args),
    /// Check a result's integrity, re-run it on this machine, and say whether it reproduces.
    Audit(commands::audit::Args),
    /// Results that accumulate: record results into a history store, list and show series, detect change points,
    /// gate a candidate against a baseline (exit 0 pass, 1 regression, 3 inconclusive), acknowledge changes.
    History(commands::history::Args),
    /// Read results published elsewhere into trainbench results: `import mlperf PATH` for MLPerf Training logs.
    Import(commands::import::Args),
    /// List the devices every backend built into this binary can run on.
    Devices(commands::devices::Args),
    /// Run one repeat handed over by `trainbench run` on stdin (internal: repeats in processes of their own).
    #[command(hide = true)]
    Worker(commands::worker::Args),
    /// Run one task of a Slurm submission (internal: started by the batch scripts `run --on slurm` writes).
    #[command(hide = true)]
    SlurmTask(commands::slurm_task::Args),
    /// Print the shared-memory copy local MPI ranks may use here, `cma` or `none` (internal: asked by the batch
    /// scripts `run --on slurm` writes).
    #[command(hide = true)]
    SingleCopy,
}

impl Command {
    /// Whether the command trains or opens a device, and so runs in `trainbench-engine`.
    pub fn needs_engine(&self) -> bool {
        match self {
            Command::Run(_) | Command::Devices(_) | Command::Calibrate(_) | Command::Worker(_) => true,
            Command::SlurmTask(_) => true,
            Command::Audit(a) => !a.integrity_only,
            _ => false,
        }
    }
}

/// Parse the arguments, run the command (or hand it over to the engine binary), and map the outcome to the exit
/// code.
pub fn main(binary: Binary) -> ExitCode {
    let cli = Cli::parse();
    if binary == Binary::Engine
        && let Err(e) = handoff::check_front()
    {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if binary == Binary::Front && cli.command.needs_engine() {
        return hand_over();
    }
    let result = match &cli.command {
        Command::Validate(a) => commands::validate::execute(a),
        Command::Plan(a) => commands::plan::execute(a),
        Command::Analyze(a) => commands::analyze::execute(a),
        Command::Calibrate(a) => commands::calibrate::execute(a),
        Command::Predict(a) => commands::predict::execute(a),
        Command::Run(a) => commands::run::execute(a),
        Command::Schema(a) => commands::schema::execute(a),
        Command::Check(a) => commands::check::execute(a),
        Command::Compare(a) => commands::compare::execute(a),
        Command::Report(a) => commands::report::execute(a),
        Command::Audit(a) => commands::audit::execute(a),
        Command::Devices(a) => commands::devices::execute(a),
        Command::History(a) => commands::history::execute(a),
        Command::Import(a) => commands::import::execute(a),
        Command::Worker(a) => commands::worker::execute(a),
        Command::Status(a) => commands::status::execute(a),
        Command::SlurmTask(a) => commands::slurm_task::execute(a),
        Command::SingleCopy => commands::single_copy::execute(),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        Ok(Outcome::InvalidInput) => ExitCode::from(2),
        Ok(Outcome::Inconclusive) => ExitCode::from(3),
        Ok(Outcome::Code(code)) => ExitCode::from(code),
        Err(CommandError::NeedsEngine) if binary == Binary::Front => hand_over(),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Replace this process with `trainbench-engine` and the same arguments; returns only when that fails.
fn hand_over() -> ExitCode {
    let e = handoff::exec_engine();
    eprintln!("error: {e}");
    ExitCode::from(1)
}
