//! Named tolerance presets for comparing two backends' losses: an element agrees when
//! `|a - b| <= atol + rtol * |b|`.

use std::fmt;

use crate::device::DeviceSelector;
use crate::plan::RunPlan;
use trainbench_graph::OptimizerSpec;

/// The agreement run every backend trains the fixtures with: batch, seed, SGD steps and the data pool size
/// (iteration `i` uses synthetic data step `i % pool`, as every backend's pool of 4 batches does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgreementRun {
    /// Batch size.
    pub batch: usize,
    /// Seed of weights and data.
    pub seed: u64,
    /// Iterations: the loss at step 0 and after each of `steps - 1` SGD updates.
    pub steps: u64,
    /// Data pool size.
    pub pool: u64,
    /// SGD learning rate.
    pub lr: f64,
    /// SGD momentum.
    pub momentum: f64,
}

impl AgreementRun {
    /// The optimizer of the run.
    pub fn optimizer(&self) -> OptimizerSpec {
        OptimizerSpec::Sgd { lr: self.lr, momentum: self.momentum, weight_decay: 0.0, nesterov: false }
    }

    /// The run plan of model `name` on `device`: fp32, one device, no warm-up, `steps` measured iterations.
    pub fn plan(&self, name: &str, device: DeviceSelector) -> RunPlan {
        RunPlan {
            batch_size: self.batch,
            device,
            warmup: 0,
            seed: self.seed,
            optimizer: self.optimizer(),
            phase_timing: false,
            ..RunPlan::for_tests(&format!("agreement.{name}"), self.steps)
        }
    }
}

/// Batch 8, seed 7, 6 iterations (step 0 and 5 SGD steps), lr 0.05 with momentum 0.9.
pub const AGREEMENT_RUN: AgreementRun = AgreementRun { batch: 8, seed: 7, steps: 6, pool: 4, lr: 0.05, momentum: 0.9 };

/// How close two fp32 training runs must stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Same arithmetic up to reduction order: `rtol = 1e-5`, `atol = 1e-6`.
    Strict,
    /// Different kernels (GEMM tiling, fused reductions) over a few optimizer steps: `rtol = 1e-3`, `atol = 1e-4`.
    Balanced,
    /// Different algorithms (e.g. a recurrence written out versus a fused cell) over many steps:
    /// `rtol = 1e-2`, `atol = 1e-3`.
    Permissive,
}

impl Preset {
    /// `(rtol, atol)` of the preset.
    pub fn tolerances(self) -> (f64, f64) {
        match self {
            Preset::Strict => (1e-5, 1e-6),
            Preset::Balanced => (1e-3, 1e-4),
            Preset::Permissive => (1e-2, 1e-3),
        }
    }

    /// The preset's name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Strict => "strict",
            Preset::Balanced => "balanced",
            Preset::Permissive => "permissive",
        }
    }
}

/// The preset two fp32 runs of the agreement fixtures must meet when one runs on a device of `kind`
/// ([`crate::DeviceInfo::kind`]): [`Preset::Strict`] on a CPU or software adapter (measured here:
/// lavapipe against PyTorch's CPU kernels within 5e-7 relative over 6 steps), [`Preset::Balanced`] on a GPU,
/// whose reduction orders differ more.
pub fn preset_for(kind: &str) -> Preset {
    match kind {
        "cpu" | "software" => Preset::Strict,
        _ => Preset::Balanced,
    }
}

/// Where two loss curves first disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    /// Step index (or `None` when the lengths differ).
    pub step: Option<usize>,
    /// Value of the run under test.
    pub got: f64,
    /// Reference value.
    pub want: f64,
    /// Preset that was applied.
    pub preset: Preset,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rtol, atol) = self.preset.tolerances();
        match self.step {
            Some(s) => write!(
                f,
                "step {s}: {} vs reference {} (|diff| = {:.3e} > {atol:e} + {rtol:e} * |ref|, preset {})",
                self.got,
                self.want,
                (self.got - self.want).abs(),
                self.preset.name()
            ),
            None => write!(f, "{} values vs {} reference values", self.got, self.want),
        }
    }
}

/// Largest `|a - b| / max(|b|, tiny)` over the two curves (for reporting).
pub fn max_relative_error(got: &[f64], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(a, b)| (a - b).abs() / b.abs().max(1e-12)).fold(0.0, f64::max)
}

/// Largest `|a - b|` over the two curves (for reporting).
pub fn max_absolute_error(got: &[f64], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
}

/// Check that `got` agrees with `want` step by step under `preset`.
pub fn compare(got: &[f64], want: &[f64], preset: Preset) -> Result<(), Disagreement> {
    if got.len() != want.len() {
        return Err(Disagreement { step: None, got: got.len() as f64, want: want.len() as f64, preset });
    }
    let (rtol, atol) = preset.tolerances();
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let within = (a - b).abs() <= atol + rtol * b.abs();
        if !within {
            return Err(Disagreement { step: Some(i), got: a, want: b, preset });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_order_and_nan() {
        let want = [2.0, 1.0];
        assert!(compare(&[2.000_001, 1.0], &want, Preset::Strict).is_ok());
        assert!(compare(&[2.001, 1.0], &want, Preset::Strict).is_err());
        assert!(compare(&[2.001, 1.0], &want, Preset::Balanced).is_ok());
        assert!(compare(&[2.01, 1.0], &want, Preset::Balanced).is_err());
        assert!(compare(&[2.01, 1.0], &want, Preset::Permissive).is_ok());
        assert!(compare(&[f64::NAN, 1.0], &want, Preset::Permissive).is_err());
        let e = compare(&[2.0], &want, Preset::Strict).expect_err("must fail");
        assert_eq!(e.step, None);
    }
}
