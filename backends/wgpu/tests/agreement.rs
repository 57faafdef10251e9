//! Cross-backend agreement without libtorch in the build: the wgpu backend's losses at step 0 and after each of
//! 5 SGD steps match those PyTorch computed from the same initial weights and batches (the reference files in
//! `tests/reference/`, written by `reference/torch_reference.py`; see `reference/README.md`).

use std::path::PathBuf;

use trainbench_wgpu::agreement::{AGREEMENT_RUN, compare, max_relative_error, preset_for};
use trainbench_wgpu::{WgpuBackend, adapters, fixtures, select};
use trainbench_workload::{Backend, NoProbe};

fn reference(name: &str) -> Vec<f64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: serde_json::Value = serde_json::from_str(&text).expect("reference is JSON");
    let run = AGREEMENT_RUN;
    assert_eq!(doc["batch"], run.batch, "{name}: reference made for another batch size; regenerate it");
    assert_eq!(doc["seed"], run.seed, "{name}: reference made for another seed; regenerate it");
    doc["losses"].as_array().expect("losses").iter().map(|v| v.as_f64().expect("number")).collect()
}

#[test]
fn losses_agree_with_pytorch() {
    if adapters().is_empty() {
        eprintln!("skipping: wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return;
    }
    let run = AGREEMENT_RUN;
    let preset = preset_for(select("wgpu").expect("an adapter").kind());
    let mut failures = Vec::new();
    for name in fixtures::NAMES {
        let graph = fixtures::build(name).expect("fixture").expect("builds");
        let plan = run.plan(name, "wgpu");
        let got = WgpuBackend::new().run(&plan, &graph, &mut NoProbe).expect("run").losses;
        let want = reference(name);
        eprintln!("{name}: max relative error {:.2e} ({})", max_relative_error(&got, &want), preset.name());
        if let Err(d) = compare(&got, &want, preset) {
            failures.push(format!("{name}: {d}\n  wgpu    {got:?}\n  pytorch {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
