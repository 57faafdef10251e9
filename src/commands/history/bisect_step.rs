//! One step of `history bisect`, the hidden `history bisect-step` that `git bisect run` runs at each revision:
//! run the user's command into a folder of its own, record what it measured with the revision, gate it against
//! the good revision's runs, and answer git (0 good, 1 bad, 125 skip, 128 stop the bisect). An inconclusive gate
//! runs the command again, up to `--max-repeats` times, before the revision is skipped. [`measure`] (one run of the
//! command, recorded) is also how `history bisect` measures the good revision.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::{StoreArg, read_results, store_error};
use super::gate::{figures_and_reason, outcome_name};
use crate::commands::{CommandError, Outcome};
use crate::history::analysis::{Baseline, GateResult, gate};
use crate::history::record::RunRecord;
use crate::history::store::Store;
use crate::stats::gate::{GateOptions, GateOutcome};

/// The environment variable naming the folder the command writes its result files into.
pub const OUT_ENV: &str = "TRAINBENCH_BISECT_OUT";
/// The environment variable holding the revision being measured (a full commit id).
pub const REVISION_ENV: &str = "TRAINBENCH_BISECT_REVISION";
/// The environment variable holding which run of the command at this revision this is (1, 2, ...).
pub const ATTEMPT_ENV: &str = "TRAINBENCH_BISECT_ATTEMPT";
/// The file, in a revision's folder, that keeps the step's verdict in words.
pub const VERDICT_FILE: &str = "verdict.txt";

/// `git bisect run`'s answer: the revision is good.
const GIT_GOOD: u8 = 0;
/// The revision is bad.
const GIT_BAD: u8 = 1;
/// The revision cannot be tested: skip it.
const GIT_SKIP: u8 = 125;
/// Stop the bisect (an error or an interrupt: no verdict on this revision).
const GIT_STOP: u8 = 128;

/// Arguments of the hidden `history bisect-step` (`history bisect` passes them; absolute paths).
#[derive(Debug, clap::Args)]
pub struct StepArgs {
    /// The good revision (a full commit id) whose runs in the store are the baseline.
    #[arg(long, value_name = "SHA")]
    pub good: String,
    /// Most runs of the command at one revision.
    #[arg(long, value_name = "N")]
    pub max_repeats: u32,
    /// The folder the revisions' result folders go into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The folder the command runs in.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The store (`history bisect` passes it as `$TRAINBENCH_STORE`, off the command line git prints).
    #[command(flatten)]
    pub store: StoreArg,
    /// The build-and-run command.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// What one run of the command at a revision gave.
#[derive(Debug)]
pub enum Measured {
    /// The runs it measured (already recorded in the store with the revision).
    Runs(Vec<RunRecord>),
    /// Nothing to judge, and why: the command failed or wrote no measured result.
    Failed(String),
    /// The command was interrupted (Ctrl-C or a termination signal).
    Interrupted,
}

/// The first twelve characters of a commit id.
pub fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// A new folder `<out>/<revision>/<n>` (the first `n` from 1 not yet there, so nothing measured before is
/// overwritten), and `n`.
fn claim_folder(out: &Path, revision: &str) -> Result<(PathBuf, u32), CommandError> {
    let parent = out.join(revision);
    let io = |path: &Path, source| CommandError::Io { path: path.display().to_string(), source };
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
    for n in 1..=u32::MAX {
        let folder = parent.join(n.to_string());
        match std::fs::create_dir(&folder) {
            Ok(()) => return Ok((folder, n)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&folder, e)),
        }
    }
    Err(io(&parent, std::io::Error::other("no free result folder")))
}

/// Whether the command ended from an interrupt or termination signal.
fn was_interrupted(status: &std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    // SIGHUP, SIGINT, SIGTERM.
    matches!(status.signal(), Some(1 | 2 | 15))
}

