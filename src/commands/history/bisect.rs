//! `history bisect --good REV --bad REV -- COMMAND...`: find the commit of the current repository that made a
//! benchmark slower, with `git bisect run` and the gate's three outcomes. The good revision is measured first when
//! the store holds no run of it; each step (`history bisect-step`, [`super::bisect_step`]) runs the command,
//! records what it measured and gates it against the good revision's runs. At the end the first bad commit is
//! printed with the gate's figures, and `git bisect reset` puts the repository back where it was, also after an
//! error or an interrupt.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::bisect_step::{Measured, VERDICT_FILE, measure, short};
use super::common::{StoreArg, store_error};
use crate::commands::{CommandError, Outcome};
use crate::history::analysis::same_revision;
use crate::history::store::{STORE_ENV, is_postgres};

/// The exit code of an interrupted bisect (as a shell reports Ctrl-C).
const INTERRUPTED: u8 = 130;

/// Arguments of `history bisect`.
#[derive(Debug, clap::Args)]
pub struct BisectArgs {
    /// A revision without the regression (a commit, branch or tag); its runs are the baseline.
    #[arg(long, value_name = "REV")]
    pub good: String,
    /// A revision with the regression; `--good` must be one of its ancestors.
    #[arg(long, value_name = "REV")]
    pub bad: String,
    /// Most runs of the command at one revision: an inconclusive gate runs it again, up to this many times, then
    /// the revision is skipped.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub max_repeats: u32,
    /// Runs of the command at the good revision when the store holds no run of it.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub good_repeats: u32,
    /// Where the result files are kept: `<DIR>/<commit>/<n>/` for the n-th run of the command at a commit,
    /// with `<DIR>/<commit>/verdict.txt`. Keep it out of the files the repository tracks.
    #[arg(long, value_name = "DIR", default_value = "results/bisect")]
    pub out: PathBuf,
    /// The store: what is measured is recorded there with its revision.
    #[command(flatten)]
    pub store: StoreArg,
    /// The command that builds the revision checked out and runs the benchmark, writing its result files into
    /// the folder `$TRAINBENCH_BISECT_OUT` names (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Run git in `dir`.
fn git(dir: &Path, args: &[&str]) -> Result<Output, CommandError> {
    crate::history::git::run(dir, args).map_err(|source| CommandError::Spawn { program: "git".into(), source })
}

/// Run git in `dir`: its trimmed output when it succeeded.
fn git_text(dir: &Path, args: &[&str]) -> Result<Option<String>, CommandError> {
    let out = git(dir, args)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(out.status.success().then_some(text))
}

/// Run git in `dir`, which must succeed: what it said otherwise.
fn git_must(dir: &Path, args: &[&str]) -> Result<String, CommandError> {
    let out = git(dir, args)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    Err(CommandError::ProgramFailed {
        program: format!("git {}", args.join(" ")),
        said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// The commit `rev` names.
fn commit(dir: &Path, flag: &str, rev: &str) -> Result<String, CommandError> {
    git_text(dir, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")])?
        .filter(|sha| !sha.is_empty())
        .ok_or_else(|| CommandError::Input(format!("{flag} {rev}: no such commit in this repository")))
}

/// The repository checks before anything changes: a repository, no bisect under way, no uncommitted change to
/// a tracked file (it would be carried into every revision tested), and `good` an ancestor of `bad`.
fn check_repository(dir: &Path, args: &BisectArgs) -> Result<(String, String), CommandError> {
    if git_text(dir, &["rev-parse", "--show-toplevel"])?.is_none() {
        return Err(CommandError::Input(format!("history bisect: {} is not in a git repository", dir.display())));
    }
    let start = git_must(dir, &["rev-parse", "--git-path", "BISECT_START"])?;
    if dir.join(&start).exists() {
        return Err(CommandError::Input(
            "a git bisect is already under way in this repository; end it with `git bisect reset` first".into(),
        ));
    }
    let changed = git_must(dir, &["status", "--porcelain", "--untracked-files=no"])?;
    if !changed.is_empty() {
        return Err(CommandError::Input(format!(
            "the working tree has uncommitted changes to tracked files (they would be carried into every revision \
             tested); commit or stash them first:\n{changed}"
        )));
    }
    let good = commit(dir, "--good", &args.good)?;
    let bad = commit(dir, "--bad", &args.bad)?;
    if good == bad {
        return Err(CommandError::Input(format!("--good and --bad name the same commit {}", short(&good))));
    }
    let ancestor = git(dir, &["merge-base", "--is-ancestor", &good, &bad])?;
    if !ancestor.status.success() {
        return Err(CommandError::Input(format!(
            "--good {} is not an ancestor of --bad {}",
            short(&good),
            short(&bad)
        )));
    }
    Ok((good, bad))
}

/// What HEAD is now: the branch's name, else the commit.
fn current_position(dir: &Path) -> Result<String, CommandError> {
    match git_text(dir, &["symbolic-ref", "-q", "--short", "HEAD"])? {
        Some(branch) if !branch.is_empty() => Ok(branch),
        _ => git_must(dir, &["rev-parse", "HEAD"]),
    }
}

/// The good revision checked out to measure it; dropping it checks out where HEAD was.
struct GoodCheckout<'a> {
    dir: &'a Path,
    back_to: String,
}

impl Drop for GoodCheckout<'_> {
    fn drop(&mut self) {
        if let Err(e) = git_must(self.dir, &["checkout", "-q", &self.back_to]) {
            eprintln!("bisect: could not check out {} again: {e}", self.back_to);
        }
    }
}

/// A `git bisect` under way; dropping it (an error, an interrupt, a panic) runs `git bisect reset`.
struct Session<'a> {
    dir: &'a Path,
    active: bool,
}

impl Session<'_> {
    /// `git bisect reset`: back to the branch (or commit) checked out when the bisect started.
    fn reset(&mut self) -> Result<(), CommandError> {
        self.active = false;
        git_must(self.dir, &["bisect", "reset"]).map(|_| ())
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.active
            && let Err(e) = self.reset()
        {
            eprintln!("bisect: {e}; run `git bisect reset` yourself");
        }
    }
}

/// How `git bisect run` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    /// It named the first bad commit.
    Found(String),
    /// Skipped commits hide it: it is one of these.
    OneOf(Vec<String>),
    /// It stopped without an answer (a step's error, an interrupt).
    Stopped(String),
}

