//! Which product classes the run's numerics move to a tensor rate, at which peak, and what the other classes and
//! a device without the rate keep.

use trainbench_contract::{Numerics, Tf32};
use trainbench_graph::Precision;
use trainbench_graph::graph::Op;

use super::*;
use crate::hardware::ProfileValidator;
use crate::predict::rates::KernelClass;

fn profile(name: &str) -> HardwareFile {
    ProfileValidator::new().unwrap().resolve(name).unwrap().file
}

fn linear() -> Op {
    Op::Linear { in_features: 64, out_features: 64, bias: false }
}

fn matmul() -> Op {
    Op::MatMul { transpose_b: false }
}

/// A device's datasheet coefficients at `precision` (a GEMM curve for bf16: half the peak below 1 GFLOP, 80%
/// above).
fn coefficients(p: &HardwareFile, precision: Precision) -> Coefficients {
    let peak = p.device.peak_tflops.of(precision).unwrap() * 1e12;
    let mut c = Coefficients::datasheet(peak, p.device.memory_bandwidth_gbs * 1e9, false);
    if precision == Precision::Bf16 {
        c.gemm = vec![(1e9, 0.5 * peak), (1e11, 0.8 * peak)];
    }
    c
}

/// The GEMM rate of `c` at `flops`, FLOP/s.
fn rate(c: &Coefficients, flops: f64) -> f64 {
    flops / c.compute_s(KernelClass::Gemm, flops)
}

fn rates(p: &HardwareFile, precision: Precision, numerics: Numerics) -> Result<ProductRates, PredictError> {
    let bf16 = p.device.peak_tflops.bf16.map(|_| coefficients(p, Precision::Bf16));
    ProductRates::new(p, precision, &numerics, &coefficients(p, precision), bf16.as_ref())
}

#[test]
fn classes_follow_the_switch_that_moves_them() {
    assert_eq!(ProductClass::of(&linear()), ProductClass::Linear);
    assert_eq!(ProductClass::of(&matmul()), ProductClass::Matmul);
    assert_eq!(ProductClass::of(&Op::Softmax), ProductClass::Other);
    assert_eq!(ProductClass::of(&Op::Add), ProductClass::Other);
}

#[test]
fn tf32_moves_matmuls_by_its_matmul_switch_only() {
    let h100 = profile("h100");
    let base = coefficients(&h100, Precision::Fp32);
    let tf32 = h100.device.peak_tflops.tf32.unwrap() * 1e12;
    // PyTorch's default (cuDNN on, matmul off): linear layers and matmuls keep the fp32 rate.
    let default = rates(&h100, Precision::Fp32, Numerics::default()).unwrap();
    assert_eq!(default.for_op(&linear(), &base).peak_flop_s, base.peak_flop_s);
    assert_eq!(default.for_op(&matmul(), &base).peak_flop_s, base.peak_flop_s);
    assert!(default.any(), "cuDNN's switch is on by default");
    let on = Numerics { tf32: Tf32 { matmul: true, cudnn: false }, ..Numerics::default() };
    let on = rates(&h100, Precision::Fp32, on).unwrap();
    for op in [linear(), matmul()] {
        let c = on.for_op(&op, &base);
        assert_eq!(c.peak_flop_s, tf32);
        // The bf16 curve scaled to the TF32 peak: the same share of it at each size.
        let share = rate(c, 1e9) / tf32;
        assert!((share - 0.5).abs() < 1e-12, "{share}");
        // Everything but the products stays the precision's.
        assert_eq!(c.memory_bytes_s, base.memory_bytes_s);
    }
    assert_eq!(on.for_op(&Op::Softmax, &base).peak_flop_s, base.peak_flop_s);
    // Both off: nothing moves.
    let off = rates(&h100, Precision::Fp32, Numerics { tf32: Tf32::OFF, ..Numerics::default() }).unwrap();
    assert!(!off.any());
}

#[test]
fn tf32_needs_fp32_a_gpu_and_a_tf32_peak() {
    let both = Numerics { tf32: Tf32 { matmul: true, cudnn: true }, ..Numerics::default() };
    // A bf16 run's products are at bf16 whatever the switches say.
    assert!(!rates(&profile("h100"), Precision::Bf16, both).unwrap().any());
    // No TF32 before Ampere: the V100 profile gives no tf32 peak.
    assert!(!rates(&profile("v100"), Precision::Fp32, both).unwrap().any());
    assert_eq!(mfu_peak(&profile("v100"), Precision::Fp32, &both), Some((15.7, "fp32")));
}

#[test]
fn float8_moves_linear_layers_only_and_needs_an_fp8_peak() {
    let h100 = profile("h100");
    let base = coefficients(&h100, Precision::Bf16);
    let fp8 = h100.device.peak_tflops.fp8.unwrap() * 1e12;
    let on = Numerics { float8: true, ..Numerics::default() };
    let r = rates(&h100, Precision::Bf16, on).unwrap();
    let c = r.for_op(&linear(), &base);
    assert_eq!(c.peak_flop_s, fp8);
    assert!(rate(c, 1e12) > rate(&base, 1e12));
    assert_eq!(r.for_op(&matmul(), &base).peak_flop_s, base.peak_flop_s, "attention's products stay bf16");
    // Its MFU stays over the bf16 peak (the run's precision).
    assert_eq!(mfu_peak(&h100, Precision::Bf16, &on).unwrap().1, "bf16");
    // The A100 has no FP8: refused, naming the field and the profile.
    let e = rates(&profile("a100"), Precision::Bf16, on).unwrap_err();
    assert_eq!(e, PredictError::NoFp8 { profile: "a100".into() });
    assert!(e.to_string().contains("training.float8") && e.to_string().contains("peak_tflops.fp8"), "{e}");
    // Beside another precision (a what-if row's) it changes nothing.
    assert!(!rates(&profile("a100"), Precision::Fp16, on).unwrap().any());
}

#[test]
fn the_mfu_of_an_fp32_run_with_tf32_is_over_the_tf32_peak() {
    let a100 = profile("a100");
    assert_eq!(mfu_peak(&a100, Precision::Fp32, &Numerics::default()), Some((156.0, "tf32")));
    let off = Numerics { tf32: Tf32::OFF, ..Numerics::default() };
    assert_eq!(mfu_peak(&a100, Precision::Fp32, &off), Some((19.5, "fp32")));
    assert_eq!(mfu_peak(&a100, Precision::Bf16, &Numerics::default()), Some((312.0, "bf16")));
}

#[test]
fn without_a_reference_a_tensor_rate_is_its_peak() {
    let h100 = profile("h100");
    let mut base = coefficients(&h100, Precision::Fp32);
    base.gemm = vec![(1e9, 1e12)];
    let c = tensor_rate(&base, None, 5e14);
    assert!(c.gemm.is_empty() && c.grid.is_none());
    assert_eq!(rate(&c, 1e9), 5e14);
}
