//! Local datasets through the CLI: `validate` refuses what a run could not read (exit 2, the file and both
//! shapes named), and `run` reads the files, recording the dataset and the loader's own throughput in the
//! result's `data` section.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use trainbench_data::{Format, InputOut, Layout, SampleOut, cifar};

use crate::common::datasets::{self, mlp_spec};

fn validate(dir: &Path, spec: &str) -> (i32, String) {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = Command::cargo_bin("trainbench").unwrap().arg("validate").arg(&path).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn a_valid_npy_dataset_passes_validation() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    datasets::npy_u8(&dir.path().join("u"), 40, 64, 10);
    assert_eq!(validate(dir.path(), &mlp_spec(64, 10, "d", "npy", "")).0, 0);
    assert_eq!(validate(dir.path(), &mlp_spec(64, 10, "u", "npy", "workers = 2")).0, 0);
}

#[test]
fn a_mismatched_width_is_refused_naming_the_file_and_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 63, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.npy") && text.contains("[40, 63]") && text.contains("[40, 64]"), "{text}");
    assert!(text.contains("field: dataset.path"), "{text}");
}

#[test]
fn a_truncated_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let bytes = std::fs::read(d.join("inputs.npy")).unwrap();
    std::fs::write(d.join("inputs.npy"), &bytes[..bytes.len() - 100]).unwrap();
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.npy") && text.contains("truncated"), "{text}");
}

#[test]
fn labels_outside_the_classes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 12);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("labels.npy") && text.contains("label 10") && text.contains("10 classes"), "{text}");
}

#[test]
fn a_dataset_smaller_than_one_batch_and_pipeline_keys_without_threads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 5, 64, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("5 samples") && text.contains("batch of 8"), "{text}");
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", "prefetch = 4"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("`dataset.prefetch` needs reading threads"), "{text}");
}

#[test]
fn a_model_without_class_labels_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let spec = "version = 1\nname = \"gan\"\n[model]\nfamily = \"wgan-gp\"\n[dataset]\nsource = \"local\"\npath = \"d\"\nformat = \"npy\"\n";
    let (code, text) = validate(dir.path(), spec);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("has no class-label input"), "{text}");
    assert!(text.contains("field: dataset.source"), "{text}");
}

#[test]
fn a_run_reads_the_dataset_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 43, 64, 10);
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, mlp_spec(64, 10, "d", "npy", "workers = 2\non_error = \"skip\"")).unwrap();
    let out = dir.path().join("out");
    Command::cargo_bin("trainbench").unwrap().args(["run", "--quiet", "--out"]).arg(&out).arg(&spec).assert().success();
    let file = out.join("local-data").join("local-data.b8.fp32.1x1.r0.json");
    let result: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(result["outcome"]["status"], "completed");
    let data = &result["data"];
    assert_eq!(data["format"], "npy");
    assert_eq!(data["path"], dir.path().join("d").display().to_string());
    assert_eq!(data["description"], "inputs.npy float32 [43, 64], labels.npy int64 [43]");
    assert_eq!((data["samples"].as_u64(), data["samples_per_epoch"].as_u64()), (Some(43), Some(40)));
    assert_eq!((data["batches_per_epoch"].as_u64(), data["dropped_per_epoch"].as_u64()), (Some(5), Some(3)));
    assert_eq!((data["workers"].as_u64(), data["prefetch"].as_u64()), (Some(2), Some(4)));
    assert_eq!((data["on_error"].as_str(), data["skipped"].as_u64()), (Some("skip"), Some(0)));
    let loader = &data["loader"];
    assert!(loader["batches"].as_u64().unwrap() >= 3);
    assert_eq!(loader["samples"].as_u64().unwrap(), 8 * loader["batches"].as_u64().unwrap());
    assert!(loader["samples_per_s"].as_f64().unwrap() > 0.0);

    let report = dir.path().join("report");
    Command::cargo_bin("trainbench").unwrap().args(["report", "--out"]).arg(&report).arg(&out).assert().success();
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains("loader samples/s") && md.contains("the input pipeline reading the local dataset alone"),
        "{md}"
    );
}

