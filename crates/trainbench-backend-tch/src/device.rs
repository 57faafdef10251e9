//! Devices of the tch backend: the typed [`DeviceSelector`] (parsed by the contract crate) mapped to a tch
//! device ([`to_tch`]), [`DeviceInfo`] for the CPU and CUDA devices, the measured CPU fp32 peak, and the library
//! versions recorded in every result.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use tch::{Device, Kind, Tensor};
use trainbench_contract::{BackendError, DeviceInfo, DeviceSelector};

use crate::shim;

/// The tch device a selector names, if it exists here: `cpu`, or a CUDA device libtorch sees.
pub fn to_tch(selector: DeviceSelector) -> Result<Device, BackendError> {
    let err = |reason: String| BackendError::Device { selector: selector.to_string(), reason };
    match selector {
        DeviceSelector::Cpu => Ok(Device::Cpu),
        DeviceSelector::Cuda(index) => {
            let index = index.unwrap_or(0);
            let count = tch::Cuda::device_count().max(0) as usize;
            if count == 0 {
                return Err(err(no_cuda_reason()));
            }
            if index >= count {
                return Err(err(format!("there are {count} CUDA device(s): use cuda:0..cuda:{}", count - 1)));
            }
            Ok(Device::Cuda(index))
        }
        DeviceSelector::Wgpu(_) => Err(err("the tch backend runs on `cpu` or `cuda:N`, not a wgpu adapter".into())),
    }
}

/// Why libtorch sees no CUDA device, with the driver's CUDA version and the one libtorch was built for: the
/// PyPI wheel is built for CUDA 13 and needs a driver that supports it.
pub fn no_cuda_reason() -> String {
    let built = match shim::cuda_versions() {
        Ok((cudart, _)) if cudart > 0 => Some(shim::cuda_version_text(cudart)),
        _ => None,
    };
    let driver = shim::cuda_driver_version();
    let mut msg = String::from("libtorch sees no CUDA device");
    match (&driver, &built) {
        (Ok(None), _) => msg.push_str(": no NVIDIA driver here (libcuda.so.1 is not found)"),
        (Ok(Some(d)), Some(b)) => msg.push_str(&format!(
            ": the NVIDIA driver supports CUDA {d} and this libtorch was built for CUDA {b} (a driver older than \
             the build's CUDA cannot run it: update the driver, or build against a libtorch for CUDA {d}); \
             otherwise no GPU is visible (CUDA_VISIBLE_DEVICES?)"
        )),
        (Ok(Some(d)), None) => {
            msg.push_str(&format!(": the NVIDIA driver supports CUDA {d}, but this libtorch has no CUDA support"))
        }
        (Err(e), _) => msg.push_str(&format!(" (the driver's CUDA version is unknown: {e})")),
    }
    msg
}

/// The CPU's model name from /proc/cpuinfo (or the architecture when unreadable).
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Measured fp32 matmul rate of this CPU through libtorch with its current thread count (FLOP/s).
///
/// Best of at least 6 timed 1024^3 matmuls after one warm-up, repeated for up to 0.3 s so that a busy machine
/// still gets a clean sample; measured once per process. The runner divides model FLOPs per second by this
/// for FLOP utilisation, so it is what libtorch can reach here, not a datasheet figure.
pub fn cpu_peak_flops_fp32() -> Option<f64> {
    static PEAK: OnceLock<Option<f64>> = OnceLock::new();
    *PEAK.get_or_init(|| {
        let n = 1024i64;
        let _guard = tch::no_grad_guard();
        let a = Tensor::f_randn([n, n], (Kind::Float, Device::Cpu)).ok()?;
        let b = Tensor::f_randn([n, n], (Kind::Float, Device::Cpu)).ok()?;
        let mut best = f64::INFINITY;
        let start = Instant::now();
        for rep in 0..100 {
            let t = Instant::now();
            let c = a.f_matmul(&b).ok()?;
            let dt = t.elapsed().as_secs_f64();
            drop(c);
            if rep > 0 {
                best = best.min(dt);
            }
            if rep >= 6 && start.elapsed().as_secs_f64() > 0.3 {
                break;
            }
        }
        (best.is_finite() && best > 0.0).then(|| 2.0 * (n as f64).powi(3) / best)
    })
}

/// Describe the CPU as a device, with its measured fp32 peak ([`cpu_peak_flops_fp32`], about 0.3 s the first
/// time in a process) when `measure`.
pub fn cpu_info(measure: bool) -> DeviceInfo {
    let mut details = BTreeMap::new();
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    details.insert("logical_cpus".into(), logical.to_string());
    details.insert("torch_threads".into(), tch::get_num_threads().to_string());
    if let Ok(cap) = shim::cpu_capability() {
        details.insert("libtorch_cpu_capability".into(), cap);
    }
    let peak = if measure { cpu_peak_flops_fp32() } else { None };
    let source = if measure {
        "measured: 1024^3 fp32 matmul through libtorch"
    } else {
        "measured when a run on the CPU starts (not for listings beside CUDA devices)"
    };
    details.insert("peak_flops_fp32_source".into(), source.into());
    DeviceInfo {
        selector: "cpu".into(),
        name: cpu_name(),
        kind: "cpu".into(),
        memory_bytes: mem_total(),
        peak_flops_fp32: peak,
        details,
    }
}

