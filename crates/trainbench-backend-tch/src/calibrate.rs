//! Calibration on libtorch (`Backend::calibrate`): times square matrix products and convolutions (forward, and
//! backward: input and weight gradients) per precision,
//! an add over vectors far larger than the caches (STREAM's add: two read, one written), the fixed cost of one
//! small operation with autograd recording, and on CUDA the pinned host-to-device copy. Each figure is the
//! median over `repeats` samples, each of enough calls to last [`MIN_SAMPLE_S`] (see there why).

use std::time::Instant;

use tch::{Device, Kind, TchError, Tensor};
use trainbench_contract::BackendError;
use trainbench_contract::calibrate::{
    CalibrationRequest, ConvShape, ConvTiming, CycledFresh, FreshCycle, FreshMemory, GemmShapeTiming, KernelTiming,
    Measurement,
};
use trainbench_contract::stats::median;
use trainbench_graph::Precision;

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

/// Shortest timed sample, seconds: calls are repeated until a sample lasts this long, so that a sample spans
/// several scheduler time slices on a shared machine, as a training step does (a single short call would run
/// inside one slice at full speed and overstate the rate a run then sees).
const MIN_SAMPLE_S: f64 = 0.02;
/// Most calls in one sample.
const MAX_CALLS: u32 = 10_000;

/// Seconds on the clock a calibration reads: the wall clock, or the process's CPU clock.
#[derive(Clone, Copy)]
struct Clock {
    cpu: bool,
}

impl Clock {
    fn now(self) -> f64 {
        if self.cpu {
            process_cpu_s()
        } else {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            START.get_or_init(Instant::now).elapsed().as_secs_f64()
        }
    }
}

/// CPU seconds of this process (all threads), from `CLOCK_PROCESS_CPUTIME_ID` (nanosecond resolution).
#[cfg(unix)]
fn process_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `clock_gettime` writes one `timespec` into the pointer, which points at a valid one.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Without a process CPU clock, the wall clock (the method says which clock was asked for).
#[cfg(not(unix))]
fn process_cpu_s() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Median seconds per call over `repeats` samples of `f` (after one untimed call), each sample at least
/// [`MIN_SAMPLE_S`] long, the device synchronised at both ends of each sample.
fn time(
    clock: Clock,
    device: Device,
    repeats: u32,
    mut f: impl FnMut() -> Result<(), TchError>,
) -> Result<f64, TchError> {
    let t = clock.now();
    f()?;
    sync(device);
    let first = (clock.now() - t).max(1e-7);
    let calls = ((MIN_SAMPLE_S / first).ceil() as u32).clamp(1, MAX_CALLS);
    let mut xs = Vec::new();
    for _ in 0..repeats.max(1) {
        let t = clock.now();
        for _ in 0..calls {
            f()?;
        }
        sync(device);
        xs.push((clock.now() - t) / f64::from(calls));
    }
    // At least one sample was taken.
    Ok(median(&xs).unwrap_or(0.0))
}

/// Median seconds of one convolution of shape `s` forward and of its backward (input and weight gradients
/// through autograd, graph kept); at its stride and padding, transposed where it is.
fn conv_pair(
    clock: Clock,
    device: Device,
    r: u32,
    opts: (Kind, Device),
    s: &ConvShape,
) -> Result<(f64, f64), TchError> {
    let x = Tensor::f_randn([s.n as i64, s.c as i64, s.hw as i64, s.hw as i64], opts)?;
    // conv2d's filters are [out, in, r, r]; conv_transpose2d's [in, out, r, r].
    let filters = if s.transposed { [s.c, s.k] } else { [s.k, s.c] };
    let w = Tensor::f_randn([filters[0] as i64, filters[1] as i64, s.r as i64, s.r as i64], opts)?;
    let (pad, stride) = (s.padding() as i64, s.stride.max(1) as i64);
    let conv = |x: &Tensor, w: &Tensor| {
        if s.transposed {
            x.f_conv_transpose2d(w, None::<Tensor>, [stride, stride], [pad, pad], [0, 0], 1, [1, 1])
        } else {
            x.f_conv2d(w, None::<Tensor>, [stride, stride], [pad, pad], [1, 1], 1)
        }
    };
    let forward = time(clock, device, r, || conv(&x, &w).map(drop))?;
    let (xg, wg) = (x.set_requires_grad(true), w.set_requires_grad(true));
    let loss = tch::with_grad(|| conv(&xg, &wg).and_then(|y| y.f_sum(opts.0)))?;
    let backward = time(clock, device, r, || Tensor::f_run_backward(&[&loss], &[&xg, &wg], true, false).map(drop))?;
    Ok((forward, backward))
}