/// Run `command` in `dir` once at `revision` (checked out by the caller) into a new folder under `out`, and
/// record the runs it measured into `store` with the revision.
pub fn measure(
    command: &[String],
    dir: &Path,
    out: &Path,
    revision: &str,
    store: &mut dyn Store,
) -> Result<Measured, CommandError> {
    let Some((program, program_args)) = command.split_first() else {
        return Err(CommandError::Input("history bisect needs a command after `--`".into()));
    };
    let (folder, attempt) = claim_folder(out, revision)?;
    eprintln!("bisect: {}: running the command (run {attempt}) into {}", short(revision), folder.display());
    let status = Command::new(program)
        .args(program_args)
        .current_dir(dir)
        .env(OUT_ENV, &folder)
        .env(REVISION_ENV, revision)
        .env(ATTEMPT_ENV, attempt.to_string())
        .status();
    let status = match status {
        Ok(status) => status,
        Err(e) => return Ok(Measured::Failed(format!("could not start `{program}`: {e}"))),
    };
    if was_interrupted(&status) {
        return Ok(Measured::Interrupted);
    }
    if !status.success() {
        return Ok(Measured::Failed(format!("the command failed ({status})")));
    }
    let read = read_results(std::slice::from_ref(&folder), &|_| Some(revision.to_string()))?;
    if !read.refused.is_empty() {
        return Ok(Measured::Failed(format!("its results were refused: {}", read.refused.join("; "))));
    }
    if read.runs.is_empty() {
        return Ok(Measured::Failed(format!(
            "the command wrote no measured result into ${OUT_ENV} ({})",
            folder.display()
        )));
    }
    store.insert_runs(&read.runs).map_err(store_error)?;
    Ok(Measured::Runs(read.runs))
}

/// What the gate's answers at one revision mean for the bisect.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// Every configuration passed (or improved).
    Good,
    /// A configuration regressed.
    Bad,
    /// Inconclusive, and more runs of the command may decide.
    Again,
    /// Inconclusive, and more runs will not decide (or the bound is reached): why.
    Skip(String),
}

/// The decision on the gate's answers; `may_repeat` says whether the command may run again.
fn decide(results: &[GateResult], may_repeat: bool, max_repeats: u32) -> Decision {
    let min_runs = GateOptions::default().min_runs.max(2);
    if results.iter().any(|r| outcome_name(r) == "regression") {
        return Decision::Bad;
    }
    let open: Vec<&GateResult> = results.iter().filter(|r| outcome_name(r) == "inconclusive").collect();
    if open.is_empty() {
        return if results.is_empty() { Decision::Skip("nothing was gated".into()) } else { Decision::Good };
    }
    if let Some(r) = open.iter().find(|r| r.baseline_runs < min_runs) {
        return Decision::Skip(format!(
            "{}: the store holds {} run(s) of it at the good revision and the gate needs {min_runs} (measure the \
             good revision with more repeats: `--good-repeats`)",
            r.series, r.baseline_runs
        ));
    }
    let decidable = open.iter().any(|r| {
        r.candidate_runs < min_runs
            || matches!(r.verdict.map(|v| v.outcome), Some(GateOutcome::Inconclusive { more_repeats_needed: Some(_) }))
    });
    if !decidable {
        return Decision::Skip("inconclusive, and more repeats are not expected to decide it".into());
    }
    if !may_repeat {
        return Decision::Skip(format!("still inconclusive after {max_repeats} run(s) of the command (--max-repeats)"));
    }
    Decision::Again
}

/// One line per configuration: the outcome and the gate's figures.
pub fn result_lines(results: &[GateResult]) -> Vec<String> {
    results.iter().map(|r| format!("{} {}{}", outcome_name(r), r.series, figures_and_reason(r))).collect()
}

/// Print the step's verdict and keep it in `<out>/<revision>/verdict.txt` for the summary.
fn conclude(out: &Path, revision: &str, lines: &[String], verdict: &str) -> u8 {
    let mut text = String::new();
    for line in lines {
        eprintln!("bisect: {}: {line}", short(revision));
        text.push_str(&format!("{line}\n"));
    }
    eprintln!("bisect: {}: {verdict}", short(revision));
    text.push_str(&format!("{verdict}\n"));
    let file = out.join(revision).join(VERDICT_FILE);
    if let Err(e) = std::fs::write(&file, text) {
        eprintln!("bisect: warning: {}: {e}", file.display());
    }
    match verdict.split(' ').next() {
        Some("good") => GIT_GOOD,
        Some("bad") => GIT_BAD,
        _ => GIT_SKIP,
    }
}

/// The commit checked out in `dir`.
fn head(dir: &Path) -> Result<String, CommandError> {
    let out = crate::history::git::run(dir, &["rev-parse", "HEAD"])
        .map_err(|source| CommandError::Spawn { program: "git".into(), source })?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && !text.is_empty() {
        Ok(text)
    } else {
        Err(CommandError::ProgramFailed {
            program: "git rev-parse HEAD".into(),
            said: format!("{}: no commit checked out", dir.display()),
        })
    }
}

