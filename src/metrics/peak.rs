//! Device peak FLOP/s, the denominator of FLOP utilisation: a table of NVIDIA datasheet peaks keyed by product
//! name, and a measured fp32 GEMM rate for CPUs when the backend reports none.
//!
//! Precedence (see [`peak_for`]): for fp16/bf16 on a GPU in the table, the table's dense tensor-core peak; for
//! fp32 with either TF32 switch on (CUDA: libtorch's default leaves cuDNN's on), the table's dense TF32
//! tensor-core peak; for fp32 otherwise, the backend's `DeviceInfo::peak_flops_fp32` when it reports one (the
//! tch backend measures libtorch's own GEMM on the CPU), else the table, else, on a CPU, [`measure_cpu_fp32`].
//! A table peak is scaled by the device's multiprocessors over the product's when the device has fewer (a MIG
//! instance: `3g.40gb` of an H100 has 60 of 132).

use std::sync::OnceLock;
use std::time::Instant;

use trainbench_contract::{DeviceInfo, Tf32};
use trainbench_graph::Precision;

/// Datasheet peaks of one GPU model, FLOP/s, dense (no structured sparsity), at boost clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuPeak {
    /// Product as matched.
    pub product: &'static str,
    /// fp32 (non-tensor) peak.
    pub fp32: f64,
    /// fp16 tensor-core peak with fp32 accumulation.
    pub fp16: f64,
    /// bf16 tensor-core peak with fp32 accumulation; `None` where bf16 is unsupported.
    pub bf16: Option<f64>,
    /// TF32 tensor-core peak (dense); `None` before Ampere (no TF32).
    pub tf32: Option<f64>,
    /// Streaming multiprocessors of the full product.
    pub sms: u32,
}

const T: f64 = 1e12;

/// Name patterns (all must occur, case-insensitively) and the peaks they select; most specific first.
const TABLE: &[(&[&str], GpuPeak)] = &[
    (&["h200", "nvl"], gpu("H200 NVL", 60.0, 835.0, Some(835.0), Some(417.5), 132)),
    (&["h200"], gpu("H200 SXM", 67.0, 989.4, Some(989.4), Some(494.7), 132)),
    (&["gh200"], gpu("GH200", 67.0, 989.4, Some(989.4), Some(494.7), 132)),
    (&["h100", "pcie"], gpu("H100 PCIe", 51.0, 756.0, Some(756.0), Some(378.0), 114)),
    (&["h100", "nvl"], gpu("H100 NVL", 60.0, 835.0, Some(835.0), Some(417.5), 132)),
    (&["h100"], gpu("H100 SXM", 67.0, 989.4, Some(989.4), Some(494.7), 132)),
    (&["a100"], gpu("A100", 19.5, 312.0, Some(312.0), Some(156.0), 108)),
    (&["a10"], gpu("A10", 31.2, 125.0, Some(125.0), Some(62.5), 72)),
    (&["l40s"], gpu("L40S", 91.6, 362.05, Some(362.05), Some(183.0), 142)),
    (&["l4"], gpu("L4", 30.3, 121.0, Some(121.0), Some(60.0), 58)),
    (&["v100", "pcie"], gpu("V100 PCIe", 14.0, 112.0, None, None, 80)),
    (&["v100"], gpu("V100 SXM2", 15.7, 125.0, None, None, 80)),
    (&["t4"], gpu("T4", 8.1, 65.0, None, None, 40)),
    (&["rtx", "4090"], gpu("GeForce RTX 4090", 82.6, 165.2, Some(165.2), Some(82.6), 128)),
    (&["rtx", "3090"], gpu("GeForce RTX 3090", 35.6, 71.0, Some(71.0), Some(35.6), 82)),
    (&["rtx", "a6000"], gpu("RTX A6000", 38.7, 154.8, Some(154.8), Some(77.4), 84)),
];

/// A table row in TFLOP/s.
const fn gpu(product: &'static str, fp32: f64, fp16: f64, bf16: Option<f64>, tf32: Option<f64>, sms: u32) -> GpuPeak {
    GpuPeak { product, fp32: fp32 * T, fp16: fp16 * T, bf16: tera(bf16), tf32: tera(tf32), sms }
}

/// TFLOP/s to FLOP/s, where known.
const fn tera(x: Option<f64>) -> Option<f64> {
    match x {
        Some(v) => Some(v * T),
        None => None,
    }
}

