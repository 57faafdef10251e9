//! The `run` subcommand: runs the specs' benchmarks, writes one result file per run (plus an index per spec)
//! and prints a summary table with, under it, the reason of every run that did not complete (`--quiet` leaves
//! only errors and failed runs' reasons). It refuses to replace results already in `--out` unless
//! `--overwrite` says so. With `--on slurm` it hands the runs to Slurm instead (one job array task per run, see
//! `crate::slurm`): writes the submission next to the results, submits it (or prints its batch scripts with
//! `--dry-run`) and with `--wait` waits for it and prints its status.

use std::path::{Path, PathBuf};

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use trainbench_contract::mock::MockConfig;

use super::args::{FormatArg, OutputFormat, SetArgs};
use super::{CommandError, Outcome};
use crate::backend_registry::BackendChoice;
use crate::format::{self, human_bytes};
use crate::hardware::ProfileValidator;
use crate::history::recorder::Recorder;
use crate::mlperf::output::SuiteLog;
use crate::mlperf::score;
use crate::plan::PlacementOverride;
use crate::predict::record::RunProfile;
use crate::report::expert_load;
use crate::report::model::comm_share_of;
use crate::result::{RunOutcome, RunResult};
use crate::runner::{self, RunnerOptions, Suite, TestHooks, output, probe};
use crate::slurm::plan_file::PlanFile;
use crate::slurm::script::{SlurmOptions, array_list};
use crate::slurm::{status, submit};
use crate::spec::SpecValidator;
use crate::spec::diagnostics::{Diagnostic, render_text};
use crate::spec::rules;

/// Arguments of `trainbench run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Spec files to run.
    #[arg(required = true, value_name = "SPEC")]
    pub specs: Vec<PathBuf>,
    /// Backend, overriding `topology.backend`.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// Device selector, overriding `topology.device` (`cpu`, `cuda:0`, ...).
    #[arg(long, value_name = "D")]
    pub device: Option<trainbench_contract::DeviceSelector>,
    /// Spec values overridden before validating.
    #[command(flatten)]
    pub set: SetArgs,
    /// Results folder; each spec writes to `<DIR>/<spec name>/<run id>.json`. A folder already holding results of
    /// the same runs is refused before anything runs, unless `--overwrite` is given.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    /// Replace results of the same runs already in `--out` (without it, `run` refuses to start).
    #[arg(long)]
    pub overwrite: bool,
    /// Print only errors and the reasons of failed runs: no progress (bars, or lines when stderr is not a
    /// terminal), per-run lines, spec warnings or summary table (`--format json` still prints its summary); the
    /// exit code says how the runs went.
    #[arg(long, short)]
    pub quiet: bool,
    /// Summary format (text: a table; JSON: one object per run).
    #[command(flatten)]
    pub format: FormatArg,
    /// Turn the background collectors (CPU, NVML) off, to measure their overhead on step time.
    #[arg(long)]
    pub no_collectors: bool,
    /// Hardware profile each result's prediction is made on: a path, or a shipped profile's name (`v100`, ...).
    /// Without it, this machine's calibrated profile (`$TRAINBENCH_HARDWARE`, else
    /// `hardware/this-machine.toml`) is used for the runs on the backend and device it was calibrated on; the
    /// other runs record why they have no prediction.
    #[arg(long, value_name = "PROFILE")]
    pub hardware: Option<String>,
    /// Mock backend only: multiply step times by this factor (simulates a regression for testing `compare`).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub mock_slowdown: f64,
    /// For trainbench's own tests: the runner's test hooks as JSON (see `runner::TestHooks`).
    #[arg(long, value_name = "JSON", hide = true)]
    pub test_hooks: Option<String>,
    /// Where the runs go: `local` (this machine) or `slurm` (each run one task of a Slurm job array, written to
    /// `--out` exactly as a local run would; follow them with `trainbench status DIR`).
    #[arg(long, value_enum, default_value_t = RunOn::Local)]
    pub on: RunOn,
    /// `--on slurm`: the partition to submit to.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// `--on slurm`: the account to charge.
    #[arg(long, value_name = "A")]
    pub account: Option<String>,
    /// `--on slurm`: every task's time limit in Slurm's format (`30`, `1:30:00`), instead of the one derived from
    /// `run.timeout_s`.
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// `--on slurm`: a further `sbatch` option for the batch scripts, e.g. `--slurm-arg=--qos=high` (repeatable).
    #[arg(long = "slurm-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub slurm_args: Vec<String>,
    /// `--on slurm`: write the plan file and batch scripts and print the scripts, without submitting (submit
    /// them later with `trainbench status DIR --resume`).
    #[arg(long)]
    pub dry_run: bool,
    /// `--on slurm`: wait until every task ended, then print the status.
    #[arg(long)]
    pub wait: bool,
    /// Record each result into the history store right after its file is written (`trainbench history`; a
    /// result the store missed is added later by `history record`).
    #[arg(long)]
    pub record: bool,
    /// `--record`: the history store, a SQLite file or a `postgres://` URL (default `$TRAINBENCH_STORE`, else
    /// `results/history.sqlite`).
    #[arg(long, value_name = "PATH|URL", requires = "record")]
    pub store: Option<String>,
    /// Write an MLPerf Training log (`:::MLLOG` lines) of every run to this path, beside its JSON result;
    /// `{run_id}`, `{config}` and `{repeat}` are replaced by the run's, e.g.
    /// `mlperf/results/<system>/llama31_8b/result_{repeat}.txt`. The submission fields come from the spec's
    /// `[mlperf]` table (whose `log` sets a path without this flag). See docs/mlperf.md.
    #[arg(long, value_name = "PATH")]
    pub mllog: Option<String>,
    /// `--record`: the revision of the code under test (default `$GITHUB_SHA`, else `$CI_COMMIT_SHA`, else the
    /// working directory's commit).
    #[arg(long, value_name = "REV", requires = "record")]
    pub revision: Option<String>,
}

