//! The `.npy` file format (NumPy's array files, versions 1 to 3): the header parsed, the data memory-mapped, and
//! the `npy` dataset layout, a folder holding `inputs.npy` and `labels.npy`.
//!
//! Only what trainbench reads is accepted: C order, little-endian (or byte-sized) elements of the dtypes
//! `f4`, `f2`, `u1` (inputs) and `i8`, `i4`, `u1` (labels, token ids). Large files are never read whole: the
//! array is mapped and each sample is converted as it is read.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::batch::DataError;
use crate::dataset::{Dataset, DatasetInfo, InputOut, SampleOut, check_label};
use crate::layout::{Layout, ValueKind};
use trainbench_graph::init::SeededRng;

/// Element types of the arrays trainbench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float (`<f4`).
    F32,
    /// 16-bit float (`<f2`), widened to f32.
    F16,
    /// Unsigned byte (`|u1`): images (scaled by 1/255 for a real-valued input) or token ids.
    U8,
    /// 32-bit signed integer (`<i4`).
    I32,
    /// 64-bit signed integer (`<i8`).
    I64,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::F16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::I64 => 8,
        }
    }

    /// NumPy's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::U8 => "uint8",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
        }
    }

    fn parse(descr: &str) -> Result<Self, String> {
        let (order, code) = descr.split_at(descr.len().min(1));
        let dtype = match code {
            "f4" => Dtype::F32,
            "f2" => Dtype::F16,
            "u1" => Dtype::U8,
            "i4" => Dtype::I32,
            "i8" => Dtype::I64,
            _ => {
                return Err(format!(
                    "element type `{descr}` is not read (float32, float16, uint8, int32 or int64 are); convert it with `array.astype(...)`"
                ));
            }
        };
        match order {
            "<" | "|" => Ok(dtype),
            "=" if cfg!(target_endian = "little") => Ok(dtype),
            _ => Err(format!(
                "element type `{descr}` is big-endian; trainbench reads little-endian arrays: save `array.astype(array.dtype.newbyteorder('<'))`"
            )),
        }
    }
}

/// A memory-mapped `.npy` array: its element type, shape and the mapped bytes.
#[derive(Debug)]
pub struct NpyArray {
    /// The file, as the user would find it.
    pub path: PathBuf,
    /// Element type.
    pub dtype: Dtype,
    /// Shape, first axis the samples.
    pub shape: Vec<usize>,
    map: Option<Mmap>,
    offset: usize,
}

impl NpyArray {
    /// Open and map `path`, checking the header and that the file holds every element the header promises.
    pub fn open(path: &Path) -> Result<Self, DataError> {
        let err = |reason: String| DataError { file: path.display().to_string(), reason };
        let file = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let len = file.metadata().map_err(|e| err(format!("cannot read its size: {e}")))?.len() as usize;
        if len == 0 {
            return Err(err("the file is empty; expected a .npy array (`numpy.save`)".into()));
        }
        // SAFETY: the map is read-only; a dataset file changed by another process while a run reads it is the
        // user's to avoid (as with every reader of mapped files), and every read is bounds-checked below.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| err(format!("cannot map the file: {e}")))?;
        let (header, offset) = parse_header(&map).map_err(err)?;
        let numel = header.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let need = numel.and_then(|n| n.checked_mul(header.dtype.size())).and_then(|b| b.checked_add(offset));
        match need {
            Some(need) if need <= len => {}
            Some(need) => {
                return Err(err(format!(
                    "the file is truncated: its header declares {} {} {}, {need} bytes with the header, but the file has {len}",
                    dims(&header.shape),
                    header.dtype.name(),
                    if header.shape.len() == 1 { "values" } else { "array" },
                )));
            }
            None => return Err(err(format!("the declared shape {} is too large", dims(&header.shape)))),
        }
        Ok(NpyArray { path: path.to_path_buf(), dtype: header.dtype, shape: header.shape, map: Some(map), offset })
    }