fn contains_word(name: &str, pat: &str) -> bool {
    // A pattern must not be the prefix of a longer model number: "a10" must not match "a100", "l4" not "l40s".
    name.match_indices(pat).any(|(i, _)| {
        let next = name[i + pat.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// Look a GPU up by product name (as NVML or the CUDA runtime reports it, e.g. `NVIDIA H100 80GB HBM3`).
pub fn gpu_peak(name: &str) -> Option<GpuPeak> {
    let lower = name.to_ascii_lowercase();
    TABLE.iter().find(|(pats, _)| pats.iter().all(|p| contains_word(&lower, p))).map(|(_, peak)| *peak)
}

/// The arithmetic a peak figure is the rate of: dense tensor-core fp16 or bf16, dense TF32, or plain fp32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeakPrecision {
    /// Plain fp32 (no tensor cores), or a CPU's fp32 GEMM rate.
    Fp32,
    /// TF32 tensor cores (dense).
    Tf32,
    /// fp16 tensor cores with fp32 accumulation (dense).
    Fp16,
    /// bf16 tensor cores with fp32 accumulation (dense).
    Bf16,
}

impl PeakPrecision {
    /// Name as results record it (`fp32`, `tf32`, `fp16`, `bf16`).
    pub fn as_str(self) -> &'static str {
        match self {
            PeakPrecision::Fp32 => "fp32",
            PeakPrecision::Tf32 => "tf32",
            PeakPrecision::Fp16 => "fp16",
            PeakPrecision::Bf16 => "bf16",
        }
    }
    /// Whether a run at `precision` computes in this arithmetic, so that this peak may be its MFU
    /// denominator: fp16 and bf16 runs only at their own tensor peaks, fp32 runs at fp32 or (with TF32 on)
    /// TF32. An fp32 figure beside a bf16 run is a stand-in, not its peak.
    pub fn serves(self, precision: Precision) -> bool {
        matches!(
            (precision, self),
            (Precision::Fp16, PeakPrecision::Fp16)
                | (Precision::Bf16, PeakPrecision::Bf16)
                | (Precision::Fp32, PeakPrecision::Fp32 | PeakPrecision::Tf32)
        )
    }
}

/// A peak figure, the arithmetic it is the rate of, and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// FLOP/s.
    pub flop_per_s: f64,
    /// The arithmetic the figure is the rate of.
    pub precision: PeakPrecision,
    /// Provenance, e.g. `table: H100 SXM bf16 tensor (dense)`.
    pub source: String,
}

/// The share of a product's multiprocessors the device has, when fewer (a MIG instance), from the backend's
/// `multiprocessors` detail: `(device SMs, product SMs)`.
fn sm_share(device: &DeviceInfo, table: &GpuPeak) -> Option<(u32, u32)> {
    let sms: u32 = device.details.get("multiprocessors")?.parse().ok()?;
    (sms > 0 && sms < table.sms).then_some((sms, table.sms))
}

/// The peak FLOP/s to compare a run on `device` at `precision` against, with the TF32 switches the run used
/// (`None` where TF32 does not exist); `None` when unknown.
pub fn peak_for(device: &DeviceInfo, precision: Precision, tf32: Option<Tf32>) -> Option<Peak> {
    let is_cpu = device.kind == "cpu";
    let table = if is_cpu { None } else { gpu_peak(&device.name) };
    if let Some(t) = table {
        let scaled = |p: Peak| match sm_share(device, &t) {
            Some((have, full)) => Peak {
                flop_per_s: p.flop_per_s * f64::from(have) / f64::from(full),
                source: format!("{} x {have}/{full} SMs (MIG instance)", p.source),
                ..p
            },
            None => p,
        };
        let tf32_on = tf32.filter(|s| s.any());
        let tensor = match precision {
            Precision::Fp16 => Some((t.fp16, PeakPrecision::Fp16, "fp16 tensor (dense)".to_string())),
            Precision::Bf16 => t.bf16.map(|p| (p, PeakPrecision::Bf16, "bf16 tensor (dense)".to_string())),
            Precision::Fp32 => match (tf32_on, t.tf32) {
                (Some(s), Some(p)) => {
                    let note = match (s.matmul, s.cudnn) {
                        (true, true) => "",
                        (false, _) => "; TF32 on for cuDNN only, fp32 matmuls run at the fp32 rate",
                        (true, false) => "; TF32 on for matmuls only, cuDNN runs at the fp32 rate",
                    };
                    Some((p, PeakPrecision::Tf32, format!("tf32 tensor (dense){note}")))
                }
                _ => None,
            },
        };
        if let Some((p, precision, what)) = tensor {
            let source = format!("table: {} {what}", t.product);
            return Some(scaled(Peak { flop_per_s: p, precision, source }));
        }
        if device.peak_flops_fp32.filter(|p| *p > 0.0).is_none() {
            let note = if precision == Precision::Fp32 { "" } else { " (fp32 peak; no reduced-precision peak known)" };
            let source = format!("table: {} fp32{note}", t.product);
            return Some(scaled(Peak { flop_per_s: t.fp32, precision: PeakPrecision::Fp32, source }));
        }
    }
    let note = if precision == Precision::Fp32 { "" } else { " (fp32 peak; no reduced-precision peak known)" };
    if let Some(p) = device.peak_flops_fp32.filter(|p| *p > 0.0) {
        let how = device.details.get("peak_flops_fp32_source").map(|s| format!(" ({s})")).unwrap_or_default();
        let source = format!("backend: {} fp32{how}{note}", device.name);
        return Some(Peak { flop_per_s: p, precision: PeakPrecision::Fp32, source });
    }
    if is_cpu {
        let p = measure_cpu_fp32();
        let source = format!("measured: trainbench fp32 GEMM, lower bound{note}");
        return Some(Peak { flop_per_s: p, precision: PeakPrecision::Fp32, source });
    }
    None
}

/// Edge of the square matrices each thread multiplies.
const N: usize = 192;
/// Rows x columns of the register-blocked micro-kernel.
const MR: usize = 4;
const NR: usize = 16;

/// `c += a * b` for `N x N` row-major matrices, with `b` packed column-panel-major (`N / NR` panels of
/// `N x NR`). The fixed-size accumulator lets the compiler keep it in vector registers. `FUSED` uses fused
/// multiply-add, which is only fast where the target has FMA instructions (else it is a library call).
#[inline(always)]
fn gemm<const FUSED: bool>(a: &[f32], b_packed: &[f32], c: &mut [f32]) {
    for jp in 0..N / NR {
        let panel = &b_packed[jp * N * NR..(jp + 1) * N * NR];
        for i0 in (0..N).step_by(MR) {
            let mut acc = [[0f32; NR]; MR];
            for k in 0..N {
                let brow = &panel[k * NR..k * NR + NR];
                for r in 0..MR {
                    let av = a[(i0 + r) * N + k];
                    for (x, &bv) in acc[r].iter_mut().zip(brow) {
                        *x = if FUSED { av.mul_add(bv, *x) } else { *x + av * bv };
                    }
                }
            }
            for r in 0..MR {
                let row = &mut c[(i0 + r) * N + jp * NR..(i0 + r) * N + jp * NR + NR];
                for (x, v) in row.iter_mut().zip(acc[r]) {
                    *x += v;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gemm_avx2(a: &[f32], b_packed: &[f32], c: &mut [f32]) {
    gemm::<true>(a, b_packed, c);
}

fn gemm_best(a: &[f32], b_packed: &[f32], c: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports the features `gemm_avx2` is compiled for (checked just above).
        unsafe { gemm_avx2(a, b_packed, c) };
        return;
    }
    gemm::<false>(a, b_packed, c);
}

/// GEMMs per thread for a measurement of `duration_s`, found by timing one.
fn thread_rate(duration_s: f64) -> f64 {
    let a: Vec<f32> = (0..N * N).map(|i| ((i * 7 % 13) as f32) * 0.01).collect();
    let b: Vec<f32> = (0..N * N).map(|i| ((i * 5 % 11) as f32) * 0.01).collect();
    let mut c = vec![0f32; N * N];
    gemm_best(&a, &b, &mut c); // warm caches and page in
    let start = Instant::now();
    let mut reps = 0u64;
    while start.elapsed().as_secs_f64() < duration_s || reps == 0 {
        gemm_best(&a, &b, &mut c);
        reps += 1;
    }
    std::hint::black_box(&c);
    reps as f64 * 2.0 * (N * N * N) as f64 / start.elapsed().as_secs_f64()
}

/// Aggregate fp32 FLOP/s of all available cores running independent blocked GEMMs for about 0.3 s, measured
/// once per process. A lower bound of the true peak: the kernel is portable Rust (AVX2 + FMA when present),
/// not a tuned BLAS, so FLOP utilisation against it can exceed what a vendor peak would give.
pub fn measure_cpu_fp32() -> f64 {
    static PEAK: OnceLock<f64> = OnceLock::new();
    *PEAK.get_or_init(|| {
        let threads = super::cpu::available_cores();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| thread_rate(0.3))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn device(name: &str, kind: &str, peak: Option<f64>) -> DeviceInfo {
        DeviceInfo {
            selector: "x".into(),
            name: name.into(),
            kind: kind.into(),
            memory_bytes: None,
            peak_flops_fp32: peak,
            details: Default::default(),
        }
    }

    #[test]
    fn table_matches_nvml_names() {
        assert_eq!(gpu_peak("NVIDIA H100 80GB HBM3").unwrap().product, "H100 SXM");
        assert_eq!(gpu_peak("NVIDIA H100 PCIe").unwrap().product, "H100 PCIe");
        assert_eq!(gpu_peak("NVIDIA H200").unwrap().product, "H200 SXM");
        assert_eq!(gpu_peak("NVIDIA A100-SXM4-80GB").unwrap().product, "A100");
        assert_eq!(gpu_peak("NVIDIA A10").unwrap().product, "A10");
        assert_eq!(gpu_peak("Tesla V100-PCIE-32GB").unwrap().product, "V100 PCIe");
        assert_eq!(gpu_peak("Tesla V100-SXM2-16GB").unwrap().product, "V100 SXM2");
        assert_eq!(gpu_peak("NVIDIA L4").unwrap().product, "L4");
        assert_eq!(gpu_peak("NVIDIA L40S").unwrap().product, "L40S");
        assert_eq!(gpu_peak("Tesla T4").unwrap().product, "T4");
        assert_eq!(gpu_peak("NVIDIA GeForce RTX 4090").unwrap().product, "GeForce RTX 4090");
        assert!(gpu_peak("AMD Instinct MI300X").is_none());
        assert!(gpu_peak("NVIDIA GeForce RTX 4080").is_none());
    }

    #[test]
    fn precedence_of_sources() {
        let h100 = device("NVIDIA H100 80GB HBM3", "cuda", Some(1.0));
        let p = peak_for(&h100, Precision::Bf16, None).unwrap();
        assert_eq!((p.flop_per_s, p.source.as_str()), (989.4e12, "table: H100 SXM bf16 tensor (dense)"));
        // fp32 without TF32: the backend's figure wins over the table.
        assert_eq!(peak_for(&h100, Precision::Fp32, Some(Tf32::OFF)).unwrap().flop_per_s, 1.0);
        let t4 = device("Tesla T4", "cuda", None);
        assert_eq!(peak_for(&t4, Precision::Fp32, None).unwrap().flop_per_s, 8.1e12);
        assert!(peak_for(&t4, Precision::Bf16, None).unwrap().source.contains("fp32 peak"));
        let cpu = device("Some CPU", "cpu", Some(2.5e11));
        assert_eq!(peak_for(&cpu, Precision::Fp32, None).unwrap().source, "backend: Some CPU fp32");
        assert!(peak_for(&device("unknown gpu", "discrete-gpu", None), Precision::Fp32, None).is_none());
    }

    #[test]
    fn fp32_with_tf32_is_measured_against_the_tf32_peak() {
        let a100 = device("NVIDIA A100-SXM4-80GB", "cuda", None);
        // libtorch's default (cuDNN on): an fp32 ResNet-50 runs its convolutions on tensor cores.
        let p = peak_for(&a100, Precision::Fp32, Some(Tf32::default())).unwrap();
        assert_eq!(p.flop_per_s, 156e12);
        assert_eq!(
            p.source,
            "table: A100 tf32 tensor (dense); TF32 on for cuDNN only, fp32 matmuls run at the fp32 rate"
        );
        let both = Tf32 { matmul: true, cudnn: true };
        assert_eq!(peak_for(&a100, Precision::Fp32, Some(both)).unwrap().source, "table: A100 tf32 tensor (dense)");
        // Both off: the fp32 (non-tensor) peak.
        assert_eq!(peak_for(&a100, Precision::Fp32, Some(Tf32::OFF)).unwrap().flop_per_s, 19.5e12);
        // No TF32 before Ampere: a V100 keeps its fp32 peak whatever the switches say.
        let v100 = device("Tesla V100-SXM2-16GB", "cuda", None);
        assert_eq!(peak_for(&v100, Precision::Fp32, Some(both)).unwrap().flop_per_s, 15.7e12);
        // Reduced precisions ignore the switches.
        assert_eq!(peak_for(&a100, Precision::Bf16, Some(both)).unwrap().flop_per_s, 312e12);
        // Every Ampere-or-later row has a TF32 peak of about half its fp16 tensor peak (datasheets round: the
        // L40S lists 183 against 362.05), never below its fp32 peak.
        for (_, row) in TABLE {
            if let Some(tf32) = row.tf32 {
                assert!(tf32 <= row.fp16 * 0.51 && tf32 >= row.fp32, "{}", row.product);
            }
        }
    }

    #[test]
    fn every_peak_is_dense_and_of_the_arithmetic_it_names() {
        let both = Tf32 { matmul: true, cudnn: true };
        let gpus =
            ["NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB", "Tesla T4"];
        for name in gpus {
            let dev = device(name, "cuda", None);
            let row = gpu_peak(name).unwrap();
            for (precision, tf32) in [
                (Precision::Fp32, None),
                (Precision::Fp32, Some(Tf32::OFF)),
                (Precision::Fp32, Some(both)),
                (Precision::Fp16, Some(both)),
                (Precision::Bf16, Some(both)),
            ] {
                let p = peak_for(&dev, precision, tf32).unwrap();
                // A TF32 figure only for an fp32 run with a TF32 switch on; never in a bf16/fp16 denominator.
                let tf32_on = tf32.is_some_and(|s| s.any());
                assert_eq!(
                    p.precision == PeakPrecision::Tf32,
                    tf32_on && precision == Precision::Fp32 && row.tf32.is_some(),
                    "{name} {precision:?}"
                );
                // The figure is the row's figure for the arithmetic it names (the dense one: the table holds no
                // sparse figure, and a sparse one would be twice the dense).
                let want = match p.precision {
                    PeakPrecision::Fp32 => row.fp32,
                    PeakPrecision::Tf32 => row.tf32.unwrap(),
                    PeakPrecision::Fp16 => row.fp16,
                    PeakPrecision::Bf16 => row.bf16.unwrap(),
                };
                assert_eq!(p.flop_per_s, want, "{name} {precision:?}");
                assert!(p.source.contains(p.precision.as_str()), "{}", p.source);
                // Only a bf16 run on a GPU without bf16 falls back to another arithmetic, and says so.
                if !p.precision.serves(precision) {
                    assert!(p.source.contains("no reduced-precision peak known"), "{}", p.source);
                }
            }
        }
        // H100 SXM datasheet: 1,979 TFLOP/s bf16 *with sparsity*; the table holds the dense half.
        assert_eq!(gpu_peak("NVIDIA H100 80GB HBM3").unwrap().bf16, Some(989.4e12));
        // A CPU's fp32 rate beside a bf16 run is marked fp32, so it never serves as the bf16 peak.
        let cpu = device("Some CPU", "cpu", Some(2.5e11));
        let p = peak_for(&cpu, Precision::Bf16, None).unwrap();
        assert_eq!(p.precision, PeakPrecision::Fp32);
        assert!(!p.precision.serves(Precision::Bf16));
        assert!(p.source.contains("no reduced-precision peak known"), "{}", p.source);
    }

    #[test]
    fn a_mig_instance_gets_its_share_of_the_peak() {
        let mut mig = device("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "cuda", None);
        mig.details.insert("multiprocessors".into(), "60".into());
        let p = peak_for(&mig, Precision::Bf16, None).unwrap();
        assert!((p.flop_per_s - 989.4e12 * 60.0 / 132.0).abs() < 1e6, "{}", p.flop_per_s);
        assert_eq!(p.source, "table: H100 SXM bf16 tensor (dense) x 60/132 SMs (MIG instance)");
        // A full GPU is not scaled.
        mig.details.insert("multiprocessors".into(), "132".into());
        assert_eq!(peak_for(&mig, Precision::Bf16, None).unwrap().flop_per_s, 989.4e12);
    }

    #[test]
    fn blocked_gemm_is_correct() {
        let a: Vec<f32> = (0..N * N).map(|i| (i % 7) as f32).collect();
        let b: Vec<f32> = (0..N * N).map(|i| (i % 5) as f32).collect();
        // b_packed[jp][k][j] = B[k][jp * NR + j]
        let mut packed = vec![0f32; N * N];
        for jp in 0..N / NR {
            for k in 0..N {
                for j in 0..NR {
                    packed[jp * N * NR + k * NR + j] = b[k * N + jp * NR + j];
                }
            }
        }
        let mut c = vec![0f32; N * N];
        gemm_best(&a, &packed, &mut c);
        for (i, j) in [(0, 0), (3, 17), (N - 1, N - 1), (100, 50)] {
            let want: f32 = (0..N).map(|k| a[i * N + k] * b[k * N + j]).sum();
            assert_eq!(c[i * N + j], want, "c[{i}][{j}]");
        }
    }

    #[test]
    fn cpu_peak_is_measured_and_plausible() {
        let p = measure_cpu_fp32();
        // Between 1 MFLOP/s (an unoptimised test build on a loaded machine) and 100 TFLOP/s.
        assert!(p > 1e6 && p < 1e14, "{p}");
    }
}
