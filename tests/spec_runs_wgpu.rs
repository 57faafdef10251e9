//! Every smoke spec (`specs/smoke/`) trains for real through the wgpu backend (feature `wgpu`) on the best
//! adapter wgpu finds, lavapipe (software Vulkan) on a machine without a GPU: each run must complete with a
//! finite loss and a positive throughput, its result file must validate against `schema/result.schema.json`,
//! the weights and gradients it reports must match the static analysis, the environment manifest must name the
//! adapter (name, vendor, driver, graphics API) and the burn and wgpu versions, and the *shape* of the result is
//! snapshotted per spec in `golden/shapes-wgpu/`.
//!
//! The smoke specs are already tiny; [`COMMON`] only pins the backend and trims each sweep to one short run.
//! Without an adapter the test says it skips, except under `CI=true`, where a missing Vulkan driver is an
//! error (CI installs `mesa-vulkan-drivers`). This file holds one `glob!` test only (insta collects glob
//! failures process-wide); `-- --nocapture` shows each spec's wall and step times.
#![cfg(feature = "wgpu")]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use trainbench::check::shape_of;
use trainbench::result::{RunOutcome, RunResult, result_schema};
use trainbench::runner::{RunnerOptions, Suite, run_suite};
use trainbench::spec::diagnostics::render_text;
use trainbench::spec::wire::BackendChoice;
use trainbench::spec::{Overrides, load_spec};

/// Overrides applied to every smoke spec: wgpu on its best adapter, one batch of 2, one warm-up and two
/// measured iterations, one repeat.
const COMMON: &[&str] = &[
    "topology.backend=wgpu",
    "topology.device=wgpu",
    "sweep.batch_sizes=[2]",
    "run.warmup=1",
    "run.iterations=2",
    "run.repeats=1",
];

/// Adapter details only some adapters report (a PCI bus id, a subgroup size range); left out of the snapshot so
/// it holds on any adapter.
const ADAPTER_SPECIFIC: &[&str] =
    &["environment.device.details.pci_bus_id", "environment.device.details.subgroup_size"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Train one spec, check its result and return it.
fn run_spec(path: &Path, rel: &str) -> RunResult {
    let overrides = Overrides::parse(&COMMON.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let spec = load_spec(path, &overrides).map_err(|d| format!("{rel}:\n{}", render_text(&d))).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let opts =
        RunnerOptions { out_dir: tmp.path().to_path_buf(), backend: Some(BackendChoice::Wgpu), ..Default::default() };
    let mut files = Vec::new();
    let started = Instant::now();
    let report = run_suite(&Suite::from_validated(&spec), &opts, &mut |_, p| files.push(p.to_path_buf())).unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert_eq!(report.results.len(), 1, "{rel}: the overrides must leave exactly one run");
    assert_eq!(files.len(), 1, "{rel}: one result file");

    let text = std::fs::read_to_string(&files[0]).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schema = result_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&json).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{rel}: {} does not validate:\n{}", files[0].display(), errors.join("\n"));
    let r: RunResult = serde_json::from_value(json).unwrap();

    assert_eq!(r.outcome, RunOutcome::Completed, "{rel}: {:?}", r.outcome);
    assert_eq!(r.backend, "wgpu", "{rel}");
    let m = r.metrics.as_ref().unwrap();
    assert_eq!(m.step_times_s.len(), 2, "{rel}: measured iterations");
    assert!(m.throughput.samples_per_s > 0.0 && m.throughput.samples_per_s.is_finite(), "{rel}: throughput");
    let loss = m.loss.as_ref().unwrap();
    assert!(loss.all_finite && loss.first.is_some_and(f64::is_finite), "{rel}: {loss:?}");

    let a = r.analysis.as_ref().unwrap();
    let mem = &m.memory.measured;
    assert_eq!(mem.gradients_bytes, 4 * a.parameters, "{rel}: gradient bytes vs 4 x analysis parameters");
    assert_eq!(mem.weights_bytes, 4 * (a.parameters + a.buffers), "{rel}: weight bytes vs 4 x (parameters + buffers)");

    // The manifest names the adapter and the libraries.
    let env = &r.environment;
    let device = env.device.as_ref().unwrap();
    assert!(device.selector.starts_with("wgpu:") && !device.name.is_empty(), "{rel}: {device:?}");
    for key in ["api", "vendor", "driver"] {
        assert!(device.details.contains_key(key), "{rel}: device detail `{key}` missing: {device:?}");
    }
    for key in ["burn", "wgpu", "graphics_api", "adapter_driver"] {
        assert!(env.library_versions.contains_key(key), "{rel}: library version `{key}` missing");
    }

    eprintln!(
        "{rel:<26} wall {wall:6.2} s  step median {:8.1} ms  {:8.1} samples/s  on {}",
        m.step_time.median_s * 1e3,
        m.throughput.samples_per_s,
        device.name
    );
    r
}

#[test]
fn every_smoke_spec_trains_on_wgpu_with_a_stable_result_shape() {
    if trainbench_wgpu::adapters().is_empty() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but wgpu found no adapter (mesa-vulkan-drivers?)"
        );
        eprintln!("skipping: wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return;
    }
    let dir = root().join("specs");
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(root().join("golden/shapes-wgpu"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::glob!("../specs", "smoke/*.toml", |path| {
            let rel = path.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/");
            let r = run_spec(path, &rel);
            let mut shape = shape_of(&r);
            shape.fields.retain(|k, _| !ADAPTER_SPECIFIC.contains(&k.as_str()));
            let mut entry = serde_json::Map::new();
            entry.insert("spec_sha256".into(), r.environment.spec_sha256.clone().into());
            entry.insert("fields".into(), serde_json::to_value(&shape.fields).unwrap());
            let mut snapshot = serde_json::Map::new();
            snapshot.insert(r.run_id.clone(), entry.into());
            insta::assert_json_snapshot!(serde_json::Value::Object(snapshot));
        });
    });
}
