//! `trainbench history bisect` end to end: temporary git repositories whose `slowdown` file sets the mock
//! backend's `--mock-slowdown` for `trainbench run`. Eight commits with a 1.3x slowdown from commit 5: the bisect
//! names commit 5 (after running the command again where the gate was inconclusive) and leaves the repository
//! on its branch; a failing build and a revision the gate cannot decide within `--max-repeats` are skipped, and
//! the bisect says which commits they hide the first bad one among; an interrupt (SIGINT to the whole process
//! group, as Ctrl-C sends) stops the bisect and the repository is back on its branch.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use super::history::{history, tb};

/// A tiny mock spec: three repeats in one process.
const SPEC: &str = "version = 1\nname = \"bis\"\n[model]\nfamily = \"mlp\"\ninputs = 16\nhidden = [16]\nclasses = 4\n\
                    [topology]\nbackend = \"mock\"\n[sweep]\nbatch_sizes = [4]\n[run]\nwarmup = 2\niterations = 40\n\
                    repeats = 3\nisolation = \"shared\"\n";

/// The build-and-run script each commit holds: run the spec with the commit's slowdown into the folder the
/// bisect gives.
const RUN: &str = "exec \"$TB\" run --quiet --overwrite --mock-slowdown \"$(cat slowdown)\" --out \
                   \"$TRAINBENCH_BISECT_OUT\" spec.toml\n";

/// A git repository in `dir/repo` on branch `main`; `git` runs a git command in it.
struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn new(tmp: &Path) -> Self {
        let dir = tmp.join("repo");
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q"]);
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Commit the spec, the run script, `slowdown` and the commit's number; returns the commit id.
    fn commit(&self, n: usize, slowdown: &str, script: &str) -> String {
        std::fs::write(self.dir.join("spec.toml"), SPEC).unwrap();
        std::fs::write(self.dir.join("run.sh"), script).unwrap();
        std::fs::write(self.dir.join("slowdown"), slowdown).unwrap();
        std::fs::write(self.dir.join("number"), n.to_string()).unwrap();
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", &format!("commit {n}")]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Run `history bisect ARGS -- sh run.sh` in the repository: (exit code, stdout, stderr).
    fn bisect(&self, store: &Path, out: &Path, args: &[&str]) -> (i32, String, String) {
        let output = tb()
            .args(["history", "bisect"])
            .args(args)
            .arg("--store")
            .arg(store)
            .arg("--out")
            .arg(out)
            .args(["--", "sh", "run.sh"])
            .env("TB", assert_cmd::cargo::cargo_bin("trainbench"))
            .env_remove("TRAINBENCH_STORE")
            .current_dir(&self.dir)
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The repository is on `main` at `head`, no bisect under way, nothing changed.
    fn assert_back(&self, head: &str) {
        assert_eq!(self.git(&["symbolic-ref", "--short", "HEAD"]), "main");
        assert_eq!(self.git(&["rev-parse", "HEAD"]), head);
        assert!(!self.dir.join(".git/BISECT_START").exists(), "no bisect left under way");
        assert_eq!(self.git(&["status", "--porcelain", "--untracked-files=no"]), "");
    }
}

#[test]
fn bisect_names_the_commit_that_made_the_benchmark_slower() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new(tmp.path());
    let commits: Vec<String> = (1..=8).map(|n| repo.commit(n, if n < 5 { "1.0" } else { "1.3" }, RUN)).collect();
    let (store, out) = (tmp.path().join("h.sqlite"), tmp.path().join("bisect"));
    let (code, stdout, stderr) = repo.bisect(&store, &out, &["--good", &commits[0], "--bad", "main"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let first_bad = &commits[4];
    assert!(stdout.contains(&format!("first bad commit: {} commit 5", &first_bad[..7])), "{stdout}{stderr}");
    assert!(stdout.contains("regression bis.b4"), "the gate's figures: {stdout}");
    assert!(stdout.contains("bad (the gate finds a regression)"), "{stdout}");
    // Three candidate runs against six: the gate's t-test of the run medians decides a 30% slowdown at once.
    assert!(out.join(first_bad).join("1").is_dir(), "the run's results are kept");
    repo.assert_back(&commits[7]);
    // Everything measured is in the store with its revision: the good revision and the commits tested.
    let (code, shown, err) = history(store.to_str().unwrap(), &["show", ":step_time", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let revisions: Vec<&str> =
        shown["points"].as_array().unwrap().iter().filter_map(|p| p["revision"].as_str()).collect();
    assert!(revisions.contains(&commits[0].as_str()) && revisions.contains(&first_bad.as_str()), "{revisions:?}");
}

#[test]
fn failing_builds_and_undecided_revisions_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new(tmp.path());
    let good = repo.commit(1, "1.0", RUN);
    let broken = repo.commit(2, "1.0", "echo 'build failed' >&2\nexit 3\n");
    let slow = repo.commit(3, "1.3", RUN);
    let bad = repo.commit(4, "1.3", RUN);
    let (store, out) = (tmp.path().join("h.sqlite"), tmp.path().join("bisect"));
    // One run of three repeats a side, and no second run allowed.
    let args = ["--good", good.as_str(), "--bad", bad.as_str(), "--max-repeats", "1", "--good-repeats", "1"];
    let (code, stdout, stderr) = repo.bisect(&store, &out, &args);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(stdout.contains(&format!("skipped {} commit 2: skip: the command failed", &broken[..7])), "{stdout}");
    // Commit 3 is decided (the gate's t-test of the run medians calls 1.3x with three runs a side), so only the
    // failed build hides the first bad commit. The "still inconclusive after N runs" skip needs a noisier fixture.
    assert!(stdout.contains("it is one of:") && stdout.contains(&slow[..7]), "{stdout}");
    repo.assert_back(&bad);
}

#[test]
fn bisect_refuses_a_dirty_tree_and_a_reversed_range() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new(tmp.path());
    let first = repo.commit(1, "1.0", RUN);
    let second = repo.commit(2, "1.3", RUN);
    let (store, out) = (tmp.path().join("h.sqlite"), tmp.path().join("bisect"));
    let (code, _, err) = repo.bisect(&store, &out, &["--good", &second, "--bad", &first]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not an ancestor"), "{err}");
    std::fs::write(repo.dir.join("slowdown"), "2.0").unwrap();
    let (code, _, err) = repo.bisect(&store, &out, &["--good", &first, "--bad", &second]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("uncommitted changes"), "{err}");
    assert!(!store.exists(), "nothing measured, nothing created");
}

#[test]
fn an_interrupt_stops_the_bisect_and_resets_the_repository() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new(tmp.path());
    let good = repo.commit(1, "1.0", RUN);
    repo.commit(2, "1.0", RUN);
    // Commit 3's command does what Ctrl-C does: SIGINT to every process of the group.
    repo.commit(3, "1.0", "kill -INT 0\nsleep 2\n");
    let bad = repo.commit(4, "1.3", RUN);
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("trainbench"))
        .args(["history", "bisect", "--good", &good, "--bad", &bad, "--store"])
        .arg(tmp.path().join("h.sqlite"))
        .arg("--out")
        .arg(tmp.path().join("bisect"))
        .args(["--", "sh", "run.sh"])
        .env("TB", assert_cmd::cargo::cargo_bin("trainbench"))
        .env_remove("TRAINBENCH_STORE")
        .current_dir(&repo.dir)
        .process_group(0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted; the repository is back where it was"), "{stderr}");
    repo.assert_back(&bad);
}
