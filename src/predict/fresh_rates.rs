//! What fresh memory costs, as a profile's fitted rates hold it ([`FreshPages`]): the allocator's threshold, the
//! seconds per fresh byte, and the step-like cycles that price what the host reclaims between steps
//! ([`super::fresh_pages`] counts a step's allocations and charges them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Memory taken afresh from the operating system on every call ([`super::terms::Term::FreshPages`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreshPages {
    /// Allocations up to this many bytes are served from memory the process kept.
    pub reused_up_to_bytes: f64,
    /// Seconds per byte a larger allocation costs beyond writing kept memory.
    pub seconds_per_byte: f64,
    /// Step-like cycles of fresh memory measured ([`super::terms::Term::ReclaimedPages`]); empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycled: Vec<CycledFreshPoint>,
}

impl FreshPages {
    /// Seconds one allocation of `bytes` costs beyond its bytes: nothing up to the threshold.
    pub fn seconds(&self, bytes: f64) -> f64 {
        if bytes > self.reused_up_to_bytes { bytes * self.seconds_per_byte } else { 0.0 }
    }

    /// Seconds per fresh byte beyond [`Self::seconds_per_byte`] of a step that takes `step_bytes` fresh every
    /// `step_s` seconds: the measured cycles' extra cost, linear in the period between a size's cycles (clamped
    /// to them), linear in bytes between sizes, from nothing at no bytes up to the smallest size (a step that
    /// leaves little memory free leaves little for the host to reclaim) and the largest size's beyond it.
    pub fn reclaimed_per_byte(&self, step_bytes: f64, step_s: f64) -> f64 {
        let mut sizes: Vec<f64> = self.cycled.iter().map(|c| c.bytes).filter(|b| *b > 0.0).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        let at_size = |size: f64| {
            let mut points: Vec<(f64, f64)> = self
                .cycled
                .iter()
                .filter(|c| c.bytes == size)
                .map(|c| (c.period_s, c.extra_seconds_per_byte))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            linear(&points, step_s)
        };
        let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) else { return 0.0 };
        if step_bytes.is_nan() || step_bytes <= 0.0 {
            return 0.0;
        }
        if step_bytes <= first {
            return at_size(first) * step_bytes / first;
        }
        let by_size: Vec<(f64, f64)> = sizes.iter().map(|&size| (size, at_size(size))).collect();
        linear(&by_size, step_bytes.min(last))
    }
}

/// `points` (x ascending, y) read at `x` by straight lines between them, clamped to the first and last.
fn linear(points: &[(f64, f64)], x: f64) -> f64 {
    let (Some(first), Some(last)) = (points.first(), points.last()) else { return 0.0 };
    if x <= first.0 {
        return first.1;
    }
    if x >= last.0 {
        return last.1;
    }
    points
        .windows(2)
        .find(|w| x <= w[1].0)
        .map(|w| {
            let span = w[1].0 - w[0].0;
            if span > 0.0 { w[0].1 + (w[1].1 - w[0].1) * (x - w[0].0) / span } else { w[1].1 }
        })
        .unwrap_or(last.1)
}

/// One measured cycle of fresh memory: its size, its period and the extra cost per byte of taking it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CycledFreshPoint {
    /// Bytes taken, held together and given back per cycle.
    #[schemars(range(min = 0.0))]
    pub bytes: f64,
    /// Seconds from one cycle's start to the next's.
    #[schemars(range(min = 0.0))]
    pub period_s: f64,
    /// Seconds per byte of taking them beyond `seconds_per_byte`'s.
    #[schemars(range(min = 0.0))]
    pub extra_seconds_per_byte: f64,
}