/// Where `trainbench run` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RunOn {
    /// This machine.
    #[default]
    Local,
    /// A Slurm cluster (this machine is a login node with `sbatch`).
    Slurm,
}

/// The profile the runs are predicted on: `--hardware` (refused when it does not load), else this machine's.
fn run_profile(named: Option<&str>) -> Result<RunProfile, CommandError> {
    let v = ProfileValidator::new()?;
    match named {
        Some(name) => v
            .resolve(name)
            .map(RunProfile::Given)
            .map_err(|d| CommandError::Input(render_text(&d).trim_end().to_string())),
        None => Ok(RunProfile::this_machine(&v, &std::env::current_dir().unwrap_or_default())),
    }
}

/// `--record`: the history store, opened before any run so that a wrong location fails at once.
fn open_recorder(args: &Args) -> Result<Option<Recorder>, CommandError> {
    if !args.record || silent_rank() {
        return Ok(None);
    }
    let location = crate::history::store::location(args.store.as_deref());
    let revision = args.revision.clone().or_else(crate::history::record::default_revision);
    Recorder::open(&location, revision).map(Some).map_err(|e| CommandError::Input(e.to_string()))
}

/// Carry out `trainbench run`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    if args.on == RunOn::Local {
        refuse_slurm_options(args)?;
    }
    let Some(loaded) = load_suites(args)? else {
        return Ok(Outcome::InvalidInput);
    };
    if args.on == RunOn::Slurm {
        return on_slurm(args, &loaded);
    }
    let (suites, logs): (Vec<Suite>, Vec<Option<SuiteLog>>) = loaded.into_iter().map(|l| (l.suite, l.mllog)).unzip();
    if !(args.mock_slowdown.is_finite() && args.mock_slowdown > 0.0) {
        return Err(CommandError::Input(format!(
            "--mock-slowdown must be a positive number, not {}",
            args.mock_slowdown
        )));
    }
    let test_hooks = match &args.test_hooks {
        Some(json) => TestHooks::from_json(json).map_err(|e| CommandError::Input(e.to_string()))?,
        None => TestHooks::default(),
    };
    let progress_interval = probe::progress_interval_from_env().map_err(|e| CommandError::Input(e.to_string()))?;
    if !args.overwrite {
        refuse_to_replace(&args.out, &suites)?;
    }
    let hardware = run_profile(args.hardware.as_deref())?;
    let mut recorder = open_recorder(args)?;
    probe::install_interrupt_handler();
    let opts = RunnerOptions {
        out_dir: args.out.clone(),
        progress: !args.quiet,
        progress_interval,
        no_collectors: args.no_collectors,
        mock: MockConfig { slowdown: args.mock_slowdown, ..MockConfig::default() },
        test_hooks,
        hardware,
        // Repeats of a spec with `run.isolation = "process"` run in `trainbench worker` processes.
        worker_exe: std::env::current_exe().ok(),
        ..RunnerOptions::default()
    };
    let mut all: Vec<(RunResult, PathBuf)> = Vec::new();
    let mut interrupted = false;
    let mut log_failed = false;
    for (suite, log) in suites.iter().zip(&logs) {
        let mut written = Vec::new();
        let mut on_result = |r: &RunResult, path: &Path| {
            if !args.quiet {
                eprintln!("{:<13} {}  -> {}", r.outcome.status(), r.run_id, path.display());
            }
            match log.as_ref().map(|l| l.write(r)) {
                Some(Ok(file)) if !args.quiet => eprintln!("{:<13} {}  -> {}", "mllog", r.run_id, file.display()),
                Some(Err(e)) => {
                    eprintln!("error: the MLPerf log of {} was not written: {e}", r.run_id);
                    log_failed = true;
                }
                _ => {}
            }
            if let Some(recorder) = recorder.as_mut()
                && let Err(e) = recorder.record(r, path)
            {
                eprintln!(
                    "warning: {} was written but not recorded: {e}; `trainbench history record {}` records it",
                    path.display(),
                    path.display()
                );
            }
            written.push((r.clone(), path.to_path_buf()));
        };
        let report = runner::run_suite(suite, &opts, &mut on_result)?;
        all.extend(written);
        if report.interrupted {
            interrupted = true;
            break;
        }
    }
    // The reasons of the runs that did not complete, one line each: with `--quiet` only the failed runs', the
    // ones the exit code reports. Under the table they go to stdout with it: they are its footnotes (a row that
    // says `failed` has no figures, the line says why), and whoever keeps the table (`> summary.txt`, a CI
    // step's output) keeps them too. Anywhere else stdout is empty (`--quiet`) or JSON for scripts (where each
    // row's `outcome` holds the reason already), so they go to stderr.
    if silent_rank() {
        return Ok(Outcome::Success);
    }
    let reasons: Vec<String> = all
        .iter()
        .filter(|(r, _)| !args.quiet || matches!(r.outcome, RunOutcome::Failed { .. }))
        .filter_map(|(r, _)| reason_line(&r.run_id, &r.outcome))
        .collect();
    match args.format.get() {
        OutputFormat::Text if args.quiet => reasons.iter().for_each(|l| eprintln!("{l}")),
        OutputFormat::Text => {
            outln!("{}", summary_table(&all));
            score::summary_lines(all.iter().map(|(r, _)| r)).iter().for_each(|l| outln!("{l}"));
            all.iter().filter_map(|(r, _)| expert_load::summary_line(r)).for_each(|l| outln!("{l}"));
            reasons.iter().for_each(|l| outln!("{l}"));
            if interrupted {
                outln!("interrupted: finished runs were kept");
            }
        }
        OutputFormat::Json => {
            reasons.iter().for_each(|l| eprintln!("{l}"));
            let rows: Vec<serde_json::Value> = all.iter().map(|(r, p)| summary_json(r, p)).collect();
            outln!("{}", serde_json::to_string_pretty(&rows)?);
        }
    }
    let failed = log_failed || all.iter().any(|(r, _)| matches!(r.outcome, RunOutcome::Failed { .. }));
    Ok(if failed || interrupted { Outcome::Failure } else { Outcome::Success })
}

