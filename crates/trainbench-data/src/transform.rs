//! The ImageNet training transform on a decoded RGB image: a random-resized crop (area 8% to 100% of the
//! image, aspect ratio 3/4 to 4/3, as torchvision's `RandomResizedCrop`), resampled to the model's size with an
//! antialiased bilinear (triangle) filter, flipped left-right with probability 1/2, and normalised with the
//! ImageNet channel means and deviations into a channel-first `f32` tensor.

use trainbench_graph::init::SeededRng;

/// ImageNet channel means (RGB, pixels in `[0, 1]`).
pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet channel standard deviations.
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];
/// Crop area range, as a fraction of the image.
pub const SCALE: (f32, f32) = (0.08, 1.0);
/// Crop aspect-ratio range (width / height).
pub const RATIO: (f32, f32) = (3.0 / 4.0, 4.0 / 3.0);

/// A decoded image: `width * height` RGB pixels, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width * height * 3` bytes.
    pub pixels: Vec<u8>,
}

/// A crop rectangle: left, top, width, height, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crop {
    /// Left column.
    pub x: usize,
    /// Top row.
    pub y: usize,
    /// Width.
    pub w: usize,
    /// Height.
    pub h: usize,
}

/// Draw a random-resized crop of a `width x height` image: up to 10 tries of a random area and log-uniform
/// aspect ratio that fits, else the largest centred crop within the ratio range (torchvision's algorithm).
pub fn random_crop(width: usize, height: usize, rng: &mut SeededRng) -> Crop {
    let area = (width * height) as f32;
    let (lo, hi) = (RATIO.0.ln(), RATIO.1.ln());
    for _ in 0..10 {
        let target = area * (SCALE.0 + rng.uniform() * (SCALE.1 - SCALE.0));
        let ratio = (lo + rng.uniform() * (hi - lo)).exp();
        let w = (target * ratio).sqrt().round() as usize;
        let h = (target / ratio).sqrt().round() as usize;
        if w > 0 && h > 0 && w <= width && h <= height {
            let x = (rng.next_u64() % (width - w + 1) as u64) as usize;
            let y = (rng.next_u64() % (height - h + 1) as u64) as usize;
            return Crop { x, y, w, h };
        }
    }
    let in_ratio = width as f32 / height as f32;
    let (w, h) = if in_ratio < RATIO.0 {
        (width, ((width as f32 / RATIO.0).round() as usize).clamp(1, height))
    } else if in_ratio > RATIO.1 {
        (((height as f32 * RATIO.1).round() as usize).clamp(1, width), height)
    } else {
        (width, height)
    };
    Crop { x: (width - w) / 2, y: (height - h) / 2, w, h }
}

/// Filter taps of one output coordinate: the first input index and its weights (summing to 1).
struct Taps {
    first: usize,
    weights: Vec<f32>,
}

/// Taps of a triangle filter resampling `[start, start + len)` of an axis of `size` pixels to `out` pixels,
/// widened by the downscale factor (antialiasing), clamped to the image.
fn taps(start: usize, len: usize, size: usize, out: usize) -> Vec<Taps> {
    let scale = len as f32 / out as f32;
    let support = scale.max(1.0);
    (0..out)
        .map(|o| {
            let center = start as f32 + (o as f32 + 0.5) * scale;
            let lo = ((center - support).floor().max(0.0) as usize).min(size - 1);
            let hi = ((center + support).ceil() as usize).clamp(lo + 1, size);
            let mut weights: Vec<f32> =
                (lo..hi).map(|k| (1.0 - ((k as f32 + 0.5 - center) / support).abs()).max(0.0)).collect();
            let sum: f32 = weights.iter().sum();
            if sum > 0.0 {
                weights.iter_mut().for_each(|w| *w /= sum);
            } else {
                weights = vec![1.0 / (hi - lo) as f32; hi - lo];
            }
            Taps { first: lo, weights }
        })
        .collect()
}

