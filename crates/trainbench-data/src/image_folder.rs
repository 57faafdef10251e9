//! The `image-folder` layout: one sub-folder per class (classes numbered in sorted name order, as
//! torchvision's `ImageFolder`), each holding JPEG (`.jpg`, `.jpeg`) and PNG (`.png`) files. Each sample is read,
//! decoded (JPEG with `zune-jpeg`, PNG with `png`), converted to RGB and put through the training transform of
//! `transform.rs`, from a generator seeded per epoch and sample.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use crate::batch::DataError;
use crate::dataset::{Dataset, DatasetInfo, InputOut, SampleOut};
use crate::layout::{Layout, ValueKind};
use crate::transform::{self, Rgb};
use trainbench_graph::init::SeededRng;

/// Largest image side accepted (a guard against decompression bombs).
pub const MAX_SIDE: usize = 16_384;

/// A folder of class folders of images.
#[derive(Debug)]
pub struct ImageFolder {
    /// Every image and its class, classes in name order, files in name order within a class.
    files: Vec<(PathBuf, u32)>,
    /// Class folder names, in class order.
    classes: Vec<String>,
    out_h: usize,
    out_w: usize,
}

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"))
}

/// The entries of `dir` in name order, each with whether it is a folder (symbolic links followed); the kind
/// comes from the directory listing where it can, so a folder of a million images is not stat-ed file by file.
fn sorted_entries(dir: &Path) -> Result<Vec<(PathBuf, bool)>, DataError> {
    let mut v: Vec<(PathBuf, bool)> = std::fs::read_dir(dir)
        .map_err(|e| DataError { file: dir.display().to_string(), reason: format!("cannot list the folder: {e}") })?
        .filter_map(|e| {
            let e = e.ok()?;
            let kind = e.file_type().ok()?;
            let is_dir = if kind.is_symlink() { e.path().is_dir() } else { kind.is_dir() };
            Some((e.path(), is_dir))
        })
        .collect();
    v.sort();
    Ok(v)
}

impl ImageFolder {
    /// List the class folders and images of `root` for `layout` (a `[3, H, W]` real-valued input, one label
    /// per sample, at least as many classes as folders), and check the header of each class's first image.
    pub fn open(root: &Path, layout: &Layout) -> Result<Self, DataError> {
        let err = |file: &Path, reason: String| DataError { file: file.display().to_string(), reason };
        let (out_h, out_w) = match (layout.input_kind, layout.input_shape.as_slice(), layout.label_shape.is_empty()) {
            (ValueKind::Dense, [3, h, w], true) => (*h, *w),
            _ => {
                return Err(err(
                    root,
                    format!(
                        "an image folder feeds RGB images with one label each, but the model's input `{}` is {:?} ({}) with labels of shape {:?}",
                        layout.input_name,
                        layout.input_shape,
                        layout.input_kind.describe(),
                        layout.label_shape
                    ),
                ));
            }
        };
        let class_dirs: Vec<PathBuf> =
            sorted_entries(root)?.into_iter().filter(|(_, is_dir)| *is_dir).map(|(p, _)| p).collect();
        if class_dirs.is_empty() {
            return Err(err(
                root,
                "holds no class folder: put each class's images in a sub-folder named after it".into(),
            ));
        }
        if class_dirs.len() > layout.classes {
            return Err(err(
                root,
                format!(
                    "holds {} class folders, more than the model's {} classes; set the model's `classes` to {}",
                    class_dirs.len(),
                    layout.classes,
                    class_dirs.len()
                ),
            ));
        }
        let mut files = Vec::new();
        let mut classes = Vec::new();
        for (c, dir) in class_dirs.iter().enumerate() {
            let images: Vec<PathBuf> =
                sorted_entries(dir)?.into_iter().filter(|(p, is_dir)| !is_dir && is_image(p)).map(|(p, _)| p).collect();
            let Some(first) = images.first() else {
                return Err(err(dir, "class folder holds no .jpg, .jpeg or .png image".into()));
            };
            header(first)?;
            classes.push(dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
            files.extend(images.into_iter().map(|p| (p, c as u32)));
        }
        Ok(ImageFolder { files, classes, out_h, out_w })
    }

    /// Class folder names, in class order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }
}

/// Width and height from an image's header, without decoding it.
fn header(path: &Path) -> Result<(usize, usize), DataError> {
    let bytes = std::fs::read(path)
        .map_err(|e| DataError { file: path.display().to_string(), reason: format!("cannot read: {e}") })?;
    let bad = |reason: String| DataError { file: path.display().to_string(), reason };
    if bytes.starts_with(b"\x89PNG") {
        let reader = png::Decoder::new(Cursor::new(&bytes[..]))
            .read_info()
            .map_err(|e| bad(format!("not a readable PNG: {e}")))?;
        let info = reader.info();
        Ok((info.width as usize, info.height as usize))
    } else {
        let mut d = zune_jpeg::JpegDecoder::new(zune_core::bytestream::ZCursor::new(&bytes[..]));
        d.decode_headers().map_err(|e| bad(format!("not a readable JPEG: {e:?}")))?;
        let info = d.info().ok_or_else(|| bad("not a readable JPEG: no frame header".into()))?;
        Ok((usize::from(info.width), usize::from(info.height)))
    }
}

/// Why an image file could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not a JPEG or PNG this decoder reads (the decoder's message).
    #[error("{0}")]
    Unreadable(String),
    /// An empty image, or one larger than [`MAX_SIDE`] a side.
    #[error("image of {width}x{height} pixels (at most {max} a side)", max = MAX_SIDE)]
    BadSize {
        /// Width in pixels.
        width: usize,
        /// Height in pixels.
        height: usize,
    },
}