/// Sizes between which [`fresh_memory`] looks for the allocator's threshold, bytes: 1 MiB, kept for reuse by
/// every allocator trainbench meets, and 128 MiB, above glibc's largest mmap threshold (32 MiB).
const FRESH_SEARCH: (f64, f64) = (1024.0 * 1024.0, 128.0 * 1024.0 * 1024.0);
/// The search stops when the two sizes are within this ratio of each other.
const FRESH_RESOLUTION: f64 = 1.005;

/// What memory taken afresh from the operating system costs on the CPU: per byte, a fresh zeroed tensor (allocated,
/// written, freed on every call) less zeroing a kept one in place, at 128 MiB; then the largest size still served
/// from kept memory, by bisection on a log scale between 1 and 128 MiB (a size is fresh when its cost per byte is
/// above half the 128 MiB one). Each size is first allocated once untimed, as a training loop's second step
/// finds the allocator after its first; then the request's `cycles` ([`cycled_fresh`]). `None` on CUDA (the
/// caching allocator keeps what it maps) or when even 128 MiB costs nothing beyond the write.
fn fresh_memory(
    clock: Clock,
    device: Device,
    repeats: u32,
    cycles: &[FreshCycle],
) -> Result<Option<FreshMemory>, TchError> {
    if device != Device::Cpu {
        return Ok(None);
    }
    let extra_per_byte = |bytes: f64| -> Result<f64, TchError> {
        let elements = (bytes / 4.0).round() as i64;
        let mut kept = Tensor::f_zeros([elements], (Kind::Float, device))?;
        let reused = time(clock, device, repeats, || kept.f_zero_().map(drop))?;
        drop(kept);
        let fresh = time(clock, device, repeats, || Tensor::f_zeros([elements], (Kind::Float, device)).map(drop))?;
        Ok((fresh - reused).max(0.0) / (4 * elements) as f64)
    };
    let (mut reused, mut fresh) = FRESH_SEARCH;
    let seconds_per_byte = extra_per_byte(fresh)?;
    if seconds_per_byte <= 0.0 {
        return Ok(None);
    }
    while fresh / reused > FRESH_RESOLUTION {
        let mid = (reused * fresh).sqrt();
        if extra_per_byte(mid)? > 0.5 * seconds_per_byte {
            fresh = mid;
        } else {
            reused = mid;
        }
    }
    let cycled = cycled_fresh(clock, cycles)?;
    Ok(Some(FreshMemory { reused_up_to_bytes: reused, seconds_per_byte, cycled }))
}

/// Elements of each allocation of a cycle (64 MiB of fp32: past glibc's largest mmap threshold, so each is
/// mapped afresh as a large gradient or optimizer temporary is).
const CYCLE_CHUNK_ELEMENTS: i64 = 16 << 20;
/// Cycles per size and pause; the first is not counted (this process meets the memory for the first time).
const CYCLES: usize = 5;

/// Each of `cycles` timed as a training step meets its fresh memory: the size taken in [`CYCLE_CHUNK_ELEMENTS`]
/// zeroed tensors held together, given back, and a pause; the cost per byte of taking them, the mean over the
/// cycles after the first (a host that reports free memory does so in bursts: some cycles pay, some do not),
/// less a fresh byte's cost in a tight loop of one such tensor, where the pages come straight back. A size over
/// a third of the memory the host has available is skipped.
fn cycled_fresh(clock: Clock, cycles: &[FreshCycle]) -> Result<Vec<CycledFresh>, TchError> {
    if cycles.is_empty() {
        return Ok(Vec::new());
    }
    let chunk_bytes = (4 * CYCLE_CHUNK_ELEMENTS) as f64;
    let tight =
        time(clock, Device::Cpu, 5, || Tensor::f_zeros([CYCLE_CHUNK_ELEMENTS], (Kind::Float, Device::Cpu)).map(drop))?
            / chunk_bytes;
    let available = available_bytes();
    let mut points = Vec::new();
    for cycle in cycles.iter().filter(|c| c.bytes > 0.0 && available.is_none_or(|a| c.bytes <= a / 3.0)) {
        let chunks = (cycle.bytes / chunk_bytes).ceil().max(1.0) as usize;
        let bytes = chunks as f64 * chunk_bytes;
        let (mut taking, mut periods) = (Vec::new(), Vec::new());
        for i in 0..CYCLES {
            let start = Instant::now();
            let t = clock.now();
            let held = (0..chunks)
                .map(|_| Tensor::f_zeros([CYCLE_CHUNK_ELEMENTS], (Kind::Float, Device::Cpu)))
                .collect::<Result<Vec<_>, _>>()?;
            let took = clock.now() - t;
            drop(held);
            std::thread::sleep(std::time::Duration::from_secs_f64(cycle.pause_s.max(0.0)));
            if i > 0 {
                taking.push(took);
                periods.push(start.elapsed().as_secs_f64());
            }
        }
        let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
        points.push(CycledFresh {
            bytes,
            period_s: mean(&periods),
            extra_seconds_per_byte: (mean(&taking) / bytes - tight).max(0.0),
        });
    }
    Ok(points)
}