#[test]
fn a_dataset_broken_after_validation_fails_the_run_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, mlp_spec(64, 10, "d", "npy", "")).unwrap();
    let suite = trainbench::runner::Suite::from_validated(
        &trainbench::spec::load_spec(&spec, &trainbench::spec::Overrides::none()).unwrap(),
    );
    std::fs::write(d.join("labels.npy"), b"garbage").unwrap();
    let opts = trainbench::runner::RunnerOptions { out_dir: dir.path().join("out"), ..Default::default() };
    crate::common::link_backends();
    let report = trainbench::runner::run_suite(&suite, &opts, &mut |_, _| {}).unwrap();
    let outcome = serde_json::to_value(&report.results[0].outcome).unwrap();
    assert_eq!(outcome["status"], "failed");
    let message = outcome["message"].as_str().unwrap();
    assert!(message.contains("labels.npy") && message.contains("not a .npy file"), "{message}");
    assert!(report.results[0].data.is_none());
}

/// Open a dataset folder through the library as a run would, for the model of `spec`.
fn open(dir: &Path, spec: &str, format: Format) -> Box<dyn trainbench_data::Dataset> {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let spec = trainbench::spec::load_spec(&path, &trainbench::spec::Overrides::none()).unwrap();
    let layout = Layout::of(spec.graph()).unwrap();
    trainbench_data::open(format, &spec.dataset_root().unwrap(), &layout).unwrap()
}

/// Sample `index` of `dataset`: its input values and labels.
fn sample(dataset: &dyn trainbench_data::Dataset, index: usize, width: usize) -> (Vec<f32>, Vec<i64>) {
    let (mut x, mut y) = (vec![0f32; width], vec![0i64; 1]);
    let mut rng = trainbench_graph::init::SeededRng::new(0, "t");
    dataset.read(index, &mut rng, SampleOut { input: InputOut::Dense(&mut x), labels: &mut y }).unwrap();
    (x, y)
}

#[test]
fn npy_u8_inputs_are_scaled_and_int32_labels_widened() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_u8(&dir.path().join("u"), 300, 4, 10);
    let d = open(dir.path(), &mlp_spec(4, 10, "u", "npy", ""), Format::Npy);
    assert_eq!(sample(d.as_ref(), 5, 4), (vec![5.0 / 255.0; 4], vec![5]));
    assert_eq!(sample(d.as_ref(), 299, 4), (vec![43.0 / 255.0; 4], vec![9]));
}

#[test]
fn raw_f32_folders_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = datasets::raw_f32(&dir.path().join("r"), 30, 64, 10);
    assert_eq!(validate(dir.path(), &mlp_spec(64, 10, "r", "raw-f32", "")).0, 0);
    let ds = open(dir.path(), &mlp_spec(64, 10, "r", "raw-f32", ""), Format::RawF32);
    assert_eq!(sample(ds.as_ref(), 17, 64), (vec![17.0; 64], vec![7]));
    let bytes = std::fs::read(d.join("inputs.f32")).unwrap();
    std::fs::write(d.join("inputs.f32"), &bytes[..bytes.len() - 4]).unwrap();
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "r", "raw-f32", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.f32") && text.contains("not a whole number of samples of [64]"), "{text}");
    datasets::raw_f32(&dir.path().join("r"), 30, 63, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "r", "raw-f32", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.f32"), "{text}");
}

#[test]
fn cifar10_batches_are_read_normalised_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = datasets::cifar10(&dir.path().join("c"), 2, 12);
    let spec = datasets::resnet32_spec("c", "cifar10", "");
    assert_eq!(validate(dir.path(), &spec).0, 0);
    let ds = open(dir.path(), &spec, Format::Cifar10);
    assert_eq!(ds.len(), 24);
    let (x, y) = sample(ds.as_ref(), 15, 3 * 32 * 32);
    assert_eq!(y, vec![5], "record 3 of the second file");
    let norm = |p: f32, c: usize| (p / 255.0 - cifar::MEAN[c]) / cifar::STD[c];
    assert!((x[0] - norm(3.0, 0)).abs() < 1e-5 && (x[1023] - norm(3.0, 0)).abs() < 1e-5);
    assert!((x[1024] - norm(0.0, 1)).abs() < 1e-5 && (x[3071] - norm(255.0, 2)).abs() < 1e-5);
    let bytes = std::fs::read(d.join("data_batch_2.bin")).unwrap();
    std::fs::write(d.join("data_batch_2.bin"), &bytes[..bytes.len() - 10]).unwrap();
    let (code, text) = validate(dir.path(), &spec);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("data_batch_2.bin") && text.contains("3073-byte records"), "{text}");
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "c", "cifar10", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("3x32x32"), "{text}");
}