/// Whether this process is a rank other than 0 of a group an external launcher started (`mpirun -n N
/// trainbench run`): rank 0 writes and prints the results, the others stay silent.
fn silent_rank() -> bool {
    runner::dist::LauncherEnv::get().is_secondary_rank()
}

/// A validated spec's suite, with what a Slurm submission needs beside it.
struct Loaded {
    /// The spec file as given.
    source: String,
    suite: Suite,
    /// Its MLPerf logs, when asked for.
    mllog: Option<SuiteLog>,
}

/// Validate every spec (with the `--set` overrides) before running any; `None` after printing diagnostics
/// when one is invalid.
fn load_suites(args: &Args) -> Result<Option<Vec<Loaded>>, CommandError> {
    let overrides = match args.set.parse() {
        Ok(o) => o,
        Err(diagnostics) => {
            eprint!("{}", render_text(&diagnostics));
            return Ok(None);
        }
    };
    let validator = SpecValidator::new()?;
    let mut suites = Vec::new();
    let mut invalid = false;
    for path in &args.specs {
        let checked = validator.check_file(path, &path.display().to_string(), &overrides);
        if !args.quiet || checked.spec.is_none() {
            eprint!("{}", render_text(&checked.diagnostics));
        }
        let Some(spec) = checked.spec else {
            invalid = true;
            continue;
        };
        let over = PlacementOverride { backend: args.backend, device: args.device };
        let mut refused = Vec::new();
        if over != PlacementOverride::default() {
            // Overrides bypass the spec's own backend check: refuse what the chosen backend cannot run now.
            refused = rules::check_support_on(&spec, over);
        }
        if refused.is_empty() {
            // What this machine cannot start (the engine of a data-parallel group).
            refused = rules::check_launch(&spec, over)?;
        }
        if refused.is_empty() {
            // A mesh the backend cannot train (never accepted and ignored).
            refused = rules::check_runnable(&spec, over);
        }
        if !refused.is_empty() {
            let display = path.display().to_string();
            let diagnostics: Vec<Diagnostic> =
                refused.into_iter().map(|f| Diagnostic::error(&display, f.message).maybe_hint(f.hint)).collect();
            eprint!("{}", render_text(&diagnostics));
            invalid = true;
            continue;
        }
        let suite = Suite::placed(&spec, over);
        let mllog = SuiteLog::plan(args.mllog.as_deref(), &spec, &suite, &args.out)
            .map_err(|e| CommandError::Input(format!("{}: {e}", path.display())))?;
        suites.push(Loaded { source: path.display().to_string(), suite, mllog });
    }
    Ok((!invalid).then_some(suites))
}

