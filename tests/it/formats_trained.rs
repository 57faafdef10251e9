//! Every local dataset format, written by the test, trained through `trainbench run` on both real backends
//! (tch and wgpu): the run completes, reads the dataset (its sample count recorded), and times the stall and
//! the copy of its batches.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

use crate::common::datasets;

/// The custom token model of the token datasets: 8 ids of a vocabulary of 50 in, a class of 50 per position out.
fn token_spec(path: &str) -> String {
    format!(
        "version = 1\nname = \"local-tokens\"\n[model]\nfamily = \"custom\"\ninput = [8]\ninput_kind = {{ tokens = {{ vocab = 50 }} }}\n\
         loss = \"cross-entropy\"\nlayers = [{{ type = \"embedding\", dim = 16 }}, {{ type = \"linear\", out_features = 50 }}]\n\
         [dataset]\nsource = \"local\"\npath = \"{path}\"\nformat = \"npy\"\n[sweep]\nbatch_sizes = [8]\n\
         [topology]\nbackend = \"mock\"\n[run]\nwarmup = 1\niterations = 4\n"
    )
}

/// A token dataset of `n` sequences of 8 ids (int32) with next-id labels (int64).
fn tokens(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let ids: Vec<u8> = (0..n * 8).flat_map(|i| ((i % 50) as i32).to_le_bytes()).collect();
    trainbench_data::npy::write(&dir.join("inputs.npy"), "<i4", &[n, 8], &ids).unwrap();
    let next: Vec<u8> = (0..n * 8).flat_map(|i| (((i + 1) % 50) as i64).to_le_bytes()).collect();
    trainbench_data::npy::write(&dir.join("labels.npy"), "<i8", &[n, 8], &next).unwrap();
}

/// The single result of `spec` run on `backend` in `dir`.
fn run(dir: &Path, name: &str, spec: &str, backend: &str) -> Value {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, spec).unwrap();
    let out = dir.join(format!("out-{name}-{backend}"));
    let o = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--backend", backend, "--out"])
        .arg(&out)
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{name} on {backend}: {}", String::from_utf8_lossy(&o.stderr));
    let folder = out.read_dir().unwrap().next().unwrap().unwrap().path();
    let file = std::fs::read_dir(folder)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name() != "index.json")
        .unwrap()
        .path();
    serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
}

#[test]
fn every_format_trains_on_tch_and_wgpu() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    datasets::npy_f32(&d.join("npy"), 24, 64, 10);
    datasets::npy_u8(&d.join("npy8"), 24, 64, 10);
    datasets::raw_f32(&d.join("raw"), 24, 64, 10);
    datasets::cifar10(&d.join("cifar"), 2, 12);
    datasets::image_folder(&d.join("images"), 3, 8, 40, 36);
    tokens(&d.join("tokens"), 24);
    let cases = [
        ("npy", datasets::mlp_spec(64, 10, "npy", "npy", ""), 24),
        ("npy-u8", datasets::mlp_spec(64, 10, "npy8", "npy", ""), 24),
        ("raw-f32", datasets::mlp_spec(64, 10, "raw", "raw-f32", ""), 24),
        ("cifar10", datasets::resnet32_spec("cifar", "cifar10", "workers = 1"), 24),
        ("image-folder", datasets::resnet32_spec("images", "image-folder", "workers = 2"), 24),
        ("tokens", token_spec("tokens"), 24),
    ];
    for (name, spec, samples) in &cases {
        for backend in ["tch", "wgpu"] {
            let r = run(d, name, spec, backend);
            assert_eq!(r["outcome"]["status"], "completed", "{name} on {backend}: {r:#}");
            assert_eq!(r["data"]["samples"].as_u64(), Some(*samples as u64), "{name} on {backend}");
            assert_eq!(r["metrics"]["loss"]["all_finite"], true, "{name} on {backend}");
            // Timed: waiting for a batch and copying it take time, so an untimed phase (left at 0) fails here.
            for phase in ["data_stall", "data_copy"] {
                let mean = r["metrics"]["phases"][phase]["mean_s"].as_f64();
                assert!(mean.is_some_and(|s| s > 0.0), "{name} on {backend}: {phase} is timed: {r:#}");
            }
        }
    }
}
