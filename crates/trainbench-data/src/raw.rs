//! The `raw-f32` layout: a folder holding `inputs.f32`, little-endian float32 samples of the model's input
//! shape back to back, and `labels.i64`, little-endian int64 labels of the label shape (one per sample for a
//! classifier). No header: the sample count follows from the file sizes, which must be whole samples.

use std::path::Path;

use crate::batch::DataError;
use crate::layout::{Layout, ValueKind};
use crate::npy::{Dtype, NpyArray, NpyDataset};

/// Open the `raw-f32` folder `root` for `layout` (a real-valued input).
pub fn open(root: &Path, layout: &Layout) -> Result<NpyDataset, DataError> {
    if layout.input_kind != ValueKind::Dense {
        return Err(DataError {
            file: root.display().to_string(),
            reason: format!(
                "`raw-f32` holds real values, but the model's input `{}` takes {}; use `npy` with integer inputs",
                layout.input_name,
                layout.input_kind.describe()
            ),
        });
    }
    let inputs = NpyArray::open_raw(&root.join("inputs.f32"), Dtype::F32, &layout.input_shape)?;
    let labels = NpyArray::open_raw(&root.join("labels.i64"), Dtype::I64, &layout.label_shape)?;
    NpyDataset::from_arrays(inputs, labels, layout)
}