/// Bytes of memory the host has available (Linux's `MemAvailable`), when it says.
fn available_bytes() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// Elements of the square roots [`zero_sqrt`] times (16 MiB of fp32, into a kept output).
const SQRT_ELEMENTS: i64 = 4 << 20;

/// Seconds per element a square root of zeros costs beyond one of ones, on the CPU, each into a kept output.
fn zero_sqrt(clock: Clock, repeats: u32) -> Result<f64, TchError> {
    let opts = (Kind::Float, Device::Cpu);
    let out = Tensor::f_empty([SQRT_ELEMENTS], opts)?;
    let (zeros, ones) = (Tensor::f_zeros([SQRT_ELEMENTS], opts)?, Tensor::f_ones([SQRT_ELEMENTS], opts)?);
    let of = |x: &Tensor| time(clock, Device::Cpu, repeats, || x.f_sqrt_out(&out).map(drop));
    let (zero_s, one_s) = (of(&zeros)?, of(&ones)?);
    Ok(((zero_s - one_s) / SQRT_ELEMENTS as f64).max(0.0))
}

/// Run the measurements of `request` on `device`.
pub fn calibrate(request: &CalibrationRequest, device: Device) -> Result<Measurement, TchError> {
    let _guard = tch::no_grad_guard();
    let r = request.repeats;
    let clock = Clock { cpu: request.cpu_clock && device == Device::Cpu };
    let mut kernels = Vec::new();
    let mut gemm_shapes = Vec::new();
    let mut conv_grid = Vec::new();
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
            let seconds = time(clock, device, r, || a.f_matmul(&b).map(drop))?;
            let flops = 2.0 * (n * n * n) as f64;
            kernels.push(KernelTiming {
                kind: "gemm".into(),
                precision: p,
                shape: format!("m=n=k={n}"),
                flops,
                seconds,
            });
        }
        // The grids at the first precision only (they are the larger part of a CPU's calibration), or at every
        // one when asked (a GPU's tensor cores).
        let grids = request.grids_at_every_precision || Some(&p) == request.precisions.first();
        if grids {
            for &[m, k, n] in &request.gemm_shapes {
                let a = Tensor::f_randn([m as i64, k as i64], opts)?;
                let b = Tensor::f_randn([k as i64, n as i64], opts)?;
                let seconds = time(clock, device, r, || a.f_matmul(&b).map(drop))?;
                gemm_shapes.push(GemmShapeTiming { precision: p, dims: [m, k, n], seconds });
            }
        }
        if grids {
            for s in &request.conv_grid {
                let (forward_s, backward_s) = conv_pair(clock, device, r, opts, s)?;
                conv_grid.push(ConvTiming { precision: p, shape: *s, forward_s, backward_s });
            }
        }
        for s in &request.conv_shapes {
            let x = Tensor::f_randn([s.n as i64, s.c as i64, s.hw as i64, s.hw as i64], opts)?;
            let w = Tensor::f_randn([s.k as i64, s.c as i64, s.r as i64, s.r as i64], opts)?;
            let pad = (s.r / 2) as i64;
            let seconds =
                time(clock, device, r, || x.f_conv2d(&w, None::<Tensor>, [1, 1], [pad, pad], [1, 1], 1).map(drop))?;
            let shape = format!("N={} C={} H=W={} K={} {}x{}", s.n, s.c, s.hw, s.k, s.r, s.r);
            kernels.push(KernelTiming {
                kind: "conv".into(),
                precision: p,
                shape: shape.clone(),
                flops: s.flops(),
                seconds,
            });
            // Backward: input and weight gradients (2 x the forward's FLOPs) through autograd, graph kept.
            let (xg, wg) = (x.set_requires_grad(true), w.set_requires_grad(true));
            let loss = tch::with_grad(|| {
                xg.f_conv2d(&wg, None::<Tensor>, [1, 1], [pad, pad], [1, 1], 1).and_then(|y| y.f_sum(kind(p)))
            })?;
            let seconds =
                time(clock, device, r, || Tensor::f_run_backward(&[&loss], &[&xg, &wg], true, false).map(drop))?;
            kernels.push(KernelTiming {
                kind: "conv_backward".into(),
                precision: p,
                shape,
                flops: 2.0 * s.flops(),
                seconds,
            });
        }
    }
    // STREAM's add: a = b + c over fp32 vectors, 3 x 4 bytes per element.
    let e = request.triad_elements as i64;
    let (a, b, c) = (
        Tensor::f_zeros([e], (Kind::Float, device))?,
        Tensor::f_randn([e], (Kind::Float, device))?,
        Tensor::f_randn([e], (Kind::Float, device))?,
    );
    let add_s = time(clock, device, r, || b.f_add_out(&a, &c).map(drop))?;
    let triad_bytes_per_s = 12.0 * e as f64 / add_s;
    drop((a, b, c));
    // Per-operation overhead: a 4-element add with autograd recording, as a training step's small ops are.
    let overhead_s = {
        let x = Tensor::f_ones([4], (Kind::Float, device))?.set_requires_grad(true);
        time(clock, device, r, || tch::with_grad(|| x.f_add(&x)).map(drop))?
    };
    let host_to_device_bytes_per_s = match device {
        Device::Cuda(_) => {
            let host = crate::lower::pinned(&Tensor::f_randn([16 << 20], (Kind::Float, Device::Cpu))?)?;
            let s = time(clock, device, r, || host.f_to_device(device).map(drop))?;
            Some(64.0 * (1 << 20) as f64 / s)
        }
        _ => None,
    };
    let fresh_memory = if request.fresh_memory { fresh_memory(clock, device, r, &request.fresh_cycles)? } else { None };
    let zero_sqrt_s_per_element = if device == Device::Cpu { Some(zero_sqrt(clock, r)?) } else { None };
    let threads = tch::get_num_threads();
    let grid_at = if request.grids_at_every_precision { "every precision" } else { "first precision" };
    let mut method = format!(
        "tch backend (libtorch {}), {threads} intra-op thread(s): median over {r} samples of repeated calls (each \
         sample at least {MIN_SAMPLE_S} s) after one untimed call, device synchronised at both ends; GEMM = matmul of random square matrices (and of [m x k] x [k x n] on a grid, {grid_at}), conv grid = 3x3 convolutions over channels x image side x batch forward and backward ({grid_at}), and the request's other kernel classes (kernel, stride, transposed) beside them at a few of its sizes, conv = conv2d stride 1 same \
         padding without bias (backward: input and weight gradients through autograd), memory = add_out over 3 x {e} fp32 elements, overhead = an add of 4 elements with \
         autograd recording{}",
        crate::device::versions(device).get("libtorch").cloned().unwrap_or_default(),
        if device.is_cuda() { ", host-to-device = 64 MiB pinned copy" } else { "" }
    );
    if request.fresh_memory && device == Device::Cpu {
        method.push_str(
            ", fresh memory = a fresh zeroed fp32 tensor less zeroing a kept one, per byte at 128 MiB, and the largest \
             size served from kept memory by bisection between 1 and 128 MiB",
        );
        if !request.fresh_cycles.is_empty() {
            method.push_str(&format!(
                ", cycled fresh memory = 64 MiB zeroed tensors held together to each size, given back, then a pause \
                 ({CYCLES} cycles, the mean of the last {}), per byte beyond one such tensor's in a tight loop",
                CYCLES - 1
            ));
        }
    }
    if device == Device::Cpu {
        method.push_str(", zero square root = sqrt of 4 M zeros less of 4 M ones into a kept output, per element");
    }
    method.push_str(if clock.cpu {
        "; clock: the process's CPU time (the time with a core to itself on a shared machine)"
    } else {
        "; clock: wall time"
    });
    for s in skipped {
        method.push_str("; skipped: ");
        method.push_str(s);
    }
    Ok(Measurement {
        device: crate::device::info(device),
        kernels,
        gemm_shapes,
        conv_grid,
        op_overhead_s: overhead_s,
        triad_bytes_per_s,
        host_to_device_bytes_per_s,
        fresh_memory,
        zero_sqrt_s_per_element,
        method,
    })
}

/// Map a libtorch error of a calibration to the contract's error.
pub fn map(e: TchError) -> BackendError {
    BackendError::Framework(format!("calibration: {e}"))
}
