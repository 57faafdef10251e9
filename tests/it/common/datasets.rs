//! Small local datasets written by the tests, in every format trainbench reads, and specs that train on them.

use std::path::{Path, PathBuf};

use trainbench::workload::data::npy;

/// Write an `npy` dataset folder: `inputs.npy` float32 `[n, width]` with sample `i` all `i / n`, and
/// `labels.npy` int64 `[n]` with label `i % classes`.
pub fn npy_f32(dir: &Path, n: usize, width: usize, classes: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let inputs: Vec<u8> =
        (0..n).flat_map(|i| std::iter::repeat_n(i as f32 / n as f32, width)).flat_map(f32::to_le_bytes).collect();
    npy::write(&dir.join("inputs.npy"), "<f4", &[n, width], &inputs).unwrap();
    let labels: Vec<u8> = (0..n).flat_map(|i| ((i % classes) as i64).to_le_bytes()).collect();
    npy::write(&dir.join("labels.npy"), "<i8", &[n], &labels).unwrap();
    dir.to_path_buf()
}

/// Write an `npy` dataset folder with uint8 inputs (sample `i` all `i % 256`) and int32 labels `i % classes`.
pub fn npy_u8(dir: &Path, n: usize, width: usize, classes: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let inputs: Vec<u8> = (0..n).flat_map(|i| std::iter::repeat_n((i % 256) as u8, width)).collect();
    npy::write(&dir.join("inputs.npy"), "|u1", &[n, width], &inputs).unwrap();
    let labels: Vec<u8> = (0..n).flat_map(|i| ((i % classes) as i32).to_le_bytes()).collect();
    npy::write(&dir.join("labels.npy"), "<i4", &[n], &labels).unwrap();
    dir.to_path_buf()
}

/// A spec training an MLP of `inputs` features and `classes` classes on the local dataset at `path`
/// (relative to the spec) in `format`, on the mock backend, with `extra` lines appended to `[dataset]`.
pub fn mlp_spec(inputs: usize, classes: usize, path: &str, format: &str, extra: &str) -> String {
    format!(
        "version = 1\nname = \"local-data\"\n[model]\nfamily = \"mlp\"\ninputs = {inputs}\nhidden = [16]\nclasses = {classes}\n\
         [dataset]\nsource = \"local\"\npath = \"{path}\"\nformat = \"{format}\"\n{extra}\n\
         [sweep]\nbatch_sizes = [8]\n[topology]\nbackend = \"mock\"\n[run]\nwarmup = 1\niterations = 4\n"
    )
}
