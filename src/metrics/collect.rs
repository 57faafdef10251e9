//! Background collectors: one thread per source (process CPU, NVML GPU) sampling at a fixed period from
//! before a run starts until it ends, with timestamps relative to a common origin so the runner can cut out
//! the measured window afterwards. Samplers never touch the training thread.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cpu::{self, CpuSample};
use super::nvml::{self, GpuSample, GpuTarget};

/// What to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorConfig {
    /// Sampling period.
    pub interval: Duration,
    /// Sample process CPU time and resident memory.
    pub cpu: bool,
    /// Sample this GPU through NVML.
    pub gpu: Option<GpuTarget>,
}

/// Running collectors; call [`Collectors::stop`] to end them and get their samples.
#[derive(Debug)]
pub struct Collectors {
    origin: Instant,
    stop: Vec<Sender<()>>,
    cpu: Option<JoinHandle<Vec<CpuSample>>>,
    gpu: Option<JoinHandle<GpuOutcome>>,
    gpu_scope: Option<String>,
}

/// NVML index of the sampled GPU and its samples, or why there are none.
pub type GpuOutcome = Result<(u32, Vec<GpuSample>), String>;

/// Samples gathered over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CollectorReport {
    /// Process CPU samples, or why there are none.
    pub cpu: Option<Result<Vec<CpuSample>, String>>,
    /// NVML index and GPU samples, or why there are none; `None` when no GPU was asked for.
    pub gpu: Option<GpuOutcome>,
    /// What the GPU samples cover when it is more than the run's device ([`nvml::MIG_SCOPE`]).
    pub gpu_scope: Option<String>,
}

/// Sample with `read` every `interval` until a message (or hang-up) arrives on the stop channel; always
/// samples once at stop. `first` is the sample taken at start (by the caller, when it must precede the run).
fn sample_loop<T>(
    interval: Duration,
    stop: mpsc::Receiver<()>,
    first: Option<T>,
    mut read: impl FnMut() -> Option<T>,
) -> Vec<T> {
    let mut out: Vec<T> = first.into_iter().collect();
    loop {
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => out.extend(read()),
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                out.extend(read());
                return out;
            }
        }
    }
}

impl Collectors {
    /// Start the configured samplers. NVML is opened on its own thread; failure to open it is reported by
    /// [`Collectors::stop`], not here.
    pub fn start(config: &CollectorConfig) -> Self {
        let origin = Instant::now();
        let interval = config.interval.max(Duration::from_millis(1));
        let mut stop = Vec::new();
        let cpu = config.cpu.then(|| {
            let (tx, rx) = mpsc::channel();
            stop.push(tx);
            // The first sample is read here, before the run starts: a sampler thread that is scheduled late (two
            // busy training threads on two cores) would otherwise take it after a short run had already ended,
            // leaving the window unbracketed.
            let first = cpu::read_cpu(origin.elapsed().as_secs_f64());
            std::thread::spawn(move || {
                sample_loop(interval, rx, first, || cpu::read_cpu(origin.elapsed().as_secs_f64()))
            })
        });
        let gpu = config.gpu.clone().map(|target| {
            let (tx, rx) = mpsc::channel();
            stop.push(tx);
            std::thread::spawn(move || {
                let nvml = nvml::open().map_err(|e| e.to_string())?;
                let device = nvml::resolve(&nvml, &target).map_err(|e| e.to_string())?;
                let index = device.index().unwrap_or(target.cuda_ordinal);
                let pid = std::process::id();
                let read = || Some(nvml::read(&device, pid, origin.elapsed().as_secs_f64()));
                let first = read();
                Ok((index, sample_loop(interval, rx, first, read)))
            })
        });
        let gpu_scope = config.gpu.as_ref().filter(|t| t.mig).map(|_| nvml::MIG_SCOPE.to_string());
        Self { origin, stop, cpu, gpu, gpu_scope }
    }

    /// The instant sample timestamps are measured from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Stop all samplers and collect their samples.
    pub fn stop(self) -> CollectorReport {
        for tx in &self.stop {
            let _ = tx.send(());
        }
        let joined = |what: &str| format!("the {what} sampler thread panicked");
        CollectorReport {
            cpu: self.cpu.map(|h| {
                h.join().map_err(|_| joined("CPU")).and_then(|v| {
                    if v.is_empty() { Err("process CPU time cannot be read on this platform".into()) } else { Ok(v) }
                })
            }),
            gpu: self.gpu.map(|h| h.join().unwrap_or_else(|_| Err(joined("GPU")))),
            gpu_scope: self.gpu_scope,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cpu_sampler_runs_at_its_period_and_stops() {
        let c = Collectors::start(&CollectorConfig { interval: Duration::from_millis(10), cpu: true, gpu: None });
        std::thread::sleep(Duration::from_millis(120));
        let report = c.stop();
        let samples = report.cpu.unwrap().unwrap();
        // About 12 ticks plus the start and stop samples; generous bounds for a loaded machine.
        assert!(samples.len() >= 4 && samples.len() <= 20, "{}", samples.len());
        assert!(samples.windows(2).all(|w| w[1].t >= w[0].t));
        assert!(report.gpu.is_none());
    }

    #[test]
    fn the_first_cpu_sample_precedes_the_run_and_the_last_follows_it() {
        // However briefly a run lasts, and however late the sampler thread is scheduled, two samples bracket it.
        let c = Collectors::start(&CollectorConfig { interval: Duration::from_secs(10), cpu: true, gpu: None });
        let run_start = c.origin().elapsed().as_secs_f64();
        let run_end = c.origin().elapsed().as_secs_f64();
        let samples = c.stop().cpu.unwrap().unwrap();
        assert_eq!(samples.len(), 2);
        assert!(samples[0].t <= run_start && samples[1].t >= run_end, "{samples:?}");
    }

    #[test]
    fn gpu_sampler_reports_why_it_is_missing() {
        // A GPU no machine has (PCI bus ff, device 1f, function 7 is never a GPU): without NVML the sampler
        // says NVML is missing, with NVML that it lists no such GPU; never samples of some other device.
        let bus = "00000000:FF:1F.7";
        let target = GpuTarget { cuda_ordinal: 0, pci_bus_id: Some(bus.into()), mig: false };
        let c =
            Collectors::start(&CollectorConfig { interval: Duration::from_millis(5), cpu: false, gpu: Some(target) });
        match c.stop().gpu.unwrap() {
            Ok((index, samples)) => panic!("sampled NVML device {index} for a GPU that is not there: {samples:?}"),
            Err(reason) => assert!(
                reason.starts_with("NVML is not available") || reason == format!("NVML lists no GPU at PCI {bus}"),
                "{reason}"
            ),
        }
    }
}
