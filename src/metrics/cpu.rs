//! Process CPU sampler: CPU time (user + system, all threads) from `getrusage(RUSAGE_SELF)` and resident memory
//! from `/proc/self/statm`, read on demand; the background thread in `collectors` calls [`read_cpu`].
//!
//! Utilisation over a window is `ΔCPU time / (Δwall time x cores)` (TBD's definition: summed busy time of all
//! cores over cores x elapsed time), with `cores` the logical cores the process may use
//! (`std::thread::available_parallelism`, which honours affinity masks and cgroup quotas).

use crate::result::{CpuUtilization, Sampled};

/// One reading of the process's CPU counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    /// Seconds since the collectors started.
    pub t: f64,
    /// Process CPU time (user + system) so far, seconds.
    pub cpu_s: f64,
    /// Resident set size, bytes (`None` where `/proc/self/statm` is missing).
    pub rss_bytes: Option<u64>,
}

/// Logical cores available to this process (at least 1).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Process CPU time (user + system of all threads, including finished ones), seconds.
#[cfg(unix)]
pub fn process_cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `rusage` into the pointer we pass, which points at enough zeroed storage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `getrusage` returned 0, so the struct is initialised (and it was zeroed before anyway).
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Some(tv(usage.ru_utime) + tv(usage.ru_stime))
}

/// Process CPU time; unavailable on this platform.
#[cfg(not(unix))]
pub fn process_cpu_seconds() -> Option<f64> {
    None
}

/// Resident set size from `/proc/self/statm` (second field, in pages).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

#[cfg(unix)]
fn page_size() -> u64 {
    // SAFETY: `sysconf` has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 { v as u64 } else { 4096 }
}

#[cfg(not(unix))]
fn page_size() -> u64 {
    4096
}

/// Read the counters now, stamping them with `t`; `None` when CPU time cannot be read here.
pub fn read_cpu(t: f64) -> Option<CpuSample> {
    Some(CpuSample { t, cpu_s: process_cpu_seconds()?, rss_bytes: resident_bytes() })
}

/// Summarise the samples over `[start, end]` (seconds since the collectors started).
///
/// Utilisation uses the last sample at or before `start` and the first at or after `end` (so the window is
/// covered even between sampling ticks); memory figures use every sample inside that bracket.
pub fn summarize(samples: &[CpuSample], start: f64, end: f64, cores: usize) -> Sampled<CpuUtilization> {
    let first = samples.iter().rposition(|s| s.t <= start).unwrap_or(0);
    let last = samples.iter().position(|s| s.t >= end).unwrap_or(samples.len().saturating_sub(1));
    let (Some(a), Some(b)) = (samples.get(first), samples.get(last)) else {
        return Sampled::unavailable("no CPU samples were taken");
    };
    let wall = b.t - a.t;
    if last <= first || wall <= 0.0 {
        return Sampled::unavailable("the measured window was shorter than one CPU sample");
    }
    let busy_cores = ((b.cpu_s - a.cpu_s) / wall).max(0.0);
    let rss: Vec<u64> = samples[first..=last].iter().filter_map(|s| s.rss_bytes).collect();
    let rss_mean = if rss.is_empty() { 0 } else { rss.iter().sum::<u64>() / rss.len() as u64 };
    Sampled::Available(CpuUtilization {
        cores,
        utilization: busy_cores / cores.max(1) as f64,
        busy_cores,
        rss_mean_bytes: rss_mean,
        rss_max_bytes: rss.iter().copied().max().unwrap_or(0),
        samples: last - first + 1,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn s(t: f64, cpu_s: f64, rss: u64) -> CpuSample {
        CpuSample { t, cpu_s, rss_bytes: Some(rss) }
    }

    #[test]
    fn utilisation_over_a_bracketed_window() {
        // 1.5 CPU-seconds per wall second on 2 cores between t = 1 and t = 3.
        let samples = [s(0.0, 0.0, 10), s(1.0, 1.0, 20), s(2.0, 2.5, 40), s(3.0, 4.0, 30), s(4.0, 4.1, 99)];
        let Sampled::Available(c) = summarize(&samples, 1.2, 2.8, 2) else { panic!() };
        // Bracket: the sample at t = 1 (last before 1.2) to t = 3 (first after 2.8).
        assert_eq!(c.busy_cores, 1.5);
        assert_eq!(c.utilization, 0.75);
        assert_eq!((c.rss_mean_bytes, c.rss_max_bytes, c.samples), (30, 40, 3));
    }

    /// CPU time of the calling thread alone, seconds: what other threads (other tests) do is not in it.
    fn thread_cpu_seconds() -> f64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `clock_gettime` writes a `timespec` into the pointer, which points at one.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID");
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn one_sample_costs_far_less_than_its_period() {
        // At the default 100 ms period, a sample must cost well under 1 ms of CPU (0.1% of one core) for the
        // sampler to stay out of the measurement; the budget here is 200 us. It is this thread's CPU time, which
        // neither other tests' threads nor waiting for a core on a loaded machine add to.
        let n = 200;
        let cpu0 = thread_cpu_seconds();
        for i in 0..n {
            std::hint::black_box(read_cpu(i as f64));
        }
        let per_sample = (thread_cpu_seconds() - cpu0) / n as f64;
        eprintln!("CPU sampler: {:.1} us of CPU per sample", per_sample * 1e6);
        assert!(per_sample < 200e-6, "{per_sample}");
    }

    #[test]
    fn too_few_samples_is_unavailable() {
        assert!(summarize(&[], 0.0, 1.0, 1).get().is_none());
        assert!(summarize(&[s(0.0, 0.0, 1)], 0.0, 1.0, 1).get().is_none());
    }

    #[test]
    fn live_counters_read_and_grow() {
        let a = read_cpu(0.0).unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = read_cpu(1.0).unwrap();
        assert!(b.cpu_s > a.cpu_s, "{} vs {}", b.cpu_s, a.cpu_s);
        if cfg!(target_os = "linux") {
            assert!(a.rss_bytes.unwrap() > 1 << 20);
        }
        assert!(available_cores() >= 1);
    }
}