/// Refuse, before any run starts (and any worker process), to replace result files already in `out`.
fn refuse_to_replace(out: &Path, suites: &[Suite]) -> Result<(), CommandError> {
    let existing = output::existing_results(out, suites);
    let Some(first) = existing.first() else { return Ok(()) };
    let n = existing.len();
    let (files, them) = if n == 1 { ("result file", "it") } else { ("result files", "them") };
    Err(CommandError::Input(format!(
        "{} already holds {n} {files} of these runs (such as {}), which this run would replace; pass \
         `--overwrite` to replace {them}, or choose another `--out`",
        out.display(),
        first.display()
    )))
}

/// Refuse the Slurm options without `--on slurm` (never accepted and ignored).
fn refuse_slurm_options(args: &Args) -> Result<(), CommandError> {
    let given = [
        ("--partition", args.partition.is_some()),
        ("--account", args.account.is_some()),
        ("--time", args.time.is_some()),
        ("--slurm-arg", !args.slurm_args.is_empty()),
        ("--dry-run", args.dry_run),
        ("--wait", args.wait),
    ];
    match given.iter().find(|(_, on)| *on) {
        Some((name, _)) => Err(CommandError::Input(format!(
            "{name} is an option of `--on slurm`; add `--on slurm` to hand the runs to Slurm, or leave {name} out"
        ))),
        None => Ok(()),
    }
}