/// Decode a JPEG or PNG (told apart by their signatures, not the file name) to 8-bit RGB.
pub fn decode(bytes: &[u8]) -> Result<Rgb, DecodeError> {
    let img = if bytes.starts_with(b"\x89PNG") { decode_png(bytes) } else { decode_jpeg(bytes) }
        .map_err(DecodeError::Unreadable)?;
    if img.width == 0 || img.height == 0 || img.width > MAX_SIDE || img.height > MAX_SIDE {
        return Err(DecodeError::BadSize { width: img.width, height: img.height });
    }
    Ok(img)
}

fn decode_jpeg(bytes: &[u8]) -> Result<Rgb, String> {
    use zune_core::colorspace::ColorSpace;
    let opts = zune_core::options::DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE);
    let mut d = zune_jpeg::JpegDecoder::new_with_options(zune_core::bytestream::ZCursor::new(bytes), opts);
    let pixels = d.decode().map_err(|e| format!("not a readable JPEG: {e:?}"))?;
    let info = d.info().ok_or("not a readable JPEG: no frame header")?;
    let (width, height) = (usize::from(info.width), usize::from(info.height));
    to_rgb(width, height, pixels)
}

fn decode_png(bytes: &[u8]) -> Result<Rgb, String> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(|e| format!("not a readable PNG: {e}"))?;
    let size = reader.output_buffer_size().ok_or("PNG too large")?;
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(|e| format!("not a readable PNG: {e}"))?;
    buf.truncate(info.buffer_size());
    let (width, height) = (info.width as usize, info.height as usize);
    to_rgb(width, height, buf)
}

/// Gray, gray + alpha, RGB or RGBA bytes (told apart by their count) as RGB.
fn to_rgb(width: usize, height: usize, pixels: Vec<u8>) -> Result<Rgb, String> {
    let n = width * height;
    let pixels = match pixels.len() {
        l if l == n * 3 => pixels,
        l if l == n => pixels.iter().flat_map(|&g| [g, g, g]).collect(),
        l if l == n * 2 => pixels.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0]]).collect(),
        l if l == n * 4 => pixels.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        l => return Err(format!("decoded to {l} bytes, not a multiple of its {width}x{height} pixels")),
    };
    Ok(Rgb { width, height, pixels })
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.files.len()
    }

    fn read(&self, index: usize, rng: &mut SeededRng, out: SampleOut<'_>) -> Result<(), DataError> {
        let (path, class) = &self.files[index];
        let bad = |reason: String| DataError { file: path.display().to_string(), reason };
        let InputOut::Dense(values) = out.input else { return Err(bad("images feed real-valued inputs".into())) };
        let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        let img = std::panic::catch_unwind(|| decode(&bytes))
            .unwrap_or_else(|_| Err(DecodeError::Unreadable("the decoder failed on this file".into())))
            .map_err(|e| bad(e.to_string()))?;
        let crop = transform::random_crop(img.width, img.height, rng);
        let flip = rng.uniform() < 0.5;
        transform::crop_resize_normalize(&img, crop, self.out_w, self.out_h, flip, values);
        out.labels[0] = i64::from(*class);
        Ok(())
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo {
            samples: self.len(),
            description: format!(
                "{} images in {} class folders, random-resized crops to {}x{}",
                self.len(),
                self.classes.len(),
                self.out_w,
                self.out_h
            ),
        }
    }
}
