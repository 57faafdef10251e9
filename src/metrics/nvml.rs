//! NVIDIA GPU sampler through NVML (nvml-wrapper, which loads `libnvidia-ml` at run time): utilisation, memory
//! used (device and this process), power, total energy, SM clock and temperature. Without a driver every
//! figure degrades to `unavailable: <reason>` and nothing fails.
//!
//! Which NVML device a `cuda:N` run uses is decided by [`super::nvml_map::map`]: the backend's `pci_bus_id`
//! detail (the tch backend reports it from the CUDA driver), else only rules that are exact; an unmappable
//! device leaves the GPU figures unavailable with the reason rather than sampling another GPU. Under MIG the
//! figures are the parent GPU's (NVML has no per-instance power or memory use): the result says so.

use std::sync::OnceLock;

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::{Device, Nvml};

use trainbench_contract::DeviceSelector;

use super::nvml_map::{NvmlEntry, NvmlMapError, map};
use crate::result::{GpuDevice, GpuInventory, GpuUtilization, Sampled};

/// One reading of a GPU's counters; a field is `None` when the device does not support it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuSample {
    /// Seconds since the collectors started.
    pub t: f64,
    /// Percent of the last sample period a kernel was running.
    pub util_gpu: Option<u32>,
    /// Percent of the last sample period device memory was read or written.
    pub util_mem: Option<u32>,
    /// Device memory used by all processes, bytes.
    pub mem_used: Option<u64>,
    /// Device memory NVML attributes to this process, bytes.
    pub process_mem: Option<u64>,
    /// Power draw, milliwatts.
    pub power_mw: Option<u32>,
    /// Energy counter since the driver loaded, millijoules (Volta and later).
    pub energy_mj: Option<u64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// GPU temperature, degrees Celsius.
    pub temp_c: Option<u32>,
}

/// Which GPU to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTarget {
    /// CUDA ordinal from the device selector (`cuda:N`).
    pub cuda_ordinal: u32,
    /// PCI bus id reported by the backend, if any (exact match).
    pub pci_bus_id: Option<String>,
    /// The device is a MIG instance (the backend's `mig` detail): NVML's figures are its whole GPU's.
    pub mig: bool,
}

impl GpuTarget {
    /// The target for a device selector (`cuda`, `cuda:N`); `None` for non-CUDA devices.
    pub fn from_selector(selector: DeviceSelector, pci_bus_id: Option<String>) -> Option<Self> {
        let cuda_ordinal = u32::try_from(selector.cuda_ordinal()?).ok()?;
        Some(Self { cuda_ordinal, pci_bus_id, mig: false })
    }

    /// The target for a device selector and the backend's description of that device (its `pci_bus_id` and
    /// `mig` details).
    pub fn for_device(selector: DeviceSelector, device: Option<&trainbench_contract::DeviceInfo>) -> Option<Self> {
        let detail = |k: &str| device.and_then(|d| d.details.get(k).cloned());
        let mut t = Self::from_selector(selector, detail("pci_bus_id"))?;
        t.mig = detail("mig").is_some_and(|m| m == "true");
        Some(t)
    }
}

/// What the result says of NVML's figures of a run on a MIG instance.
pub const MIG_SCOPE: &str = "gpu-wide: the run used a MIG instance; NVML's utilisation, memory and power figures \
                             are its whole GPU's, other instances' work included";

/// Why NVML could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NvmlError {
    /// The NVML library could not be loaded or initialised (the library's message).
    #[error("NVML is not available ({0}); no NVIDIA driver on this machine?")]
    Missing(String),
    /// The run's device is not one NVML can be told to be.
    #[error(transparent)]
    NoDevice(#[from] NvmlMapError),
    /// An NVML call on a device failed.
    #[error("NVML device {index}: {message}")]
    CallFailed {
        /// The NVML index.
        index: u32,
        /// NVML's message.
        message: String,
    },
    /// The window holds too few samples to measure power.
    #[error("too few NVML samples to measure power over the measured window")]
    TooFewSamples,
    /// The device reports power by neither means.
    #[error("the device reports neither an energy counter nor enough power samples")]
    NoPowerReading,
}

