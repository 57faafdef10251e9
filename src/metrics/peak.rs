//! Device peak FLOP/s, the denominator of FLOP utilisation: a table of NVIDIA datasheet peaks keyed by product
//! name, and a measured fp32 GEMM rate for CPUs when the backend reports none.
//!
//! Precedence (see [`peak_for`]): for fp16/bf16 on a GPU in the table, the table's dense tensor-core peak; for
//! fp32, the backend's `DeviceInfo::peak_flops_fp32` when it reports one (the tch backend measures libtorch's
//! own GEMM on the CPU), else the table, else, on a CPU, [`measure_cpu_fp32`].

use std::sync::OnceLock;
use std::time::Instant;

use trainbench_workload::{DeviceInfo, Precision};

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
}

const T: f64 = 1e12;

/// Name patterns (all must occur, case-insensitively) and the peaks they select; most specific first.
const TABLE: &[(&[&str], GpuPeak)] = &[
    (&["h200", "nvl"], GpuPeak { product: "H200 NVL", fp32: 60.0 * T, fp16: 835.0 * T, bf16: Some(835.0 * T) }),
    (&["h200"], GpuPeak { product: "H200 SXM", fp32: 67.0 * T, fp16: 989.4 * T, bf16: Some(989.4 * T) }),
    (&["gh200"], GpuPeak { product: "GH200", fp32: 67.0 * T, fp16: 989.4 * T, bf16: Some(989.4 * T) }),
    (&["h100", "pcie"], GpuPeak { product: "H100 PCIe", fp32: 51.0 * T, fp16: 756.0 * T, bf16: Some(756.0 * T) }),
    (&["h100", "nvl"], GpuPeak { product: "H100 NVL", fp32: 60.0 * T, fp16: 835.0 * T, bf16: Some(835.0 * T) }),
    (&["h100"], GpuPeak { product: "H100 SXM", fp32: 67.0 * T, fp16: 989.4 * T, bf16: Some(989.4 * T) }),
    (&["a100"], GpuPeak { product: "A100", fp32: 19.5 * T, fp16: 312.0 * T, bf16: Some(312.0 * T) }),
    (&["a10"], GpuPeak { product: "A10", fp32: 31.2 * T, fp16: 125.0 * T, bf16: Some(125.0 * T) }),
    (&["l40s"], GpuPeak { product: "L40S", fp32: 91.6 * T, fp16: 362.05 * T, bf16: Some(362.05 * T) }),
    (&["l4"], GpuPeak { product: "L4", fp32: 30.3 * T, fp16: 121.0 * T, bf16: Some(121.0 * T) }),
    (&["v100", "pcie"], GpuPeak { product: "V100 PCIe", fp32: 14.0 * T, fp16: 112.0 * T, bf16: None }),
    (&["v100"], GpuPeak { product: "V100 SXM2", fp32: 15.7 * T, fp16: 125.0 * T, bf16: None }),
    (&["t4"], GpuPeak { product: "T4", fp32: 8.1 * T, fp16: 65.0 * T, bf16: None }),
    (&["rtx", "4090"], GpuPeak { product: "GeForce RTX 4090", fp32: 82.6 * T, fp16: 165.2 * T, bf16: Some(165.2 * T) }),
    (&["rtx", "3090"], GpuPeak { product: "GeForce RTX 3090", fp32: 35.6 * T, fp16: 71.0 * T, bf16: Some(71.0 * T) }),
    (&["rtx", "a6000"], GpuPeak { product: "RTX A6000", fp32: 38.7 * T, fp16: 154.8 * T, bf16: Some(154.8 * T) }),
];

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

/// A peak figure and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// FLOP/s.
    pub flop_per_s: f64,
    /// Provenance, e.g. `table: H100 SXM bf16 tensor (dense)`.
    pub source: String,
}

/// The peak FLOP/s to compare a run on `device` at `precision` against; `None` when unknown.
pub fn peak_for(device: &DeviceInfo, precision: Precision) -> Option<Peak> {
    let is_cpu = device.kind == "cpu";
    let table = if is_cpu { None } else { gpu_peak(&device.name) };
    if let Some(t) = table {
        match precision {
            Precision::Fp16 => {
                return Some(Peak { flop_per_s: t.fp16, source: format!("table: {} fp16 tensor (dense)", t.product) });
            }
            Precision::Bf16 => {
                if let Some(bf16) = t.bf16 {
                    return Some(Peak {
                        flop_per_s: bf16,
                        source: format!("table: {} bf16 tensor (dense)", t.product),
                    });
                }
            }
            Precision::Fp32 => {}
        }
    }
    let note = if precision == Precision::Fp32 { "" } else { " (fp32 peak; no reduced-precision peak known)" };
    if let Some(p) = device.peak_flops_fp32.filter(|p| *p > 0.0) {
        let how = device.details.get("peak_flops_fp32_source").map(|s| format!(" ({s})")).unwrap_or_default();
        return Some(Peak { flop_per_s: p, source: format!("backend: {} fp32{how}{note}", device.name) });
    }
    if let Some(t) = table {
        return Some(Peak { flop_per_s: t.fp32, source: format!("table: {} fp32{note}", t.product) });
    }
    if is_cpu {
        let p = measure_cpu_fp32();
        return Some(Peak { flop_per_s: p, source: format!("measured: trainbench fp32 GEMM, lower bound{note}") });
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
        let p = peak_for(&h100, Precision::Bf16).unwrap();
        assert_eq!((p.flop_per_s, p.source.as_str()), (989.4e12, "table: H100 SXM bf16 tensor (dense)"));
        // fp32: the backend's figure wins over the table.
        assert_eq!(peak_for(&h100, Precision::Fp32).unwrap().flop_per_s, 1.0);
        let t4 = device("Tesla T4", "cuda", None);
        assert_eq!(peak_for(&t4, Precision::Fp32).unwrap().flop_per_s, 8.1e12);
        assert!(peak_for(&t4, Precision::Bf16).unwrap().source.contains("fp32 peak"));
        let cpu = device("Some CPU", "cpu", Some(2.5e11));
        assert_eq!(peak_for(&cpu, Precision::Fp32).unwrap().source, "backend: Some CPU fp32");
        assert!(peak_for(&device("unknown gpu", "discrete-gpu", None), Precision::Fp32).is_none());
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
