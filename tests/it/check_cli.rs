//! `trainbench check`: golden shape files are written with `--update`, identical shapes pass, and a metric that
//! disappears fails with a readable diff (snapshot in golden/check/).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::path::Path;

use assert_cmd::Command;
use trainbench::result::RunResult;

use crate::common::Synth;

fn tb() -> Command {
    Command::cargo_bin("trainbench").unwrap()
}

fn rewrite(path: &Path, f: impl FnOnce(&mut RunResult)) {
    let mut r: RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut r);
    std::fs::write(path, serde_json::to_string_pretty(&r).unwrap()).unwrap();
}

fn run(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = tb().args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn update_then_check_passes_and_a_lost_metric_fails_with_a_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, golden) = (tmp.path().join("results"), tmp.path().join("golden"));
    let r0 = Synth::new("toy", 8, 0, 1).write(&results);
    Synth::new("toy", 8, 1, 2).write(&results);
    let r2 = Synth::new("toy", 16, 0, 3).write(&results);

    // No golden files yet: an error with a hint.
    let (code, text) = run(&["check".as_ref(), "--golden".as_ref(), golden.as_os_str(), results.as_os_str()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("hint: create it with `trainbench check --update`"), "{text}");

    let (code, text) =
        run(&["check".as_ref(), "--update".as_ref(), "--golden".as_ref(), golden.as_os_str(), results.as_os_str()]);
    assert_eq!(code, 0, "{text}");
    // Two repeats share one golden file.
    assert!(golden.join("toy/toy.b8.fp32.1x1.shape.json").is_file());
    assert!(golden.join("toy/toy.b16.fp32.1x1.shape.json").is_file());
    assert_eq!(std::fs::read_dir(golden.join("toy")).unwrap().count(), 2);

    // Other values, same shape: passes.
    Synth { step_s: 0.5, ..Synth::new("toy", 8, 0, 99) }.write(&results);
    let (code, text) = run(&["check".as_ref(), "--golden".as_ref(), golden.as_os_str(), results.as_os_str()]);
    assert_eq!(code, 0, "{text}");

    // The allocator peak (and with it the activations) stops being measured; the loss disappears.
    rewrite(&r0, |r| {
        let m = r.metrics.as_mut().unwrap();
        m.memory.measured.peak_allocated_bytes = None;
        m.memory.measured.activations_and_workspace_bytes = None;
        m.loss = None;
    });
    // Fewer measured iterations.
    rewrite(&r2, |r| {
        let m = r.metrics.as_mut().unwrap();
        m.step_times_s.truncate(30);
    });
    let (code, text) = run(&["check".as_ref(), "--golden".as_ref(), golden.as_os_str(), results.as_os_str()]);
    assert_eq!(code, 1, "{text}");
    let text = text.replace(&tmp.path().display().to_string(), "[TEMP]");
    crate::common::golden_settings("check").bind(|| insta::assert_snapshot!("check_lost_metric", text));
}

#[test]
fn update_refuses_repeats_with_different_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, golden) = (tmp.path().join("results"), tmp.path().join("golden"));
    Synth::new("toy", 8, 0, 1).write(&results);
    let r1 = Synth::new("toy", 8, 1, 2).write(&results);
    rewrite(&r1, |r| r.metrics.as_mut().unwrap().loss = None);
    let (code, text) =
        run(&["check".as_ref(), "--update".as_ref(), "--golden".as_ref(), golden.as_os_str(), results.as_os_str()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("CONFLICT"), "{text}");
    assert!(text.contains("-    \"metrics.loss.all_finite\": \"bool\","), "{text}");
}