fn init() -> Result<Nvml, NvmlError> {
    Nvml::init().map_err(|e| NvmlError::Missing(e.to_string()))
}

/// Every GPU NVML lists, with its PCI bus id and UUID.
fn entries(nvml: &Nvml) -> Vec<NvmlEntry> {
    (0..nvml.device_count().unwrap_or(0))
        .filter_map(|i| {
            let d = nvml.device_by_index(i).ok()?;
            Some(NvmlEntry {
                index: i,
                pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                uuid: d.uuid().unwrap_or_default(),
            })
        })
        .collect()
}

/// Open the NVML device a target designates (see [`super::nvml_map::map`] for the rules).
pub fn resolve<'n>(nvml: &'n Nvml, target: &GpuTarget) -> Result<Device<'n>, NvmlError> {
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let pci_order = std::env::var("CUDA_DEVICE_ORDER").is_ok_and(|v| v.trim() == "PCI_BUS_ID");
    let (index, _how) =
        map(target.cuda_ordinal, target.pci_bus_id.as_deref(), &entries(nvml), visible.as_deref(), pci_order)?;
    nvml.device_by_index(index).map_err(|e| NvmlError::CallFailed { index, message: e.to_string() })
}

/// Load NVML for a sampling thread (which then resolves its device with [`resolve`] and keeps it).
pub fn open() -> Result<Nvml, NvmlError> {
    init()
}

/// Read every counter of `d` now; `pid` is this process (for its share of device memory).
pub fn read(d: &Device<'_>, pid: u32, t: f64) -> GpuSample {
    let util = d.utilization_rates().ok();
    let process_mem = d.running_compute_processes().ok().and_then(|ps| {
        ps.iter().find(|p| p.pid == pid).and_then(|p| match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        })
    });
    GpuSample {
        t,
        util_gpu: util.as_ref().map(|u| u.gpu),
        util_mem: util.as_ref().map(|u| u.memory),
        mem_used: d.memory_info().ok().map(|m| m.used),
        process_mem,
        power_mw: d.power_usage().ok(),
        energy_mj: d.total_energy_consumption().ok(),
        sm_clock_mhz: d.clock_info(Clock::SM).ok(),
        temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
    }
}

/// The driver and GPUs NVML sees (computed once per process).
pub fn inventory() -> Sampled<GpuInventory> {
    static CACHE: OnceLock<Sampled<GpuInventory>> = OnceLock::new();
    CACHE
        .get_or_init(|| match init() {
            Err(reason) => Sampled::Unavailable { reason: reason.to_string() },
            Ok(nvml) => {
                let devices = (0..nvml.device_count().unwrap_or(0))
                    .filter_map(|i| {
                        let d = nvml.device_by_index(i).ok()?;
                        Some(GpuDevice {
                            index: i,
                            name: d.name().unwrap_or_else(|_| "unknown".into()),
                            memory_bytes: d.memory_info().map(|m| m.total).unwrap_or(0),
                            pci_bus_id: d.pci_info().ok().map(|p| p.bus_id),
                        })
                    })
                    .collect();
                let cuda = nvml.sys_cuda_driver_version().ok().map(|v| {
                    format!(
                        "{}.{}",
                        nvml_wrapper::cuda_driver_version_major(v),
                        nvml_wrapper::cuda_driver_version_minor(v)
                    )
                });
                Sampled::Available(GpuInventory {
                    driver_version: nvml.sys_driver_version().unwrap_or_else(|_| "unknown".into()),
                    cuda_driver_version: cuda,
                    devices,
                })
            }
        })
        .clone()
}

