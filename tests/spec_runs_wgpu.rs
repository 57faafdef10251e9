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

#[path = "it/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use common::spec_run::{TrainedSpec, shape_snapshot, train_spec};
use trainbench::result::RunResult;
use trainbench::spec::wire::BackendChoice;

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

/// Train one spec, check its result (the shared checks of [`train_spec`] plus the adapter in the manifest) and
/// return it.
fn run_spec(path: &Path, rel: &str) -> RunResult {
    let overrides: Vec<String> = COMMON.iter().map(|s| s.to_string()).collect();
    let TrainedSpec { result: r, wall_s } = train_spec(path, rel, &overrides, BackendChoice::Wgpu, 2);
    let m = r.metrics.as_ref().unwrap();

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
        "{rel:<26} wall {wall_s:6.2} s  step median {:8.1} ms  {:8.1} samples/s  on {}",
        m.step_time.median_s * 1e3,
        m.throughput.samples_per_s,
        device.name
    );
    r
}

#[test]
fn every_smoke_spec_trains_on_wgpu_with_a_stable_result_shape() {
    if trainbench_backend_wgpu::adapters().is_empty() {
        trainbench_contract::conformance::prerequisite_missing(
            "wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)",
        );
        return;
    }
    let dir = root().join("specs");
    let mut settings = common::golden_settings("shapes-wgpu");
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::glob!("../specs", "smoke/*.toml", |path| {
            let rel = path.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/");
            let r = run_spec(path, &rel);
            insta::assert_json_snapshot!(shape_snapshot(&r, ADAPTER_SPECIFIC));
        });
    });
}
