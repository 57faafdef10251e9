//! No shipped spec is predicted above 100% MFU on a GPU: for every spec under `specs/`, every configuration it
//! plans, in every precision a shipped GPU profile (`hardware/`) has a peak for, the model FLOPs per sample at
//! the predicted throughput stay below the peak of all the configuration's devices together (an fp32 run with a
//! TF32 switch on: the TF32 peak). An MFU above 1 means the model prices a step faster than the datasheet allows
//! (or the analysis counts model FLOPs the step does not do): a bug, reported with the spec, profile,
//! configuration and figures.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use trainbench::hardware::ProfileValidator;
use trainbench::hardware::wire::DeviceKind;
use trainbench::plan::plan;
use trainbench::predict::product_rates::mfu_peak;
use trainbench::predict::{Setting, predict};
use trainbench::result::Sampled;
use trainbench::spec::load_spec;
use trainbench::spec::overrides::Overrides;
use trainbench_graph::Precision;
use trainbench_graph::analysis::analyze;

fn specs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            specs(&path, out);
        } else if path.extension().is_some_and(|e| e == "toml") {
            out.push(path);
        }
    }
}

#[test]
fn no_shipped_spec_is_predicted_above_the_peak_of_any_gpu_profile() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    specs(&root.join("specs"), &mut files);
    files.sort();
    assert!(files.len() >= 20, "{files:?}");
    let gpus: Vec<_> = ProfileValidator::new()
        .unwrap()
        .shipped()
        .into_iter()
        .filter(|p| p.file.device.kind == DeviceKind::Gpu)
        .collect();
    assert!(gpus.iter().any(|p| p.file.name == "h200"), "the shipped GPU profiles: h100, h200, ...");
    let mut bugs = Vec::new();
    let mut checked = 0;
    for file in &files {
        let spec = load_spec(file, &Overrides::default()).unwrap_or_else(|d| panic!("{}: {d:?}", file.display()));
        let graph = spec.graph();
        let model = analyze(graph).model_flops;
        assert!(model.per_sample > 0, "{}: no model FLOPs", file.display());
        for run in plan(&spec).iter().filter(|r| r.repeat == 0) {
            for precision in [Precision::Fp32, Precision::Fp16, Precision::Bf16] {
                let setting = Setting { precision, ..Setting::of(run) };
                for profile in &gpus {
                    // A profile without a peak for the precision predicts nothing (the gate records the error).
                    let Ok(p) = predict(graph, &setting, &profile.file) else { continue };
                    // The peak a run is measured against: TF32's for an fp32 run with a TF32 switch on (PyTorch's
                    // default turns cuDNN's on), as the products it prices run at that rate.
                    let (tflops, name) = mfu_peak(&profile.file, precision, &setting.numerics).unwrap();
                    let peak = tflops * 1e12 * p.world_size as f64;
                    // From the step's price, whether or not the step fits in memory.
                    let mfu = model.per_sample as f64 * p.samples_per_s / peak;
                    checked += 1;
                    if mfu.is_nan() || mfu >= 1.0 {
                        bugs.push(format!(
                            "{} {} {} on {}: MFU {mfu:.3} ({} model FLOPs/sample x {:.4e} samples/s over {peak:.4e} \
                             FLOP/s; {})",
                            file.strip_prefix(root).unwrap().display(),
                            run.config,
                            precision.as_str(),
                            profile.file.name,
                            model.per_sample,
                            p.samples_per_s,
                            model.convention
                        ));
                    }
                    // Where the step fits, the prediction reports the same MFU over the same peak.
                    if let Sampled::Available(m) = &p.figures.mfu {
                        assert!((m.mfu - mfu).abs() <= 1e-9 * mfu.max(1e-12), "{}: {} vs {mfu}", run.config, m.mfu);
                        assert_eq!((m.peak.flop_per_s, m.peak.precision.as_str()), (peak, name));
                    }
                }
            }
        }
    }
    assert!(checked > 100, "{checked} predictions checked");
    assert!(bugs.is_empty(), "predicted MFU at or above 1 (a bug in the model or the analysis):\n{}", bugs.join("\n"));
}