/// `--on slurm`: write the submission next to the results, then submit it (or print it with `--dry-run`).
fn on_slurm(args: &Args, loaded: &[Loaded]) -> Result<Outcome, CommandError> {
    let opts = SlurmOptions {
        partition: args.partition.clone(),
        account: args.account.clone(),
        time: args.time.clone(),
        extra: args.slurm_args.clone(),
    };
    opts.check().map_err(|e| CommandError::Input(e.to_string()))?;
    if loaded.iter().any(|l| l.mllog.is_some()) {
        return Err(CommandError::Input(
            "MLPerf logs (`--mllog`, `mlperf.log`) are written by local runs only; run without `--on slurm`, or \
             without the log"
                .into(),
        ));
    }
    if args.test_hooks.is_some() {
        return Err(CommandError::Input("--test-hooks is not passed on to Slurm tasks; run without it".into()));
    }
    if !(args.mock_slowdown.is_finite() && args.mock_slowdown > 0.0) {
        return Err(CommandError::Input(format!(
            "--mock-slowdown must be a positive number, not {}",
            args.mock_slowdown
        )));
    }
    if args.format.get() == OutputFormat::Json && !args.wait {
        return Err(CommandError::Input(
            "`--on slurm --format json` prints the status after `--wait`; add `--wait`, or see the status as JSON \
             later with `trainbench status DIR --format json`"
                .into(),
        ));
    }
    let suites: Vec<Suite> = loaded.iter().map(|l| l.suite.clone()).collect();
    if !args.overwrite {
        refuse_to_replace(&args.out, &suites)?;
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|source| CommandError::Io { path: args.out.display().to_string(), source })?;
    let out = std::fs::canonicalize(&args.out)
        .map_err(|source| CommandError::Io { path: args.out.display().to_string(), source })?;
    let existing = output::existing_results(&out, &suites);
    let moved = submit::prepare(&out, args.overwrite, &existing)?;
    for m in moved.iter().filter(|_| !args.quiet) {
        eprintln!("kept the earlier result as {}", m.display());
    }
    let exe = std::env::current_exe().and_then(std::fs::canonicalize).map_err(CommandError::OwnExecutable)?;
    let entries: Vec<(String, Suite)> = loaded.iter().map(|l| (l.source.clone(), l.suite.clone())).collect();
    let mock = MockConfig { slowdown: args.mock_slowdown, ..MockConfig::default() };
    let mut plan = PlanFile::new(out.clone(), exe, &entries, args.no_collectors, mock);
    let scripts = submit::write_submission(&mut plan, &opts)?;
    let dir = crate::slurm::submission_dir(&out);
    if args.dry_run {
        for s in &scripts {
            outln!("# {}", dir.join(&s.name).display());
            out!("{}", s.text);
        }
        eprintln!(
            "{} runs in {} batch script(s), not submitted: submit them with `trainbench status {} --resume`",
            plan.tasks.len(),
            scripts.len(),
            out.display()
        );
        return Ok(Outcome::Success);
    }
    for s in &scripts {
        let job = submit::submit(&out, &s.name, &s.tasks)?;
        if !args.quiet {
            eprintln!("submitted job {} ({}): tasks {}", job.job, s.name, array_list(&s.tasks));
        }
    }
    if !args.wait {
        if !args.quiet {
            eprintln!("follow the runs with `trainbench status {}`", out.display());
        }
        return Ok(Outcome::Success);
    }
    probe::install_interrupt_handler();
    let (_, report) = status::wait(&out, std::time::Duration::from_secs(2))?;
    match args.format.get() {
        OutputFormat::Text if args.quiet => {}
        OutputFormat::Text => outln!("{}", status::render_text(&report).trim_end()),
        OutputFormat::Json => {
            outln!("{}", serde_json::to_string_pretty(&report)?)
        }
    }
    let unfinished = report.tasks.iter().any(|t| t.state.resubmitted());
    Ok(if unfinished { Outcome::Failure } else { Outcome::Success })
}

/// The end-of-run table: one row per run.
pub fn summary_table(rows: &[(RunResult, PathBuf)]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let header =
        ["run", "outcome", "samples/s", "median step", "p95 step", "mem peak", "GPU util", "FLOP util", "comm"];
    // Runs with a target add their time to train (MLPerf's score: `run_stop - run_start`).
    let trained = rows.iter().any(|(r, _)| score::time_to_train(r).is_some());
    t.set_header(header.iter().copied().chain(trained.then_some("to train")));
    for (r, _) in rows {
        let dash = || "-".to_string();
        let row = match &r.metrics {
            Some(m) => vec![
                format!("{:.1}", m.throughput.samples_per_s),
                format::ms(m.step_time.median_s),
                format::ms(m.step_time.p95_s),
                // The allocator peak where the backend has one (CUDA), else the process's resident memory.
                m.memory
                    .measured
                    .peak_allocated_bytes
                    .map(human_bytes)
                    .or_else(|| m.cpu.get().map(|c| format!("{} RSS", human_bytes(c.rss_max_bytes))))
                    .unwrap_or_else(dash),
                m.gpu.get().map(|g| format!("{:.1}%", g.utilization_mean_percent)).unwrap_or_else(dash),
                m.flops.fraction.map(format::percent).unwrap_or_else(dash),
                comm_share_of(r).map(format::percent).unwrap_or_else(dash),
            ],
            None => vec![dash(); 7],
        };
        let mut cells = vec![r.run_id.clone(), r.outcome.status().to_string()];
        cells.extend(row);
        if trained {
            cells.push(score::time_to_train(r).map(score::cell).unwrap_or_else(|| "-".into()));
        }
        t.add_row(cells);
    }
    t
}

