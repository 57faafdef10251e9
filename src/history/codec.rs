//! The raw steady-state step times a point keeps: f32 little-endian, deflated, after a one-byte codec tag, so
//! every later statistic can be recomputed from the store alone (about 2 bytes a step for typical noise).

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

/// Compress step times.
pub fn encode(steps: &[f64]) -> Vec<u8> {
    let raw: Vec<u8> = steps.iter().flat_map(|s| (*s as f32).to_le_bytes()).collect();
    let mut out = vec![F32_DEFLATE];
    out.extend(miniz_oxide::deflate::compress_to_vec(&raw, 6));
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
}
