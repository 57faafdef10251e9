//! The history store on a real PostgreSQL server (`scripts/postgres-local.sh` starts a throw-away cluster on a
//! free local port): the same suite as the SQLite store (`history`), the same answers as SQLite for the same
//! results, a newer schema refused and left unchanged, and an unreachable server as one clear error without
//! the password. Skips with a notice where PostgreSQL cannot be started; under `CI=true` that is a failure.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::history::{concurrent, gate, history, round_trip, write_point};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres-local.sh")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A throw-away PostgreSQL server, stopped when dropped.
struct LocalPostgres {
    dir: tempfile::TempDir,
    url: String,
}

impl LocalPostgres {
    /// Start it, or say why not: `None` (skip) outside CI, a panic under `CI=true`.
    fn start() -> Option<LocalPostgres> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .env("TRAINBENCH_PG_DIR", dir.path())
            .env("TRAINBENCH_PG_PORT", free_port().to_string())
            .output();
        let why = match out {
            Ok(o) if o.status.success() => {
                let url = String::from_utf8_lossy(&o.stdout).trim().to_string();
                return Some(LocalPostgres { dir, url });
            }
            Ok(o) => format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
            Err(e) => e.to_string(),
        };
        let _ = Command::new("bash").arg(script()).arg("stop").env("TRAINBENCH_PG_DIR", dir.path()).output();
        trainbench_contract::conformance::prerequisite_missing(&format!(
            "a local PostgreSQL could not be started (scripts/postgres-local.sh start): {}",
            why.trim()
        ));
        None
    }

    /// A new, empty database on the server; its URL.
    fn database(&self, name: &str) -> String {
        let mut client = postgres::Client::connect(&self.url, postgres::NoTls).unwrap();
        client.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        self.url.replace("/postgres", &format!("/{name}"))
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").env("TRAINBENCH_PG_DIR", self.dir.path()).output();
    }
}

#[test]
fn postgres_store_passes_the_sqlite_suite_with_the_same_answers() {
    let Some(pg) = LocalPostgres::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let part = |name: &str| {
        let p = tmp.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    round_trip(&pg.database("round_trip"), &part("round_trip"));
    concurrent(&pg.database("concurrent"), &part("concurrent"), 4);
    gate(&pg.database("gate"), &part("gate"));

    // The same results give the same answers from both stores.
    let results = part("same").join("results");
    for minute in 0..8 {
        write_point(&results, minute, if minute < 4 { 1.0 } else { 1.3 }, "2.13.0", 2);
    }
    let sqlite = tmp.path().join("same.sqlite");
    let stores = [sqlite.to_str().unwrap().to_string(), pg.database("same")];
    let answers: Vec<Vec<String>> = stores
        .iter()
        .map(|store| {
            assert_eq!(history(store, &["record", results.to_str().unwrap(), "--revision", "r1"]).0, 0);
            ["list", "detect"].iter().map(|c| history(store, &[c, "--format", "json"]).1).collect()
        })
        .collect();
    assert_eq!(answers[0], answers[1]);

    // A store of a newer schema: refused with its version, not modified.
    let newer = pg.database("newer");
    let folder = write_point(&part("newer"), 0, 1.0, "2.13.0", 1);
    assert_eq!(history(&newer, &["record", folder.to_str().unwrap()]).0, 0);
    let mut client = postgres::Client::connect(&newer, postgres::NoTls).unwrap();
    client.batch_execute("INSERT INTO schema_version (version) VALUES (99)").unwrap();
    let other = write_point(&part("newer"), 1, 1.0, "2.13.0", 1);
    let (code, _, err) = history(&newer, &["record", other.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("schema version 99") && err.contains("not modified"), "{err}");
    let runs: i64 = client.query_one("SELECT COUNT(*) FROM runs", &[]).unwrap().get(0);
    assert_eq!(runs, 1);
}

#[test]
fn an_unreachable_server_is_one_clear_error_without_the_password() {
    let url = format!("postgres://tb:s3cret@127.0.0.1:{}/history", free_port());
    let (code, out, err) = history(&url, &["list"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("s3cret") && !out.contains("s3cret"), "{err}");
    assert!(err.contains("postgres://tb:***@127.0.0.1:") && err.contains("connect timeout 10 s"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
