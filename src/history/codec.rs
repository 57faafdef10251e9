//! The raw steady-state step times a point keeps: f32 little-endian, deflated, after a one-byte codec tag, so
//! every later statistic can be recomputed from the store alone (about 2 bytes a step for typical noise).

use std::cell::RefCell;

use miniz_oxide::deflate::core::{self as deflate, CompressorOxide, TDEFLFlush, TDEFLStatus};

/// Tag of the only codec: f32 little-endian values, raw deflate.
const F32_DEFLATE: u8 = 1;

/// Largest number of values a blob may hold when read back (a corrupt blob never allocates more).
const MAX_VALUES: usize = 1 << 24;

/// A blob could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The tag is not one this build knows.
    #[error("unknown step codec {0}")]
    UnknownCodec(u8),
    /// The deflated bytes are damaged.
    #[error("damaged step blob: {0}")]
    Damaged(String),
}

/// Deflate level of the blobs (miniz's default).
const LEVEL: u8 = 6;

thread_local! {
    /// Each thread's compressor, reset between blobs: making a new one allocates and zeroes about 300 KB of
    /// tables, which took a third of `history record`'s time.
    static COMPRESSOR: RefCell<Option<Box<CompressorOxide>>> = const { RefCell::new(None) };
}

/// Compress step times.
pub fn encode(steps: &[f64]) -> Vec<u8> {
    let raw: Vec<u8> = steps.iter().flat_map(|s| (*s as f32).to_le_bytes()).collect();
    let mut out = Vec::with_capacity(raw.len() + 8);
    out.push(F32_DEFLATE);
    let done = COMPRESSOR.with_borrow_mut(|slot| {
        let compressor = slot.get_or_insert_with(|| {
            Box::new(CompressorOxide::new(deflate::create_comp_flags_from_zip_params(LEVEL.into(), 0, 0)))
        });
        compressor.reset();
        let (status, _) = deflate::compress_to_output(compressor, &raw, TDEFLFlush::Finish, |chunk| {
            out.extend_from_slice(chunk);
            true
        });
        status == TDEFLStatus::Done
    });
    if !done {
        out.truncate(1);
        out.extend(miniz_oxide::deflate::compress_to_vec(&raw, LEVEL));
    }
    out
}

/// Read step times back.
pub fn decode(blob: &[u8]) -> Result<Vec<f64>, CodecError> {
    let Some((&tag, body)) = blob.split_first() else { return Ok(Vec::new()) };
    if tag != F32_DEFLATE {
        return Err(CodecError::UnknownCodec(tag));
    }
    let raw = miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_VALUES * 4)
        .map_err(|e| CodecError::Damaged(format!("{:?}", e.status)))?;
    if raw.len() % 4 != 0 {
        return Err(CodecError::Damaged(format!("{} bytes is not a whole number of values", raw.len())));
    }
    Ok(raw.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_at_f32_precision_and_damage_is_an_error() {
        let steps: Vec<f64> = (0..500).map(|i| 0.02 + 1e-5 * f64::from(i % 17)).collect();
        let blob = encode(&steps);
        assert!(blob.len() < steps.len() * 4);
        let back = decode(&blob).unwrap();
        assert_eq!(back.len(), steps.len());
        assert!(back.iter().zip(&steps).all(|(a, b)| ((a - b) / b).abs() < 1e-6));
        assert_eq!(decode(&[]).unwrap(), Vec::<f64>::new());
        assert_eq!(decode(&[9, 1, 2]), Err(CodecError::UnknownCodec(9)));
        assert!(decode(&[1, 0xff, 0xfe, 0x00]).is_err());
    }

    #[test]
    fn a_reused_compressor_writes_the_bytes_a_fresh_one_does() {
        for n in [0_usize, 1, 7, 200, 5000] {
            let steps: Vec<f64> = (0..n).map(|i| 0.01 + 1e-4 * ((i * 7919) % 101) as f64).collect();
            let raw: Vec<u8> = steps.iter().flat_map(|s| (*s as f32).to_le_bytes()).collect();
            let mut fresh = vec![F32_DEFLATE];
            fresh.extend(miniz_oxide::deflate::compress_to_vec(&raw, LEVEL));
            assert_eq!(encode(&steps), fresh, "{n} steps");
            assert_eq!(encode(&steps), fresh, "{n} steps, again");
        }
    }
}
