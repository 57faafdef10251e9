//! CIFAR-10's binary format: a folder of `data_batch_*.bin` files (the training batches; `test_batch.bin` is
//! not read), each a run of 3,073-byte records: the label byte, then 3x32x32 pixel bytes (red, green, blue
//! planes, row-major). Pixels are scaled to `[0, 1]` and normalised per channel with the CIFAR-10 training set's
//! mean and standard deviation, the usual recipe; no augmentation. Memory-mapped.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::batch::DataError;
use crate::dataset::{Dataset, DatasetInfo, InputOut, SampleOut, check_label};
use crate::layout::{Layout, ValueKind};
use trainbench_graph::init::SeededRng;

/// Bytes per record: one label byte and 3x32x32 pixels.
pub const RECORD: usize = 1 + 3 * 32 * 32;
/// Per-channel mean of the CIFAR-10 training images (RGB, pixels in `[0, 1]`).
pub const MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];
/// Per-channel standard deviation of the CIFAR-10 training images.
pub const STD: [f32; 3] = [0.2470, 0.2435, 0.2616];

/// A folder of CIFAR-10 binary batches.
#[derive(Debug)]
pub struct CifarDataset {
    files: Vec<(PathBuf, Mmap)>,
    /// First sample index of each file, and the total at the end.
    starts: Vec<usize>,
    classes: usize,
}

impl CifarDataset {
    /// Open every `data_batch_*.bin` in `root` for `layout` (a `[3, 32, 32]` real-valued input, one label).
    pub fn open(root: &Path, layout: &Layout) -> Result<Self, DataError> {
        let err = |file: &Path, reason: String| DataError { file: file.display().to_string(), reason };
        if layout.input_kind != ValueKind::Dense || layout.input_shape != [3, 32, 32] || !layout.label_shape.is_empty()
        {
            return Err(err(
                root,
                format!(
                    "CIFAR-10 holds 3x32x32 images with one label each, but the model's input `{}` is {:?} ({}) with labels of shape {:?}; build the model for 32x32 RGB images (e.g. `image_size = 32`)",
                    layout.input_name,
                    layout.input_shape,
                    layout.input_kind.describe(),
                    layout.label_shape
                ),
            ));
        }
        let mut names: Vec<PathBuf> = std::fs::read_dir(root)
            .map_err(|e| err(root, format!("cannot list the folder: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("data_batch_") && n.ends_with(".bin"))
            })
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(err(root, "holds no `data_batch_*.bin` file (CIFAR-10's binary version)".into()));
        }
        let mut files = Vec::new();
        let mut starts = vec![0];
        for path in names {
            let file = File::open(&path).map_err(|e| err(&path, format!("cannot open: {e}")))?;
            let len = file.metadata().map_err(|e| err(&path, format!("cannot read its size: {e}")))?.len() as usize;
            if len == 0 || len % RECORD != 0 {
                return Err(err(
                    &path,
                    format!(
                        "holds {len} bytes, not a whole number of {RECORD}-byte records (label + 3x32x32 pixels): the file is truncated or not CIFAR-10's binary format"
                    ),
                ));
            }
            // SAFETY: read-only map; every read is bounds-checked.
            let map = unsafe { Mmap::map(&file) }.map_err(|e| err(&path, format!("cannot map the file: {e}")))?;
            starts.push(starts[starts.len() - 1] + len / RECORD);
            files.push((path, map));
        }
        Ok(CifarDataset { files, starts, classes: layout.classes })
    }

    /// The file, the record's bytes and its number in the file, of sample `index`.
    fn record(&self, index: usize) -> Result<(&Path, &[u8], usize), DataError> {
        let f = self.starts.partition_point(|&s| s <= index).saturating_sub(1);
        let (path, map) = self.files.get(f).ok_or_else(|| DataError {
            file: "CIFAR-10".into(),
            reason: format!("sample {index} is beyond the dataset's {} samples", self.len()),
        })?;
        let r = index - self.starts[f];
        let bytes = map.get(r * RECORD..(r + 1) * RECORD).ok_or_else(|| DataError {
            file: path.display().to_string(),
            reason: format!("record {r} lies beyond the end of the file (changed while it was read?)"),
        })?;
        Ok((path, bytes, r))
    }
}

impl Dataset for CifarDataset {
    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    fn read(&self, index: usize, _rng: &mut SeededRng, out: SampleOut<'_>) -> Result<(), DataError> {
        let (path, bytes, r) = self.record(index)?;
        out.labels[0] = i64::from(bytes[0]);
        check_label(out.labels, self.classes, path, r)?;
        let InputOut::Dense(v) = out.input else {
            return Err(DataError {
                file: path.display().to_string(),
                reason: "CIFAR-10 feeds real-valued inputs".into(),
            });
        };
        for (c, plane) in bytes[1..].chunks_exact(32 * 32).enumerate() {
            let (scale, shift) = (1.0 / (255.0 * STD[c]), MEAN[c] / STD[c]);
            for (o, &p) in v[c * 1024..(c + 1) * 1024].iter_mut().zip(plane) {
                *o = f32::from(p) * scale - shift;
            }
        }
        Ok(())
    }

    fn scan_labels(&self) -> Result<(), DataError> {
        for (f, (path, map)) in self.files.iter().enumerate() {
            for r in 0..self.starts[f + 1] - self.starts[f] {
                check_label(&[i64::from(map[r * RECORD])], self.classes, path, r)?;
            }
        }
        Ok(())
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo {
            samples: self.len(),
            description: format!("{} CIFAR-10 binary batch files, {} records", self.files.len(), self.len()),
        }
    }
}