/// Longest message a reason line shows; the result file holds all of it.
const REASON_CHARS: usize = 300;

/// Why run `run_id` did not complete, as one line: `<run id>: <status>: <message>`; `None` for a completed run.
/// A framework message of several lines (a C++ backtrace) or of more than [`REASON_CHARS`] characters is cut to
/// its first line and that length, saying so. The one place these lines are written.
pub fn reason_line(run_id: &str, outcome: &RunOutcome) -> Option<String> {
    let message = match outcome {
        RunOutcome::Completed => return None,
        RunOutcome::OutOfMemory { batch_size, message } => format!("batch size {batch_size}: {message}"),
        RunOutcome::Failed { message } => message.clone(),
        RunOutcome::Interrupted { reason } | RunOutcome::Skipped { reason } => reason.clone(),
    };
    let message = message.trim();
    let first = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let mut shown: String = first.chars().take(REASON_CHARS).collect();
    if message.is_empty() {
        shown.push_str("(no message)");
    } else if shown.len() < message.len() {
        shown.push_str(" [...; the result file has the whole message]");
    }
    Some(format!("{run_id}: {}: {shown}", outcome.status()))
}

fn summary_json(r: &RunResult, path: &Path) -> serde_json::Value {
    let m = r.metrics.as_ref();
    serde_json::json!({
        "spec": r.spec_name,
        "run_id": r.run_id,
        "outcome": r.outcome,
        "file": path.display().to_string(),
        "samples_per_s": m.map(|m| m.throughput.samples_per_s),
        "median_step_s": m.map(|m| m.step_time.median_s),
        "p95_step_s": m.map(|m| m.step_time.p95_s),
        "peak_allocated_bytes": m.and_then(|m| m.memory.measured.peak_allocated_bytes),
        "gpu_utilization_percent": m.and_then(|m| m.gpu.get().map(|g| g.utilization_mean_percent)),
        "flop_utilization": m.and_then(|m| m.flops.fraction),
        "comm_share": comm_share_of(r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(message: &str) -> RunOutcome {
        RunOutcome::Failed { message: message.into() }
    }

    #[test]
    fn a_reason_is_one_line_with_the_run_and_its_status() {
        assert_eq!(reason_line("r", &RunOutcome::Completed), None);
        assert_eq!(reason_line("r", &failed("boom")).as_deref(), Some("r: failed: boom"));
        let oom = RunOutcome::OutOfMemory { batch_size: 64, message: "CUDA out of memory".into() };
        assert_eq!(reason_line("r", &oom).as_deref(), Some("r: out_of_memory: batch size 64: CUDA out of memory"));
        let skipped = RunOutcome::Skipped { reason: "batch size 32 already ran out of memory".into() };
        assert_eq!(reason_line("r", &skipped).as_deref(), Some("r: skipped: batch size 32 already ran out of memory"));
        let timeout = RunOutcome::Interrupted { reason: "timeout after 5 s".into() };
        assert_eq!(reason_line("r", &timeout).as_deref(), Some("r: interrupted: timeout after 5 s"));
    }

    #[test]
    fn a_long_or_multi_line_message_is_cut_and_says_so() {
        let line = reason_line("r", &failed("\nerror in kernel\nException raised from f at a.cpp:1\nframe #0"))
            .unwrap_or_default();
        assert_eq!(line, "r: failed: error in kernel [...; the result file has the whole message]");
        let long = "é".repeat(REASON_CHARS + 5);
        let line = reason_line("r", &failed(&long)).unwrap_or_default();
        assert_eq!(line.lines().count(), 1);
        assert!(line.contains(&"é".repeat(REASON_CHARS)) && !line.contains(&"é".repeat(REASON_CHARS + 1)), "{line}");
        assert!(line.ends_with("[...; the result file has the whole message]"), "{line}");
        assert_eq!(reason_line("r", &failed("")).as_deref(), Some("r: failed: (no message)"));
    }
}