#[test]
fn every_format_runs_end_to_end_on_the_mock_backend() {
    let dir = tempfile::tempdir().unwrap();
    datasets::raw_f32(&dir.path().join("r"), 20, 64, 10);
    datasets::cifar10(&dir.path().join("c"), 1, 20);
    for (name, spec) in [
        ("raw", mlp_spec(64, 10, "r", "raw-f32", "")),
        ("cifar", datasets::resnet32_spec("c", "cifar10", "workers = 1")),
    ] {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, spec).unwrap();
        let out = dir.path().join(format!("out-{name}"));
        Command::cargo_bin("trainbench")
            .unwrap()
            .args(["run", "--quiet", "--out"])
            .arg(&out)
            .arg(&path)
            .assert()
            .success();
        let index = std::fs::read_dir(out.read_dir().unwrap().next().unwrap().unwrap().path()).unwrap();
        let file = index.filter_map(Result::ok).find(|e| e.file_name() != "index.json").unwrap().path();
        let result: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        assert_eq!(result["outcome"]["status"], "completed", "{name}");
        assert_eq!(
            (result["data"]["samples"].as_u64(), result["data"]["dropped_per_epoch"].as_u64()),
            (Some(20), Some(4))
        );
    }
}

/// A custom token model: `len` token ids of a vocabulary of 50 in, a class of 50 per position out.
fn token_spec(path: &str) -> String {
    format!(
        "version = 1\nname = \"tokens\"\n[model]\nfamily = \"custom\"\ninput = [8]\ninput_kind = {{ tokens = {{ vocab = 50 }} }}\n\
         loss = \"cross-entropy\"\nlayers = [{{ type = \"embedding\", dim = 16 }}, {{ type = \"linear\", out_features = 50 }}]\n\
         [dataset]\nsource = \"local\"\npath = \"{path}\"\nformat = \"npy\"\n[sweep]\nbatch_sizes = [4]\n\
         [topology]\nbackend = \"mock\"\n[run]\nwarmup = 1\niterations = 3\n"
    )
}

#[test]
fn token_datasets_feed_ids_as_they_are_and_ids_outside_the_vocabulary_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("t");
    std::fs::create_dir_all(&d).unwrap();
    let write = |top: i32| {
        let ids: Vec<u8> = (0..10 * 8).flat_map(|i| (i % top).to_le_bytes()).collect();
        trainbench_data::npy::write(&d.join("inputs.npy"), "<i4", &[10, 8], &ids).unwrap();
        let next: Vec<u8> = (0..10 * 8).flat_map(|i| (((i + 1) % 50) as i64).to_le_bytes()).collect();
        trainbench_data::npy::write(&d.join("labels.npy"), "<i8", &[10, 8], &next).unwrap();
    };
    write(50);
    let (code, text) = validate(dir.path(), &token_spec("t"));
    assert_eq!(code, 0, "{text}");
    let spec =
        trainbench::spec::load_spec(&dir.path().join("spec.toml"), &trainbench::spec::Overrides::none()).unwrap();
    let layout = Layout::of(spec.graph()).unwrap();
    assert_eq!(layout.label_shape, vec![8]);
    let ds = trainbench_data::open(Format::Npy, &d, &layout).unwrap();
    let (mut x, mut y) = (vec![0i64; 8], vec![0i64; 8]);
    let mut rng = trainbench_graph::init::SeededRng::new(0, "t");
    ds.read(2, &mut rng, SampleOut { input: InputOut::Ids(&mut x), labels: &mut y }).unwrap();
    assert_eq!(x, (16..24).collect::<Vec<i64>>());
    assert_eq!(y, (17..25).collect::<Vec<i64>>());
    write(60);
    let (code, text) = validate(dir.path(), &token_spec("t"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.npy") && text.contains("token id 50") && text.contains("0..50"), "{text}");
}

#[test]
fn repeats_in_worker_processes_read_the_dataset_too() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let spec = dir.path().join("spec.toml");
    let text = mlp_spec(64, 10, "d", "npy", "").replace("iterations = 4\n", "iterations = 4\nrepeats = 2\n");
    std::fs::write(&spec, text).unwrap();
    let out = dir.path().join("out");
    // From another folder: the workers must not resolve the dataset against their own working directory.
    Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(std::env::temp_dir())
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg(&spec)
        .assert()
        .success();
    for r in 0..2 {
        let file = out.join("local-data").join(format!("local-data.b8.fp32.1x1.r{r}.json"));
        let result: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(result["outcome"]["status"], "completed", "{result:#}");
        assert_eq!(result["environment"]["process"]["own_process_per_repeat"], true);
        assert_eq!(result["data"]["samples"], 40);
    }
}

#[test]
fn samples_is_refused_for_a_local_dataset() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", "samples = 10"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("`dataset.samples` sizes synthetic data"), "{text}");
}
