//! What the tensor cores do beyond the precision, in `predict` and around it: TF32 moves an fp32 run's matrix
//! products to the TF32 rate (never by more than the ratio of the peaks), `training.float8` moves a bf16 run's
//! linear layers to the FP8 rate (never by more than FP8's peak over bf16's), and FP8 is refused where nothing
//! can honour it: a spec with a run other than bf16, `run` (no backend has FP8 kernels) and a device without an
//! FP8 peak (the A100), each naming the field and the fix.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use assert_cmd::Command;
use trainbench::hardware::ProfileValidator;
use trainbench::hardware::wire::HardwareFile;
use trainbench::plan::plan;
use trainbench::predict::{Setting, predict};
use trainbench::spec::load_spec;
use trainbench::spec::overrides::Overrides;
use trainbench_contract::{Numerics, Tf32};
use trainbench_graph::Precision;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn tb(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(root())
        .env_remove("TRAINBENCH_HARDWARE")
        .args(args)
        .output()
        .unwrap();
    (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn profile(name: &str) -> HardwareFile {
    ProfileValidator::new().unwrap().resolve(name).unwrap().file
}

/// Samples per second of GPT-2 small (GEMM-heavy) at batch 8 on `hardware` under `precision` and `numerics`.
fn gpt2_samples_per_s(hardware: &HardwareFile, precision: Precision, numerics: Numerics) -> f64 {
    let sets = ["sweep.batch_sizes=[8]".to_string()];
    let spec = load_spec(&root().join("specs/llm/gpt2_small.toml"), &Overrides::parse(&sets).unwrap()).unwrap();
    let run = plan(&spec).into_iter().find(|r| r.repeat == 0).unwrap();
    let setting = Setting { precision, numerics, ..Setting::of(&run) };
    predict(spec.graph(), &setting, hardware).unwrap().samples_per_s
}

#[test]
fn tf32_matmuls_speed_an_fp32_gemm_heavy_run_by_at_most_the_peak_ratio() {
    let h100 = profile("h100");
    let off = gpt2_samples_per_s(&h100, Precision::Fp32, Numerics { tf32: Tf32::OFF, ..Numerics::default() });
    let on = Numerics { tf32: Tf32 { matmul: true, cudnn: true }, ..Numerics::default() };
    let on = gpt2_samples_per_s(&h100, Precision::Fp32, on);
    let peaks = &h100.device.peak_tflops;
    let bound = peaks.tf32.unwrap() / peaks.fp32;
    let speedup = on / off;
    assert!(speedup > 1.5 && speedup <= bound * (1.0 + 1e-9), "TF32 speedup {speedup} (peak ratio {bound})");
    // PyTorch's default leaves cuBLAS's switch off: a model of linear layers and matmuls stays at fp32's rate.
    let default = gpt2_samples_per_s(&h100, Precision::Fp32, Numerics::default());
    assert!((default / off - 1.0).abs() < 1e-12, "{default} vs {off}");
}

#[test]
fn float8_speeds_a_bf16_run_on_h100_by_at_most_the_peak_ratio() {
    let h100 = profile("h100");
    let bf16 = gpt2_samples_per_s(&h100, Precision::Bf16, Numerics::default());
    let fp8 = gpt2_samples_per_s(&h100, Precision::Bf16, Numerics { float8: true, ..Numerics::default() });
    let peaks = &h100.device.peak_tflops;
    let bound = peaks.fp8.unwrap() / peaks.bf16.unwrap();
    let speedup = fp8 / bf16;
    assert!(speedup > 1.0 && speedup <= bound * (1.0 + 1e-9), "FP8 speedup {speedup} (peak ratio {bound})");
}

#[test]
fn float8_is_refused_without_bf16_and_by_run() {
    // The spec: fp32 with float8 names the field, the precision and the fix.
    let (code, t) = tb(&["validate", "specs/llm/smoke_gpt.toml", "--set", "training.float8=true"]);
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("training.float8") && t.contains("fp32") && t.contains("precision = \"bf16\""), "{t}");
    // bf16 with float8 is a valid spec, which `predict` prices and `run` refuses before anything starts.
    let bf16 = ["--set", "training.float8=true", "--set", "training.precision=\"bf16\""];
    let (code, t) = tb(&[&["validate", "specs/llm/smoke_gpt.toml"][..], &bf16[..]].concat());
    assert_eq!(code, Some(0), "{t}");
    let (code, t) =
        tb(&[&["predict", "specs/llm/smoke_gpt.toml", "--hardware", "h100", "--format", "json"][..], &bf16[..]]
            .concat());
    assert_eq!(code, Some(0), "{t}");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let (code, t) = tb(&[&["run", "specs/llm/smoke_gpt.toml", "--out", dir][..], &bf16[..]].concat());
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("training.float8") && t.contains("FP8 kernels") && t.contains("remove"), "{t}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing ran");
}

#[test]
fn float8_on_a100_is_refused_at_predict_naming_the_field_and_the_fix() {
    let bf16 = ["--set", "training.float8=true", "--set", "training.precision=\"bf16\""];
    let (code, t) = tb(&[&["predict", "specs/llm/smoke_gpt.toml", "--hardware", "a100"][..], &bf16[..]].concat());
    assert_ne!(code, Some(0), "{t}");
    assert!(t.contains("training.float8") && t.contains("peak_tflops.fp8") && t.contains("remove"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
}