/// Resample `crop` of `img` to `out_w x out_h`, mirrored left-right when `flip`, normalised with [`MEAN`] and
/// [`STD`], into `out` (channel-first, `3 * out_h * out_w` values).
pub fn crop_resize_normalize(img: &Rgb, crop: Crop, out_w: usize, out_h: usize, flip: bool, out: &mut [f32]) {
    let xs = taps(crop.x, crop.w, img.width, out_w);
    let ys = taps(crop.y, crop.h, img.height, out_h);
    let row_lo = ys.iter().map(|t| t.first).min().unwrap_or(0);
    let row_hi = ys.iter().map(|t| t.first + t.weights.len()).max().unwrap_or(0);
    // Horizontal pass over the rows the vertical pass reads: `rows x out_w x 3`.
    let mut tmp = vec![0f32; (row_hi - row_lo) * out_w * 3];
    for (r, row) in (row_lo..row_hi).enumerate() {
        let src = &img.pixels[row * img.width * 3..(row + 1) * img.width * 3];
        let dst = &mut tmp[r * out_w * 3..(r + 1) * out_w * 3];
        for (ox, t) in xs.iter().enumerate() {
            let mut acc = [0f32; 3];
            for (k, w) in t.weights.iter().enumerate() {
                let p = &src[(t.first + k) * 3..(t.first + k) * 3 + 3];
                acc[0] += w * f32::from(p[0]);
                acc[1] += w * f32::from(p[1]);
                acc[2] += w * f32::from(p[2]);
            }
            dst[ox * 3..ox * 3 + 3].copy_from_slice(&acc);
        }
    }
    let plane = out_w * out_h;
    let scale: [f32; 3] = std::array::from_fn(|c| 1.0 / (255.0 * STD[c]));
    let shift: [f32; 3] = std::array::from_fn(|c| MEAN[c] / STD[c]);
    for (oy, t) in ys.iter().enumerate() {
        for ox in 0..out_w {
            let mut acc = [0f32; 3];
            for (k, w) in t.weights.iter().enumerate() {
                let at = ((t.first - row_lo + k) * out_w + ox) * 3;
                acc[0] += w * tmp[at];
                acc[1] += w * tmp[at + 1];
                acc[2] += w * tmp[at + 2];
            }
            let dx = if flip { out_w - 1 - ox } else { ox };
            for c in 0..3 {
                out[c * plane + oy * out_w + dx] = acc[c] * scale[c] - shift[c];
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn gradient(w: usize, h: usize) -> Rgb {
        let pixels =
            (0..h).flat_map(|y| (0..w).flat_map(move |x| [(x * 255 / (w - 1)) as u8, (y % 256) as u8, 128])).collect();
        Rgb { width: w, height: h, pixels }
    }

    #[test]
    fn crops_stay_inside_the_image_and_within_the_ranges() {
        let mut rng = SeededRng::new(1, "crop");
        for (w, h) in [(500, 375), (40, 300), (300, 40), (1, 1), (224, 224)] {
            for _ in 0..200 {
                let c = random_crop(w, h, &mut rng);
                assert!(c.w >= 1 && c.h >= 1 && c.x + c.w <= w && c.y + c.h <= h, "{c:?} of {w}x{h}");
            }
        }
        let c = random_crop(1000, 10, &mut SeededRng::new(0, "wide"));
        assert_eq!((c.w, c.h), (13, 10), "the fallback keeps the largest ratio: 4/3 x 10");
    }

    #[test]
    fn an_identity_resize_returns_the_normalised_pixels_and_a_flip_mirrors_them() {
        let img = gradient(8, 6);
        let mut out = vec![0f32; 3 * 8 * 6];
        crop_resize_normalize(&img, Crop { x: 0, y: 0, w: 8, h: 6 }, 8, 6, false, &mut out);
        let expect =
            |x: usize, y: usize, c: usize| (f32::from(img.pixels[(y * 8 + x) * 3 + c]) / 255.0 - MEAN[c]) / STD[c];
        for (x, y, c) in [(0, 0, 0), (7, 0, 0), (3, 5, 1), (5, 2, 2)] {
            assert!((out[c * 48 + y * 8 + x] - expect(x, y, c)).abs() < 1e-5, "({x}, {y}, {c})");
        }
        let mut flipped = vec![0f32; 3 * 8 * 6];
        crop_resize_normalize(&img, Crop { x: 0, y: 0, w: 8, h: 6 }, 8, 6, true, &mut flipped);
        assert_eq!(flipped[2 * 8 + 7], out[2 * 8]);
    }

    #[test]
    fn downscaling_averages_and_a_constant_image_stays_constant() {
        let img = Rgb { width: 9, height: 9, pixels: vec![200; 9 * 9 * 3] };
        let mut out = vec![0f32; 3 * 3 * 3];
        crop_resize_normalize(&img, Crop { x: 0, y: 0, w: 9, h: 9 }, 3, 3, false, &mut out);
        let v = (200.0 / 255.0 - MEAN[0]) / STD[0];
        assert!(out[..9].iter().all(|o| (o - v).abs() < 1e-5));
        let img = gradient(300, 3);
        let mut out = vec![0f32; 3 * 3 * 3];
        crop_resize_normalize(&img, Crop { x: 0, y: 0, w: 300, h: 3 }, 3, 3, false, &mut out);
        let px = |o: f32| (o * STD[0] + MEAN[0]) * 255.0;
        assert!((px(out[1]) - 127.5).abs() < 1.0, "the middle third averages to mid-grey: {}", px(out[1]));
    }
}
