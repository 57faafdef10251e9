//! `trainbench history` in revision order (`--order revision`: a git repository's history orders the points, a
//! revision's runs pool into one point, runs of a revision it does not know are listed as left out, and the
//! gate's `last:N` counts revisions), and the read-only commands on a SQLite store that does not exist (an
//! error, never an empty file created).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use super::history::{history, write_point};

/// A repository of `n` empty commits; their ids, oldest first.
fn repository(dir: &Path, n: usize) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    (0..n)
        .map(|i| {
            git(&["commit", "-q", "--allow-empty", "-m", &format!("commit {i}")]);
            git(&["rev-parse", "HEAD"])
        })
        .collect()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn revision_order_pools_a_revisions_runs_and_lists_the_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let c = repository(&repo, 4);
    let store = tmp.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    // Recorded out of the code's order: an old revision measured late (as a bisect does), one measured twice,
    // and one the repository does not know.
    let recorded: [(u32, f64, &str); 6] =
        [(0, 1.0, &c[2]), (1, 1.0, &c[0]), (2, 1.0, &c[1]), (3, 1.3, &c[3]), (4, 1.0, "elsewhere"), (5, 1.0, &c[0])];
    for (minute, slowdown, revision) in recorded {
        let folder = write_point(&tmp.path().join("results"), minute, slowdown, "2.13.0", 3);
        let (code, out, err) = history(store, &["record", folder.to_str().unwrap(), "--revision", revision]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let repo_arg = repo.to_str().unwrap();

    let by_time = json(&history(store, &["show", ":step_time", "--format", "json"]).1);
    assert_eq!((by_time["order"].as_str(), by_time["points"].as_array().unwrap().len()), (Some("time"), 6));
    assert_eq!(by_time["left_out"].as_array().unwrap().len(), 0);

    let (code, out, err) =
        history(store, &["show", ":step_time", "--format", "json", "--order", "revision", "--repo", repo_arg]);
    assert_eq!(code, 0, "{out}{err}");
    let by_revision = json(&out);
    assert_eq!(by_revision["order"], "revision");
    let points = by_revision["points"].as_array().unwrap();
    let revisions: Vec<&str> = points.iter().map(|p| p["revision"].as_str().unwrap()).collect();
    assert_eq!(revisions, c.iter().map(String::as_str).collect::<Vec<_>>(), "the repository's order");
    assert_eq!(points[0]["run_ids"].as_array().unwrap().len(), 6, "both invocations of the first revision pooled");
    let left_out = by_revision["left_out"].as_array().unwrap();
    assert_eq!(left_out.len(), 3, "{left_out:?}");
    assert!(left_out.iter().all(|r| r["revision"] == "elsewhere"), "{left_out:?}");

    let (code, out, _) = history(store, &["list", "--order", "revision", "--repo", repo_arg]);
    assert_eq!(code, 0);
    assert!(out.contains("4 point(s)") && out.contains("3 run(s) left out"), "{out}");
    let (_, out, _) = history(store, &["show", ":step_time", "--order", "revision", "--repo", repo_arg]);
    assert!(out.contains("3 run(s) left out") && out.contains("revision elsewhere"), "{out}");

    // The gate's last point: in time order the old revision measured last (1.0x), in revision order the newest
    // revision (1.3x), which a 1.3x candidate matches.
    let candidate = write_point(&tmp.path().join("candidate"), 100, 1.3, "2.13.0", 6);
    let gate = |extra: &[&str]| {
        let mut args = vec!["gate", candidate.to_str().unwrap(), "--baseline", "last:1", "--format", "json"];
        args.extend_from_slice(extra);
        history(store, &args)
    };
    let (code, out, err) = gate(&["--order", "revision", "--repo", repo_arg]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(json(&out)["series"][0]["outcome"], "pass");
    let (code, out, _) = gate(&[]);
    assert_ne!(code, 0, "against the late-measured old revision the candidate is not a pass: {out}");

    let (code, _, err) = history(store, &["list", "--repo", repo_arg]);
    assert_eq!(code, 2, "--repo without --order revision: {err}");
    let (code, _, err) = history(store, &["list", "--order", "revision", "--repo", tmp.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("git rev-list"), "{err}");
}

#[test]
fn reading_commands_refuse_a_missing_store_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("none").join("h.sqlite");
    let location = store.to_str().unwrap();
    let results = write_point(tmp.path(), 0, 1.0, "2.13.0", 3);
    let page = tmp.path().join("page");
    for args in [
        vec!["list"],
        vec!["show", ":step_time"],
        vec!["detect"],
        vec!["report", "--out", page.to_str().unwrap()],
        vec!["gate", results.to_str().unwrap(), "--baseline", "last:3"],
    ] {
        let (code, out, err) = history(location, &args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(&format!("no history store at {location}")), "{args:?}: {err}");
        assert!(err.contains("trainbench history record RESULTS..."), "{err}");
        assert!(!store.exists() && !store.parent().unwrap().exists(), "{args:?} created the store");
    }
    let (code, out, err) = history(location, &["record", results.to_str().unwrap(), "--revision", "r1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(store.exists(), "record creates the store");
    assert_eq!(history(location, &["list"]).0, 0);
}
