//! Opening a local dataset: [`open`] picks the reader for a [`Format`] and checks what can be checked up front.

use std::path::Path;

use crate::batch::DataError;
use crate::dataset::{Dataset, Format};
use crate::layout::Layout;
use crate::{cifar, image_folder, npy, raw};

/// Open the dataset at `root` in `format` for a model whose batches have `layout`, checking what can be
/// checked without reading every sample (files, headers, shapes, element types; small label files' range).
pub fn open(format: Format, root: &Path, layout: &Layout) -> Result<Box<dyn Dataset>, DataError> {
    if !root.is_dir() {
        return Err(DataError {
            file: root.display().to_string(),
            reason: "is not a folder; a local dataset's `path` names the folder holding its files".into(),
        });
    }
    let dataset: Box<dyn Dataset> = match format {
        Format::Npy => Box::new(npy::NpyDataset::open(root, layout)?),
        Format::RawF32 => Box::new(raw::open(root, layout)?),
        Format::Cifar10 => Box::new(cifar::CifarDataset::open(root, layout)?),
        Format::ImageFolder => Box::new(image_folder::ImageFolder::open(root, layout)?),
    };
    if dataset.is_empty() {
        return Err(DataError { file: root.display().to_string(), reason: "the dataset holds no sample".into() });
    }
    dataset.scan_labels()?;
    Ok(dataset)
}
