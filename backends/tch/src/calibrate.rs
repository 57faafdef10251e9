//! Calibration on libtorch (`Backend::calibrate`): times square matrix products and convolutions per precision,
//! an add over vectors far larger than the caches (STREAM's add: two read, one written), the fixed cost of one
//! small operation with autograd recording, and on CUDA the pinned host-to-device copy. Each figure is the
//! median of `repeats` timed calls after one untimed call, the device synchronised around each call.

use std::time::Instant;

use tch::{Device, Kind, TchError, Tensor};
use trainbench_workload::calibrate::{CalibrationRequest, KernelTiming, Measurement, median};
use trainbench_workload::{BackendError, Precision};

/// Calls timed together for the per-operation overhead (one call is below the clock's resolution).
const OVERHEAD_BATCH: u32 = 200;

fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

fn kind(p: Precision) -> Kind {
    match p {
        Precision::Fp32 => Kind::Float,
        Precision::Fp16 => Kind::Half,
        Precision::Bf16 => Kind::BFloat16,
    }
}

/// Median seconds of `repeats` calls of `f` (after one untimed call), the device synchronised around each.
fn time(device: Device, repeats: u32, mut f: impl FnMut() -> Result<(), TchError>) -> Result<f64, TchError> {
    f()?;
    sync(device);
    let mut xs = Vec::new();
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        f()?;
        sync(device);
        xs.push(t.elapsed().as_secs_f64());
    }
    Ok(median(xs))
}

/// Run the measurements of `request` on `device`.
pub fn calibrate(request: &CalibrationRequest, device: Device) -> Result<Measurement, TchError> {
    let _guard = tch::no_grad_guard();
    let r = request.repeats;
    let mut kernels = Vec::new();
    let mut skipped = Vec::new();
    for &p in &request.precisions {
        if p == Precision::Fp16 && device == Device::Cpu {
            skipped.push("fp16 on the CPU (trainbench's tch backend runs fp16 on CUDA only)");
            continue;
        }
        let opts = (kind(p), device);
        for &n in &request.gemm_sizes {
            let n = n as i64;
            let a = Tensor::f_randn([n, n], opts)?;
            let b = Tensor::f_randn([n, n], opts)?;
            let seconds = time(device, r, || a.f_matmul(&b).map(drop))?;
            let flops = 2.0 * (n * n * n) as f64;
            kernels.push(KernelTiming {
                kind: "gemm".into(),
                precision: p,
                shape: format!("m=n=k={n}"),
                flops,
                seconds,
            });
        }
        for s in &request.conv_shapes {
            let x = Tensor::f_randn([s.n as i64, s.c as i64, s.hw as i64, s.hw as i64], opts)?;
            let w = Tensor::f_randn([s.k as i64, s.c as i64, s.r as i64, s.r as i64], opts)?;
            let pad = (s.r / 2) as i64;
            let seconds = time(device, r, || x.f_conv2d(&w, None::<Tensor>, [1, 1], [pad, pad], [1, 1], 1).map(drop))?;
            let shape = format!("N={} C={} H=W={} K={} {}x{}", s.n, s.c, s.hw, s.k, s.r, s.r);
            kernels.push(KernelTiming { kind: "conv".into(), precision: p, shape, flops: s.flops(), seconds });
        }
    }
    // STREAM's add: a = b + c over fp32 vectors, 3 x 4 bytes per element.
    let e = request.triad_elements as i64;
    let (a, b, c) = (
        Tensor::f_zeros([e], (Kind::Float, device))?,
        Tensor::f_randn([e], (Kind::Float, device))?,
        Tensor::f_randn([e], (Kind::Float, device))?,
    );
    let add_s = time(device, r, || b.f_add_out(&a, &c).map(drop))?;
    let triad_bytes_per_s = 12.0 * e as f64 / add_s;
    drop((a, b, c));
    // Per-operation overhead: a 4-element add with autograd recording, as a training step's small ops are.
    let overhead_s = {
        let x = Tensor::f_ones([4], (Kind::Float, device))?.set_requires_grad(true);
        let per_batch = time(device, r, || {
            for _ in 0..OVERHEAD_BATCH {
                drop(tch::with_grad(|| x.f_add(&x))?);
            }
            Ok(())
        })?;
        per_batch / f64::from(OVERHEAD_BATCH)
    };
    let host_to_device_bytes_per_s = match device {
        Device::Cuda(_) => {
            let host = Tensor::f_randn([16 << 20], (Kind::Float, Device::Cpu))?.f_pin_memory(device)?;
            let s = time(device, r, || host.f_to_device(device).map(drop))?;
            Some(64.0 * (1 << 20) as f64 / s)
        }
        _ => None,
    };
    let threads = tch::get_num_threads();
    let mut method = format!(
        "tch backend (libtorch {}), {threads} intra-op thread(s): median of {r} timed calls after one untimed call, \
         device synchronised around each; GEMM = matmul of random square matrices, conv = conv2d stride 1 same \
         padding without bias, memory = add_out over 3 x {e} fp32 elements, overhead = {OVERHEAD_BATCH} adds of 4 \
         elements with autograd recording per timed call{}",
        crate::device::versions(device).get("libtorch").cloned().unwrap_or_default(),
        if device.is_cuda() { ", host-to-device = 64 MiB pinned copy" } else { "" }
    );
    for s in skipped {
        method.push_str("; skipped: ");
        method.push_str(s);
    }
    Ok(Measurement {
        device: crate::device::info(device),
        kernels,
        op_overhead_s: overhead_s,
        triad_bytes_per_s,
        host_to_device_bytes_per_s,
        method,
    })
}

/// Map a libtorch error of a calibration to the contract's error.
pub fn map(e: TchError) -> BackendError {
    BackendError::Framework(format!("calibration: {e}"))
}
