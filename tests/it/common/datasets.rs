//! Small local datasets written by the tests, in every format trainbench reads, and specs that train on them.

use std::path::{Path, PathBuf};

use trainbench_data::npy;

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

/// Write a `raw-f32` dataset folder: `inputs.f32` with sample `i` all `i`, `labels.i64` with `i % classes`.
pub fn raw_f32(dir: &Path, n: usize, width: usize, classes: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let inputs: Vec<u8> =
        (0..n).flat_map(|i| std::iter::repeat_n(i as f32, width)).flat_map(f32::to_le_bytes).collect();
    std::fs::write(dir.join("inputs.f32"), inputs).unwrap();
    let labels: Vec<u8> = (0..n).flat_map(|i| ((i % classes) as i64).to_le_bytes()).collect();
    std::fs::write(dir.join("labels.i64"), labels).unwrap();
    dir.to_path_buf()
}

/// Write a CIFAR-10 binary folder of `files` `data_batch_<k>.bin` files with `per_file` records each: record
/// `r` of file `k` has label `(k * per_file + r) % 10` and every red pixel `r % 256`, green 0, blue 255.
pub fn cifar10(dir: &Path, files: usize, per_file: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for k in 0..files {
        let mut bytes = Vec::with_capacity(per_file * 3073);
        for r in 0..per_file {
            bytes.push(((k * per_file + r) % 10) as u8);
            bytes.extend(std::iter::repeat_n((r % 256) as u8, 1024));
            bytes.extend(std::iter::repeat_n(0u8, 1024));
            bytes.extend(std::iter::repeat_n(255u8, 1024));
        }
        std::fs::write(dir.join(format!("data_batch_{}.bin", k + 1)), bytes).unwrap();
    }
    dir.to_path_buf()
}

/// A spec training a tiny ResNet-18 on 32x32 RGB images of 10 classes from the local dataset at `path`.
pub fn resnet32_spec(path: &str, format: &str, extra: &str) -> String {
    format!(
        "version = 1\nname = \"local-images\"\n[model]\nfamily = \"resnet\"\ndepth = 18\nwidth = 8\nclasses = 10\nimage_size = 32\nstem = \"cifar\"\n\
         [dataset]\nsource = \"local\"\npath = \"{path}\"\nformat = \"{format}\"\n{extra}\n\
         [sweep]\nbatch_sizes = [8]\n[topology]\nbackend = \"mock\"\n[run]\nwarmup = 1\niterations = 4\n"
    )
}

/// The colour of class `k`'s images in [`image_folder`].
pub fn class_colour(k: usize) -> [u8; 3] {
    [(k * 40 % 256) as u8, 100, (200 - k * 30 % 200) as u8]
}

/// Write an image folder: `classes` sub-folders `class_<k>` of `per_class` images each, `width x height`,
/// every pixel [`class_colour`]`(k)`; even-numbered files are PNG (odd ones RGBA), odd-numbered ones JPEG at
/// quality 100 (the first of class 0 grayscale-free RGB, every fifth a grayscale JPEG of the green value).
pub fn image_folder(dir: &Path, classes: usize, per_class: usize, width: u16, height: u16) -> PathBuf {
    for k in 0..classes {
        let class = dir.join(format!("class_{k}"));
        std::fs::create_dir_all(&class).unwrap();
        let c = class_colour(k);
        let n = usize::from(width) * usize::from(height);
        for i in 0..per_class {
            if i % 2 == 0 {
                let file = std::fs::File::create(class.join(format!("img_{i:03}.png"))).unwrap();
                let mut enc = png::Encoder::new(std::io::BufWriter::new(file), u32::from(width), u32::from(height));
                let rgba = i % 4 == 2;
                enc.set_color(if rgba { png::ColorType::Rgba } else { png::ColorType::Rgb });
                enc.set_depth(png::BitDepth::Eight);
                let px: Vec<u8> = if rgba {
                    std::iter::repeat_n([c[0], c[1], c[2], 255], n).flatten().collect()
                } else {
                    std::iter::repeat_n(c, n).flatten().collect()
                };
                enc.write_header().unwrap().write_image_data(&px).unwrap();
            } else {
                let enc = jpeg_encoder::Encoder::new_file(class.join(format!("img_{i:03}.jpg")), 100).unwrap();
                if i % 5 == 0 {
                    let px = vec![c[1]; n];
                    enc.encode(&px, width, height, jpeg_encoder::ColorType::Luma).unwrap();
                } else {
                    let px: Vec<u8> = std::iter::repeat_n(c, n).flatten().collect();
                    enc.encode(&px, width, height, jpeg_encoder::ColorType::Rgb).unwrap();
                }
            }
        }
    }
    dir.to_path_buf()
}