/// Samples to summarise for the window `[start, end]`: those inside it, or, when sampling was too sparse to put
/// one inside, the nearest one on each side.
fn window(samples: &[GpuSample], start: f64, end: f64) -> &[GpuSample] {
    let first = samples.iter().rposition(|s| s.t <= start).unwrap_or(0);
    let last = samples.iter().position(|s| s.t >= end).unwrap_or(samples.len().saturating_sub(1));
    let inside: Vec<usize> = (first..=last).filter(|&i| samples[i].t >= start && samples[i].t <= end).collect();
    match (inside.first(), inside.last()) {
        (Some(&a), Some(&b)) => &samples[a..=b],
        _ if last >= first && !samples.is_empty() => &samples[first..=last],
        _ => &[],
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    crate::stats::mean(&v)
}

/// Utilisation, memory, clock and temperature over `[start, end]`.
pub fn summarize_utilization(samples: &[GpuSample], index: u32, start: f64, end: f64) -> Sampled<GpuUtilization> {
    let w = window(samples, start, end);
    let Some(util) = mean(w.iter().filter_map(|s| s.util_gpu.map(f64::from))) else {
        return Sampled::unavailable("NVML reported no utilisation samples for the measured window");
    };
    let max_f = |f: fn(&GpuSample) -> Option<f64>| w.iter().filter_map(f).fold(f64::NAN, f64::max);
    Sampled::Available(GpuUtilization {
        device_index: index,
        samples: w.len(),
        utilization_mean_percent: util,
        utilization_max_percent: max_f(|s| s.util_gpu.map(f64::from)),
        memory_utilization_mean_percent: mean(w.iter().filter_map(|s| s.util_mem.map(f64::from))).unwrap_or(0.0),
        memory_used_max_bytes: w.iter().filter_map(|s| s.mem_used).max().unwrap_or(0),
        process_memory_max_bytes: w.iter().filter_map(|s| s.process_mem).max(),
        sm_clock_mean_mhz: mean(w.iter().filter_map(|s| s.sm_clock_mhz.map(f64::from))).unwrap_or(0.0),
        temperature_max_c: w.iter().filter_map(|s| s.temp_c.map(f64::from)).fold(0.0, f64::max),
        scope: None,
    })
}

/// Mean and peak power over a window, and how the mean was obtained.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerSummary {
    /// Mean power, watts.
    pub mean_w: f64,
    /// Highest sampled power, watts.
    pub max_w: f64,
    /// `counter` (energy counter difference / time) or `integrated` (trapezoid over power samples).
    pub method: &'static str,
}

/// Mean power over `[start, end]`: from the energy counter when the device has one (exact), else by
/// integrating the sampled power with the trapezoid rule.
pub fn summarize_power(samples: &[GpuSample], start: f64, end: f64) -> Result<PowerSummary, NvmlError> {
    let first = samples.iter().rposition(|s| s.t <= start).unwrap_or(0);
    let last = samples.iter().position(|s| s.t >= end).unwrap_or(samples.len().saturating_sub(1));
    if samples.is_empty() || last <= first {
        return Err(NvmlError::TooFewSamples);
    }
    let bracket = &samples[first..=last];
    let max_w = bracket.iter().filter_map(|s| s.power_mw).map(|p| f64::from(p) / 1000.0).fold(f64::NAN, f64::max);
    let (a, b) = (&bracket[0], &bracket[bracket.len() - 1]);
    let dt = b.t - a.t;
    if let (Some(ea), Some(eb)) = (a.energy_mj, b.energy_mj) {
        if dt > 0.0 && eb >= ea {
            let mean_w = (eb - ea) as f64 / 1000.0 / dt;
            return Ok(PowerSummary { mean_w, max_w: if max_w.is_nan() { mean_w } else { max_w }, method: "counter" });
        }
    }
    let pts: Vec<(f64, f64)> =
        bracket.iter().filter_map(|s| s.power_mw.map(|p| (s.t, f64::from(p) / 1000.0))).collect();
    let span = pts.last().map(|l| l.0).unwrap_or(0.0) - pts.first().map(|f| f.0).unwrap_or(0.0);
    if pts.len() < 2 || span <= 0.0 {
        return Err(NvmlError::NoPowerReading);
    }
    let area: f64 = pts.windows(2).map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0).sum();
    Ok(PowerSummary { mean_w: area / span, max_w, method: "integrated" })
}

#[cfg(test)]
#[path = "nvml_tests.rs"]
mod tests;