/// Read `git bisect run`'s output: `<sha> is the first bad commit`, or the list after `could be any of:`.
fn ending(output: &str, status: &std::process::ExitStatus) -> Ending {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    if let Some(line) = lines.iter().find(|l| l.ends_with(" is the first bad commit")) {
        return Ending::Found(line.split(' ').next().unwrap_or_default().to_string());
    }
    if let Some(at) = lines.iter().position(|l| l.contains("could be any of:")) {
        let shas: Vec<String> = lines[at + 1..]
            .iter()
            .take_while(|l| !l.starts_with("We cannot bisect more"))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|t| t.len() >= 7 && t.chars().all(|c| c.is_ascii_hexdigit()))
            .map(str::to_string)
            .collect();
        return Ending::OneOf(shas);
    }
    Ending::Stopped(format!("git bisect run ended without an answer ({status})"))
}

/// An absolute path without `.` and `..` components (by the names alone, as the user wrote them).
fn lexically_clean(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The step's verdict kept for `revision`, if it was measured.
fn verdict_of(out: &Path, revision: &str) -> Option<String> {
    std::fs::read_to_string(out.join(revision).join(VERDICT_FILE)).ok()
}

/// Whether the store holds a run at `good`.
fn store_has(store: &StoreArg, good: &str) -> Result<bool, CommandError> {
    let mut opened = store.open()?;
    let revisions = opened.revisions().map_err(store_error)?;
    Ok(revisions.iter().any(|(_, r)| r.as_deref().is_some_and(|r| same_revision(r, good))))
}

/// Check out `good`, run the command `repeats` times, record the runs, and check out where HEAD was.
fn measure_good(
    args: &BisectArgs,
    store: &StoreArg,
    dir: &Path,
    out: &Path,
    good: &str,
    interrupted: &AtomicBool,
) -> Result<bool, CommandError> {
    eprintln!("bisect: the store holds no run at the good revision {}: measuring it first", short(good));
    let back_to = current_position(dir)?;
    git_must(dir, &["checkout", "-q", "--detach", good])?;
    let _restore = GoodCheckout { dir, back_to };
    let mut opened = store.open()?;
    let mut runs = 0;
    for _ in 0..args.good_repeats.max(1) {
        match measure(&args.command, dir, out, good, opened.as_mut())? {
            Measured::Runs(measured) => runs += measured.len(),
            Measured::Interrupted => return Ok(false),
            Measured::Failed(why) => {
                return Err(CommandError::GoodRevisionFailed { revision: short(good).to_string(), why });
            }
        }
        if interrupted.load(Ordering::SeqCst) {
            return Ok(false);
        }
    }
    eprintln!("bisect: recorded {runs} run(s) at the good revision {}", short(good));
    Ok(true)
}

/// `git bisect run` with the step; git's output goes to stderr and is returned.
fn run_steps(args: &BisectArgs, store: &str, dir: &Path, out: &Path, good: &str) -> Result<Ending, CommandError> {
    let exe = std::env::current_exe().map_err(CommandError::OwnExecutable)?;
    let mut child = Command::new("git")
        .args(["bisect", "run"])
        .arg(exe)
        .args(["history", "bisect-step", "--good", good, "--max-repeats", &args.max_repeats.to_string()])
        .arg("--out")
        .arg(out)
        .arg("--dir")
        .arg(dir)
        .arg("--")
        .args(&args.command)
        .current_dir(dir)
        // The store through the environment, not the command line git prints: a URL may hold a password.
        .env(STORE_ENV, store)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|source| CommandError::Spawn { program: "git bisect run".into(), source })?;
    let mut said = String::new();
    if let Some(stdout) = child.stdout.take() {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("{line}");
            said.push_str(&line);
            said.push('\n');
        }
    }
    let status = child.wait().map_err(|source| CommandError::Spawn { program: "git bisect run".into(), source })?;
    Ok(ending(&said, &status))
}

