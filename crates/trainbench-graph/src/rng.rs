//! The project's one seedable pseudo-random generator ([`SplitMix64`]): weight initialisation, synthetic data,
//! the step log's reservoir and bootstrap resampling all draw from it, so a seed means the same everywhere.

use serde::{Deserialize, Serialize};

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fast, seedable generator, used for the reservoir here and for
/// bootstrap resampling in the statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Skip the next `draws` outputs at once: SplitMix64's state moves by a constant per draw, so the generator
    /// after `skip(k)` gives what it would have given after `k` calls of [`SplitMix64::next_u64`].
    pub fn skip(&mut self, draws: u64) {
        self.0 = self.0.wrapping_add(draws.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    /// Uniform index in `0..n` (multiply-shift; the bias is below 2^-32 for the sample sizes used here).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
    /// Uniform integer in `0..n` for any `n` (multiply-shift on 128 bits).
    pub fn below_u64(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform float in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn skipping_draws_lands_where_drawing_them_does() {
        let (mut drawn, mut skipped) = (SplitMix64::new(42), SplitMix64::new(42));
        for _ in 0..1000 {
            drawn.next_u64();
        }
        skipped.skip(1000);
        assert_eq!(drawn, skipped);
        assert_eq!(drawn.next_u64(), skipped.next_u64());
    }
}