fn mem_total() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Describe CUDA device `index` (name, memory, compute capability through the shim; no peak figure: the
/// runner's table has it).
pub fn cuda_info(index: usize) -> DeviceInfo {
    let mut details = BTreeMap::new();
    let (name, memory) = match shim::cuda_device_properties(index) {
        Ok(p) => {
            details.insert("compute_capability".into(), format!("{}.{}", p.capability.0, p.capability.1));
            details.insert("multiprocessors".into(), p.multiprocessors.to_string());
            if p.name.contains(" MIG ") {
                // A MIG instance: its multiprocessors are a share of the GPU's (the peak is scaled by them).
                details.insert("mig".into(), "true".into());
            }
            (p.name, Some(p.total_memory))
        }
        Err(e) => {
            details.insert("properties_error".into(), e.0);
            (format!("CUDA device {index}"), None)
        }
    };
    // The exact name of this GPU to NVML, whatever CUDA's device order and CUDA_VISIBLE_DEVICES say.
    match shim::cuda_pci_bus_id(index) {
        Ok(bus) => details.insert("pci_bus_id".into(), bus),
        Err(e) => details.insert("pci_bus_id_error".into(), e.0),
    };
    details.insert("cudnn_available".into(), tch::Cuda::cudnn_is_available().to_string());
    DeviceInfo {
        selector: format!("cuda:{index}"),
        name,
        kind: "cuda".into(),
        memory_bytes: memory,
        peak_flops_fp32: None,
        details,
    }
}

/// Information on the device a run uses.
pub fn info(device: Device) -> DeviceInfo {
    match device {
        Device::Cuda(i) => cuda_info(i),
        _ => cpu_info(true),
    }
}

/// Every device this backend can run on here.
pub fn all() -> Vec<DeviceInfo> {
    let n = tch::Cuda::device_count().max(0) as usize;
    // Beside CUDA devices the CPU's peak is not measured here: a CUDA run (or its worker) lists the devices to
    // find its own and would pay for a CPU measurement it never uses.
    let mut v = vec![cpu_info(n == 0)];
    v.extend((0..n).map(cuda_info));
    v
}

fn dotted(v: i64, parts: &[i64]) -> String {
    // parts are the divisors of the encoding, e.g. [1000, 10] for CUDA 13000 -> 13.0.
    let mut out = Vec::new();
    let mut rest = v;
    for &d in parts {
        out.push((rest / d).to_string());
        rest %= d;
    }
    out.push(rest.to_string());
    out.join(".")
}

/// Library versions of this backend: libtorch, tch, CUDA runtime and cuDNN (when CUDA is usable), threads.
pub fn versions(device: Device) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    // The libtorch loaded at run time (a bundle runs on the machine's own libraries, not the build's); the
    // compiled-in version and the build's directory only where the library cannot say.
    let linked = shim::linked_torch().ok();
    let compiled = shim::torch_version();
    v.insert("libtorch".into(), linked.as_ref().map_or_else(|| compiled.clone(), |l| l.version.clone()));
    if linked.as_ref().is_some_and(|l| l.version != compiled) {
        v.insert("libtorch_compiled".into(), compiled);
    }
    v.insert("tch".into(), env!("TRAINBENCH_TCH_TCH_VERSION").into());
    v.insert("torch_threads".into(), tch::get_num_threads().to_string());
    let lib = linked.and_then(|l| Path::new(&l.library).parent().map(|d| d.display().to_string()));
    v.insert("libtorch_lib".into(), lib.unwrap_or_else(|| env!("TRAINBENCH_TCH_LIBTORCH_LIB").into()));
    // ATen's CPU kernel level: what libtorch itself reports of the CPU (the manifest's `cpu` has the flags).
    if let Ok(cap) = shim::cpu_capability() {
        v.insert("libtorch_cpu_capability".into(), cap);
    }
    if matches!(device, Device::Cuda(_)) {
        match shim::cuda_versions() {
            Ok((cudart, cudnn)) => {
                if cudart > 0 {
                    // CUDART_VERSION = 1000 * major + 10 * minor.
                    v.insert("cuda".into(), shim::cuda_version_text(cudart));
                }
                if cudnn > 0 {
                    // cuDNN >= 9: 10000 * major + 100 * minor + patch.
                    v.insert("cudnn".into(), dotted(cudnn, &[10000, 100]));
                }
            }
            Err(e) => {
                v.insert("cuda".into(), format!("unknown ({e})"));
            }
        }
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        assert_eq!(to_tch(DeviceSelector::Cpu).unwrap(), Device::Cpu);
        assert!(matches!(to_tch("wgpu".parse().unwrap()), Err(BackendError::Device { .. })));
        assert_eq!(dotted(91300, &[10000, 100]), "9.13.0");
        assert_eq!(shim::cuda_version_text(13000), "13.0");
        assert_eq!(shim::cuda_version_text(12040), "12.4");
        // The refusal without a CUDA device says why, with the versions it can read.
        let why = no_cuda_reason();
        assert!(why.starts_with("libtorch sees no CUDA device"), "{why}");
        if shim::cuda_driver_version().unwrap().is_none() {
            assert!(why.contains("no NVIDIA driver"), "{why}");
        }
    }
}
