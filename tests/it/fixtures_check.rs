//! The committed result fixtures (mock backend, see scripts/gen_fixtures.sh) still parse, pass audit's integrity
//! checks, and match their golden shapes with `trainbench check`. A failure after a change of the result format
//! means: regenerate them with scripts/gen_fixtures.sh and review the diff of golden/shapes/.

use std::path::Path;

use assert_cmd::Command;
use trainbench::result::load;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results");
const SHAPES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/shapes");

#[test]
fn fixtures_parse_and_are_internally_consistent() {
    let all = load::load_all(&[Path::new(FIXTURES)]).expect("fixtures parse; regenerate with scripts/gen_fixtures.sh");
    assert_eq!(all.len(), 20);
    for l in &all {
        assert_eq!(trainbench::audit::verify(&l.result), vec![], "{}", l.path.display());
    }
    let oom = all.iter().filter(|l| l.result.outcome.status() == "out_of_memory").count();
    assert_eq!(oom, 1, "the fixture sweep ends in one out-of-memory run (and one skipped repeat)");
}

#[test]
fn fixtures_match_their_golden_shapes() {
    let out = Command::cargo_bin("trainbench").unwrap().args(["check", "--golden", SHAPES, FIXTURES]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("20 result(s) checked, 0 failed"), "{text}");
}
