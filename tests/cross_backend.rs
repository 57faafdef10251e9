//! Cross-backend agreement (issue 5): tch on the CPU and wgpu (lavapipe or any adapter) start from identical
//! weights and batches; their losses agree within a named tolerance preset at step 0 and after each of 5 SGD
//! steps, for a CNN, an LSTM model and a Transformer block. Needs both backends:
//! `cargo test --features tch,wgpu --test cross_backend`.
#![cfg(all(feature = "tch", feature = "wgpu"))]

use trainbench_tch::TchBackend;
use trainbench_wgpu::agreement::{AGREEMENT_RUN, compare, max_relative_error, preset_for};
use trainbench_wgpu::{WgpuBackend, adapters, fixtures, select};
use trainbench_workload::{Backend, Budget, NoProbe, Precision, RunPlan};

fn plan(name: &str, device: &str) -> RunPlan {
    let run = AGREEMENT_RUN;
    RunPlan {
        id: format!("agreement.{name}"),
        batch_size: run.batch,
        precision: Precision::Fp32,
        device: device.into(),
        world_size: 1,
        warmup: 0,
        budget: Budget::Iterations(run.steps),
        repeat: 0,
        seed: run.seed,
        optimizer: run.optimizer(),
        phase_timing: false,
        timeout_s: None,
    }
}

#[test]
fn tch_cpu_and_wgpu_agree() {
    if adapters().is_empty() {
        eprintln!("skipping: wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return;
    }
    // Strict on a software adapter (lavapipe), balanced on a GPU.
    let preset = preset_for(select("wgpu").expect("an adapter").kind());
    let mut failures = Vec::new();
    for name in ["cnn", "lstm", "transformer"] {
        let graph = fixtures::build(name).expect("fixture").expect("builds");
        let tch = TchBackend::new().run(&plan(name, "cpu"), &graph, &mut NoProbe).expect("tch run").losses;
        let wgpu = WgpuBackend::new().run(&plan(name, "wgpu"), &graph, &mut NoProbe).expect("wgpu run").losses;
        eprintln!("{name}: max relative error {:.2e} ({})", max_relative_error(&wgpu, &tch), preset.name());
        if let Err(d) = compare(&wgpu, &tch, preset) {
            failures.push(format!("{name}: {d}\n  wgpu {wgpu:?}\n  tch  {tch:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