    /// Map a headerless file of little-endian `dtype` values, samples of `per_sample` back to back; refused
    /// when its size is not a whole number of samples.
    pub fn open_raw(path: &Path, dtype: Dtype, per_sample: &[usize]) -> Result<Self, DataError> {
        let err = |reason: String| DataError { file: path.display().to_string(), reason };
        let file = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let len = file.metadata().map_err(|e| err(format!("cannot read its size: {e}")))?.len() as usize;
        let sample = per_sample.iter().product::<usize>() * dtype.size();
        if len == 0 || sample == 0 || len % sample != 0 {
            return Err(err(format!(
                "holds {len} bytes, not a whole number of samples of {} {} values ({sample} bytes each): the file is truncated or its samples have another shape",
                dims(per_sample),
                dtype.name()
            )));
        }
        // SAFETY: as in `open`: read-only, every read bounds-checked.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| err(format!("cannot map the file: {e}")))?;
        let shape = std::iter::once(len / sample).chain(per_sample.iter().copied()).collect();
        Ok(NpyArray { path: path.to_path_buf(), dtype, shape, map: Some(map), offset: 0 })
    }

    /// Number of samples (the first axis; 1 for a 0-d array).
    pub fn samples(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Elements per sample.
    pub fn sample_numel(&self) -> usize {
        self.shape.iter().skip(1).product()
    }

    /// The raw little-endian bytes of sample `index`.
    fn sample_bytes(&self, index: usize) -> Result<&[u8], DataError> {
        let size = self.sample_numel() * self.dtype.size();
        let start = self.offset + index * size;
        self.map.as_ref().and_then(|m| m.get(start..start + size)).ok_or_else(|| DataError {
            file: self.path.display().to_string(),
            reason: format!("sample {index} lies beyond the end of the file (changed while it was read?)"),
        })
    }

    /// Sample `index` as real values (`u8` scaled by 1/255, `f16` widened).
    pub fn read_f32(&self, index: usize, out: &mut [f32]) -> Result<(), DataError> {
        let bytes = self.sample_bytes(index)?;
        match self.dtype {
            Dtype::F32 => {
                bytes.chunks_exact(4).zip(out).for_each(|(b, o)| *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            Dtype::F16 => {
                bytes.chunks_exact(2).zip(out).for_each(|(b, o)| *o = f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            }
            Dtype::U8 => bytes.iter().zip(out).for_each(|(b, o)| *o = f32::from(*b) / 255.0),
            Dtype::I32 | Dtype::I64 => return Err(self.wrong_kind("real values")),
        }
        Ok(())
    }

    /// Sample `index` as integers (ids or labels).
    pub fn read_i64(&self, index: usize, out: &mut [i64]) -> Result<(), DataError> {
        let bytes = self.sample_bytes(index)?;
        match self.dtype {
            Dtype::I64 => bytes.chunks_exact(8).zip(out).for_each(|(b, o)| {
                *o = i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
            }),
            Dtype::I32 => bytes
                .chunks_exact(4)
                .zip(out)
                .for_each(|(b, o)| *o = i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            Dtype::U8 => bytes.iter().zip(out).for_each(|(b, o)| *o = i64::from(*b)),
            Dtype::F32 | Dtype::F16 => return Err(self.wrong_kind("integers")),
        }
        Ok(())
    }

    fn wrong_kind(&self, wanted: &str) -> DataError {
        DataError {
            file: self.path.display().to_string(),
            reason: format!("holds {} values, but {wanted} are needed", self.dtype.name()),
        }
    }
}

/// What a `.npy` header declares.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    dtype: Dtype,
    shape: Vec<usize>,
}

/// Parse the magic, version and header dictionary; returns the header and where the data starts.
fn parse_header(bytes: &[u8]) -> Result<(Header, usize), String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy file (no `\\x93NUMPY` magic); save arrays with `numpy.save`".into());
    }
    let (len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(format!("unknown .npy format version {v}")),
    };
    let text = bytes.get(start..start + len).ok_or("the file is truncated inside its header")?;
    let text = std::str::from_utf8(text).map_err(|_| "the header is not text")?;
    let descr = dict_value(text, "descr").ok_or("the header has no `descr`")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = dict_value(text, "fortran_order").ok_or("the header has no `fortran_order`")?;
    if fortran != "False" {
        return Err("the array is stored in Fortran (column-major) order; save `numpy.ascontiguousarray(array)`".into());
    }
    let shape = dict_value(text, "shape").ok_or("the header has no `shape`")?;
    let shape = shape
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|d| {
            d.trim_end_matches('L').parse::<usize>().map_err(|_| format!("bad dimension `{d}` in the header's shape"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((Header { dtype: Dtype::parse(descr)?, shape }, start + len))
}

/// The text of `key`'s value in the header's Python dict literal (a quoted string, a word or a tuple).
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(&format!("'{key}'")).or_else(|| text.find(&format!("\"{key}\"")))?;
    let rest = text[at + key.len() + 2..].trim_start().strip_prefix(':')?.trim_start();
    let end = match rest.chars().next()? {
        '(' => rest.find(')')? + 1,
        q @ ('\'' | '"') => rest[1..].find(q)? + 2,
        _ => rest.find([',', '}']).unwrap_or(rest.len()),
    };
    Some(rest[..end].trim())
}

/// IEEE 754 half to single precision.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value m * 2^-24.
            let v = m as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn dims(shape: &[usize]) -> String {
    format!("[{}]", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", "))
}

/// The `npy` layout: `inputs.npy` (`[samples, ..input shape]`) and `labels.npy` (`[samples, ..label shape]`).
#[derive(Debug)]
pub struct NpyDataset {
    inputs: NpyArray,
    labels: NpyArray,
    layout: Layout,
}

impl NpyDataset {
    /// Open the folder `root` for a model whose batches have `layout`, checking everything but the values.
    pub fn open(root: &Path, layout: &Layout) -> Result<Self, DataError> {
        let inputs = NpyArray::open(&root.join("inputs.npy"))?;
        let labels = NpyArray::open(&root.join("labels.npy"))?;
        Self::from_arrays(inputs, labels, layout)
    }

    /// A dataset of two mapped arrays, checked against `layout` (shapes, element types, sample counts).
    pub fn from_arrays(inputs: NpyArray, labels: NpyArray, layout: &Layout) -> Result<Self, DataError> {
        let file = |a: &NpyArray| a.path.display().to_string();
        let want_in: Vec<usize> = std::iter::once(inputs.samples()).chain(layout.input_shape.iter().copied()).collect();
        if inputs.shape.len() != want_in.len() || inputs.shape[1..] != want_in[1..] {
            return Err(DataError {
                file: file(&inputs),
                reason: format!(
                    "shape {} does not match the model's input: expected {} ([samples, ..{}] for input `{}`)",
                    dims(&inputs.shape),
                    dims(&want_in),
                    dims(&layout.input_shape),
                    layout.input_name
                ),
            });
        }
        let allowed: &[Dtype] = match layout.input_kind {
            ValueKind::Dense => &[Dtype::F32, Dtype::F16, Dtype::U8],
            ValueKind::Ids { .. } => &[Dtype::I64, Dtype::I32, Dtype::U8],
        };
        if !allowed.contains(&inputs.dtype) {
            return Err(DataError {
                file: file(&inputs),
                reason: format!(
                    "holds {} values; the model's input `{}` takes {} ({})",
                    inputs.dtype.name(),
                    layout.input_name,
                    layout.input_kind.describe(),
                    allowed.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        let want_lab: Vec<usize> =
            std::iter::once(labels.samples()).chain(layout.label_shape.iter().copied()).collect();
        if labels.shape.len() != want_lab.len() || labels.shape[1..] != want_lab[1..] {
            return Err(DataError {
                file: file(&labels),
                reason: format!(
                    "shape {} does not match the model's labels: expected {} ([samples, ..{}] for `{}`)",
                    dims(&labels.shape),
                    dims(&want_lab),
                    dims(&layout.label_shape),
                    layout.label_name
                ),
            });
        }
        if ![Dtype::I64, Dtype::I32, Dtype::U8].contains(&labels.dtype) {
            return Err(DataError {
                file: file(&labels),
                reason: format!("holds {} values; labels are int64, int32 or uint8 class ids", labels.dtype.name()),
            });
        }
        if inputs.samples() != labels.samples() {
            return Err(DataError {
                file: file(&labels),
                reason: format!(
                    "holds {} samples but {} holds {}; the two arrays must have one label entry per input",
                    labels.samples(),
                    file(&inputs),
                    inputs.samples()
                ),
            });
        }
        Ok(NpyDataset { inputs, labels, layout: layout.clone() })
    }
}

/// Refuse token ids outside `0..vocab`, naming the file and the sample.
fn check_ids(ids: &[i64], vocab: usize, file: &Path, index: usize) -> Result<(), DataError> {
    match ids.iter().find(|&&t| t < 0 || t as u64 >= vocab as u64) {
        None => Ok(()),
        Some(bad) => Err(DataError {
            file: file.display().to_string(),
            reason: format!("sample {index} holds token id {bad}, outside the model's vocabulary 0..{vocab}"),
        }),
    }
}

/// Labels (and token ids) scanned for their range at validation when there are at most this many values; larger label arrays
/// are checked as each sample is read.
pub const LABEL_SCAN_LIMIT: usize = 1 << 24;

impl Dataset for NpyDataset {
    fn len(&self) -> usize {
        self.inputs.samples()
    }

    fn read(&self, index: usize, _rng: &mut SeededRng, out: SampleOut<'_>) -> Result<(), DataError> {
        match out.input {
            InputOut::Dense(v) => self.inputs.read_f32(index, v)?,
            InputOut::Ids(v) => {
                self.inputs.read_i64(index, v)?;
                if let ValueKind::Ids { vocab } = self.layout.input_kind {
                    check_ids(v, vocab, &self.inputs.path, index)?;
                }
            }
        }
        self.labels.read_i64(index, out.labels)?;
        check_label(out.labels, self.layout.classes, &self.labels.path, index)
    }

    fn scan_labels(&self) -> Result<(), DataError> {
        if self.labels.samples() * self.labels.sample_numel() <= LABEL_SCAN_LIMIT {
            let mut buf = vec![0i64; self.labels.sample_numel()];
            for i in 0..self.labels.samples() {
                self.labels.read_i64(i, &mut buf)?;
                check_label(&buf, self.layout.classes, &self.labels.path, i)?;
            }
        }
        let ValueKind::Ids { vocab } = self.layout.input_kind else { return Ok(()) };
        if self.inputs.samples() * self.inputs.sample_numel() <= LABEL_SCAN_LIMIT {
            let mut buf = vec![0i64; self.inputs.sample_numel()];
            for i in 0..self.inputs.samples() {
                self.inputs.read_i64(i, &mut buf)?;
                check_ids(&buf, vocab, &self.inputs.path, i)?;
            }
        }
        Ok(())
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo {
            samples: self.len(),
            description: format!(
                "{} {} {}, {} {} {}",
                file_name(&self.inputs.path),
                self.inputs.dtype.name(),
                dims(&self.inputs.shape),
                file_name(&self.labels.path),
                self.labels.dtype.name(),
                dims(&self.labels.shape)
            ),
        }
    }
}

/// Write an array as a version 1.0 `.npy` file (for trainbench's tests and the dataset scripts' checks).
pub fn write(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> std::io::Result<()> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_every_version_parse() {
        let text = "{'descr': '<f4', 'fortran_order': False, 'shape': (1797, 64), }";
        let mut v1 = b"\x93NUMPY\x01\x00".to_vec();
        v1.extend_from_slice(&(text.len() as u16).to_le_bytes());
        v1.extend_from_slice(text.as_bytes());
        let (h, off) = parse_header(&v1).unwrap();
        assert_eq!(h, Header { dtype: Dtype::F32, shape: vec![1797, 64] });
        assert_eq!(off, 10 + text.len());
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        v2.extend_from_slice(&(text.len() as u32).to_le_bytes());
        v2.extend_from_slice(text.as_bytes());
        assert_eq!(parse_header(&v2).unwrap().1, 12 + text.len());
    }

    #[test]
    fn scalars_vectors_and_refusals() {
        let h = |t: &str| {
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend_from_slice(&(t.len() as u16).to_le_bytes());
            b.extend_from_slice(t.as_bytes());
            parse_header(&b)
        };
        assert_eq!(h("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }").unwrap().0.shape, vec![5]);
        assert_eq!(h("{'descr': '|u1', 'fortran_order': False, 'shape': (), }").unwrap().0.shape, Vec::<usize>::new());
        assert!(h("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }").unwrap_err().contains("Fortran"));
        assert!(h("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }").unwrap_err().contains("big-endian"));
        assert!(h("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }").unwrap_err().contains("`<f8`"));
        assert!(parse_header(b"PK\x03\x04 not npy").unwrap_err().contains("magic"));
    }

    #[test]
    fn written_arrays_read_back_and_truncation_is_named() {
        let dir = std::env::temp_dir().join(format!("tb-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let vals: Vec<u8> = [1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        write(&p, "<f4", &[3, 2], &vals).unwrap();
        let a = NpyArray::open(&p).unwrap();
        assert_eq!((a.samples(), a.sample_numel()), (3, 2));
        let mut out = [0f32; 2];
        a.read_f32(1, &mut out).unwrap();
        assert_eq!(out, [3.25, 4.0]);
        write(&p, "<f4", &[4, 2], &vals).unwrap();
        let e = NpyArray::open(&p).unwrap_err();
        assert!(e.reason.contains("truncated") && e.file.ends_with("a.npy"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn half_floats_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
    }
}