/// The commit's one-line description.
fn describe(dir: &Path, sha: &str) -> String {
    git_text(dir, &["log", "-1", "--format=%h %s", sha]).ok().flatten().unwrap_or_else(|| sha.to_string())
}

/// Print what the bisect found: the first bad commit with the gate's figures, or the commits skipped ones hide it
/// among.
fn summarize(ending: &Ending, skipped: &[String], dir: &Path, out: &Path, bad: &str) -> Outcome {
    for sha in skipped {
        let why = verdict_of(out, sha).and_then(|v| v.lines().last().map(str::to_string)).unwrap_or_default();
        outln!("skipped {}: {why}", describe(dir, sha));
    }
    let figures = |sha: &str| match verdict_of(out, sha) {
        Some(verdict) => verdict.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n"),
        None if same_revision(sha, bad) => "  (the --bad revision: not measured by the bisect)".into(),
        None => "  (not measured)".into(),
    };
    match ending {
        Ending::Found(sha) => {
            outln!("first bad commit: {}\n{}", describe(dir, sha), figures(sha));
            Outcome::Success
        }
        Ending::OneOf(shas) => {
            outln!("inconclusive: skipped commits hide the first bad commit; it is one of:");
            for sha in shas {
                outln!("- {}\n{}", describe(dir, sha), figures(sha));
            }
            Outcome::Inconclusive
        }
        Ending::Stopped(why) => {
            outln!("the bisect stopped without an answer: {why}");
            Outcome::Failure
        }
    }
}

/// Carry out `history bisect`: exit 0 with the first bad commit, 3 when skipped commits hide it, 1 when the
/// bisect stopped, 2 on bad input, 130 when interrupted; the repository is back where it was in every case.
pub fn execute(args: &BisectArgs) -> Result<Outcome, CommandError> {
    if args.max_repeats == 0 || args.good_repeats == 0 {
        return Err(CommandError::Input("--max-repeats and --good-repeats must be at least 1".into()));
    }
    let dir = std::env::current_dir().map_err(CommandError::CurrentDir)?;
    let (good, bad) = check_repository(&dir, args)?;
    let absolute = |p: &Path| lexically_clean(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
    let out = absolute(&args.out);
    let location = args.store.location();
    let location = if is_postgres(&location) { location } else { absolute(Path::new(&location)).display().to_string() };
    let store = StoreArg { store: Some(location.clone()) };

    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        eprintln!("bisect: warning: cannot catch Ctrl-C ({e})");
    }
    if !store_has(&store, &good)? && !measure_good(args, &store, &dir, &out, &good, &interrupted)? {
        eprintln!("bisect: interrupted while measuring the good revision; the repository is back where it was");
        return Ok(Outcome::Code(INTERRUPTED));
    }
    if interrupted.load(Ordering::SeqCst) {
        return Ok(Outcome::Code(INTERRUPTED));
    }

    git_must(&dir, &["bisect", "start", &bad, &good, "--"])?;
    let mut session = Session { dir: &dir, active: true };
    let ending = run_steps(args, &location, &dir, &out, &good);
    let log = git_text(&dir, &["bisect", "log"]).ok().flatten().unwrap_or_default();
    session.reset()?;
    let ending = ending?;
    if interrupted.load(Ordering::SeqCst) {
        eprintln!("bisect: interrupted; the repository is back where it was (`git bisect reset`)");
        return Ok(Outcome::Code(INTERRUPTED));
    }
    let skipped: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("git bisect skip "))
        .flat_map(|l| l.split_whitespace().map(str::to_string))
        .collect();
    Ok(summarize(&ending, &skipped, &dir, &out, &bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn exited(code: i32) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        std::process::ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn git_bisect_runs_answers_are_read() {
        let found = "abc1234def is the first bad commit\ncommit abc1234def\n";
        assert_eq!(ending(found, &exited(0)), Ending::Found("abc1234def".into()));
        let hidden = "There are only 'skip'ped commits left to test.\nThe first bad commit could be any of:\n\
                      1111111aaaa\n2222222bbbb\nWe cannot bisect more!\n";
        assert_eq!(ending(hidden, &exited(2)), Ending::OneOf(vec!["1111111aaaa".into(), "2222222bbbb".into()]));
        assert!(matches!(ending("bisect run failed", &exited(1)), Ending::Stopped(_)));
    }
}
