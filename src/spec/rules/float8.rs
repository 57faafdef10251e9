//! The rule of `training.float8`: FP8 products replace a bf16 run's linear products (TorchTitan's Float8
//! training keeps bf16 around them), so every run of a spec that asks for them must be bf16.

use trainbench_graph::Precision;

use super::finding::Finding;
use super::topology::effective_precisions;
use crate::spec::path::FieldPath;
use crate::spec::wire::{SweepSpec, TrainingSpec};

/// `training.float8 = true` is refused for a spec with a run at a precision other than bf16 (the swept
/// precisions where there are some, else `training.precision`), naming the first such precision.
pub(super) fn check_float8(out: &mut Vec<Finding>, training: &TrainingSpec, sweep: Option<&SweepSpec>) {
    if training.float8 != Some(true) {
        return;
    }
    let precisions = match sweep {
        Some(sweep) => effective_precisions(training, sweep),
        None => vec![(training.precision, FieldPath::keys(&["training", "precision"]))],
    };
    if let Some((precision, at)) = precisions.into_iter().find(|(p, _)| *p != Precision::Bf16) {
        out.push(
            Finding::new(
                FieldPath::keys(&["training", "float8"]),
                format!(
                    "`training.float8 = true` needs bf16 runs (FP8 replaces a bf16 run's linear products); this \
                     spec has a `{}` run",
                    precision.as_str()
                ),
            )
            .or_at(at)
            .expected("`training.precision = \"bf16\"` (and only bf16 in `sweep.precisions`) with `float8 = true`")
            .hint("set `training.precision = \"bf16\"`, or remove `training.float8`"),
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn findings(precision: Precision, float8: Option<bool>, swept: &[Precision]) -> Vec<Finding> {
        let training = TrainingSpec { precision, float8, ..TrainingSpec::default() };
        let sweep = SweepSpec { precisions: swept.to_vec(), ..SweepSpec::default() };
        let mut out = Vec::new();
        check_float8(&mut out, &training, Some(&sweep));
        out
    }

    #[test]
    fn float8_needs_every_run_at_bf16() {
        assert!(findings(Precision::Bf16, Some(true), &[]).is_empty());
        assert!(findings(Precision::Fp32, Some(false), &[]).is_empty());
        assert!(findings(Precision::Fp32, None, &[]).is_empty());
        let refused = findings(Precision::Fp32, Some(true), &[]);
        assert_eq!(refused.len(), 1);
        assert!(refused[0].message.contains("training.float8") && refused[0].message.contains("`fp32`"));
        assert!(refused[0].hint.as_deref().unwrap().contains("bf16"));
        // A sweep with one fp16 run is refused even when `training.precision` says bf16.
        let swept = findings(Precision::Bf16, Some(true), &[Precision::Bf16, Precision::Fp16]);
        assert!(swept.len() == 1 && swept[0].message.contains("`fp16`"));
    }
}