/// Measure and judge the revision checked out: git's exit code.
fn step(args: &StepArgs) -> Result<u8, CommandError> {
    let revision = head(&args.dir)?;
    let mut store = args.store.open()?;
    let baseline = Baseline::Revision(args.good.clone());
    let mut candidates: Vec<RunRecord> = Vec::new();
    let max_repeats = args.max_repeats.max(1);
    for attempt in 1..=max_repeats {
        match measure(&args.command, &args.dir, &args.out, &revision, store.as_mut())? {
            Measured::Runs(runs) => candidates.extend(runs),
            Measured::Interrupted => {
                eprintln!("bisect: {}: interrupted; stopping the bisect", short(&revision));
                return Ok(GIT_STOP);
            }
            Measured::Failed(why) => {
                return Ok(conclude(&args.out, &revision, &[], &format!("skip: {why}")));
            }
        }
        let results = gate(store.as_mut(), &candidates, &baseline, &GateOptions::default()).map_err(store_error)?;
        let lines = result_lines(&results);
        match decide(&results, attempt < max_repeats, max_repeats) {
            Decision::Good => return Ok(conclude(&args.out, &revision, &lines, "good (the gate passes)")),
            Decision::Bad => return Ok(conclude(&args.out, &revision, &lines, "bad (the gate finds a regression)")),
            Decision::Skip(why) => return Ok(conclude(&args.out, &revision, &lines, &format!("skip: {why}"))),
            Decision::Again => {
                for line in &lines {
                    eprintln!("bisect: {}: {line}", short(&revision));
                }
                eprintln!("bisect: {}: inconclusive; running the command again", short(&revision));
            }
        }
    }
    Ok(conclude(&args.out, &revision, &[], "skip: inconclusive"))
}

/// Carry out the hidden `history bisect-step`: any error stops the bisect rather than marking the revision.
pub fn execute(args: &StepArgs) -> Result<Outcome, CommandError> {
    match step(args) {
        Ok(code) => Ok(Outcome::Code(code)),
        Err(e) => {
            eprintln!("bisect: error: {e}; stopping the bisect");
            Ok(Outcome::Code(GIT_STOP))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::gate::GateVerdict;

    fn answer(outcome: Option<GateOutcome>, baseline_runs: usize, candidate_runs: usize) -> GateResult {
        GateResult {
            config_label: "toy.b8".into(),
            machine_label: "mock".into(),
            series: "toy.b8#1@2:step_time".into(),
            baseline_runs,
            candidate_runs,
            verdict: outcome.map(|outcome| GateVerdict {
                outcome,
                relative_change: 0.3,
                interval: (0.29, 0.31),
                p_value: 0.02,
                noise: 0.01,
                runs: (baseline_runs, candidate_runs),
            }),
            series_noise: None,
        }
    }

    #[test]
    fn the_gates_answers_decide_the_step() {
        let more = |n| Some(GateOutcome::Inconclusive { more_repeats_needed: n });
        let pass = answer(Some(GateOutcome::Pass), 6, 3);
        let regression = answer(Some(GateOutcome::Regression), 6, 6);
        let undecided = answer(more(Some(2)), 6, 3);
        assert_eq!(decide(std::slice::from_ref(&pass), true, 3), Decision::Good);
        assert_eq!(decide(&[answer(Some(GateOutcome::Improvement), 6, 3)], true, 3), Decision::Good);
        assert_eq!(decide(&[pass.clone(), regression], true, 3), Decision::Bad, "any configuration regressing");
        assert_eq!(decide(&[pass, undecided.clone()], true, 3), Decision::Again);
        assert!(matches!(decide(&[undecided], false, 3), Decision::Skip(why) if why.contains("--max-repeats")));
        assert!(
            matches!(decide(&[answer(more(None), 6, 6)], true, 3), Decision::Skip(why) if why.contains("not expected"))
        );
        assert!(
            matches!(decide(&[answer(None, 0, 3)], true, 3), Decision::Skip(why) if why.contains("--good-repeats"))
        );
        assert_eq!(decide(&[answer(more(None), 6, 2)], true, 3), Decision::Again, "too few candidate runs yet");
        assert!(matches!(decide(&[], true, 3), Decision::Skip(_)));
    }
}
