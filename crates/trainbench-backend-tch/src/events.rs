//! CUDA events through the shim (`c10::Event` with timing): phase boundaries recorded on the device's current
//! stream, so a step's phases are timed in device time without synchronising the host between them. A
//! [`StepEvents`] records a step's start and the end of each phase; after the step's single synchronisation
//! its boundaries give the copy, forward, backward, exchange and optimizer times.

use std::ffi::{c_char, c_int, c_void};

use tch::TchError;

use crate::shim::call;

unsafe extern "C" {
    fn tb_event_new(device: c_int, out: *mut *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_event_record(event: *mut c_void, device: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_event_synchronize(event: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_event_elapsed_ms(
        start: *mut c_void,
        end: *mut c_void,
        ms: *mut f64,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_event_free(event: *mut c_void);
}

fn shim_err(e: crate::shim::ShimError) -> TchError {
    TchError::Torch(format!("CUDA event: {}", e.0))
}

/// A timing event of one CUDA device, freed on drop.
pub struct Event {
    ptr: *mut c_void,
    device: c_int,
}

impl Event {
    /// A new, unrecorded event on CUDA device `device`.
    pub fn new(device: usize) -> Result<Self, TchError> {
        let mut ptr = std::ptr::null_mut();
        let device = c_int::try_from(device).map_err(|_| TchError::Kind("CUDA device index out of range".into()))?;
        // SAFETY: the out-pointer is a valid local; the shim stores a new `c10::Event*` there.
        call(|e, n| unsafe { tb_event_new(device, &mut ptr, e, n) }).map_err(shim_err)?;
        if ptr.is_null() {
            return Err(TchError::Torch("CUDA event: none was made".into()));
        }
        Ok(Self { ptr, device })
    }

    /// Enqueue the event on the device's current stream; returns at once.
    pub fn record(&self) -> Result<(), TchError> {
        // SAFETY: `ptr` is a live event made by `tb_event_new`.
        call(|e, n| unsafe { tb_event_record(self.ptr, self.device, e, n) }).map_err(shim_err)
    }

    /// Wait on the host until the device has passed the event.
    pub fn synchronize(&self) -> Result<(), TchError> {
        // SAFETY: as in `record`.
        call(|e, n| unsafe { tb_event_synchronize(self.ptr, e, n) }).map_err(shim_err)
    }

    /// Seconds of device time from `self` to `end` (both recorded and passed).
    pub fn seconds_to(&self, end: &Event) -> Result<f64, TchError> {
        let mut ms = 0.0;
        // SAFETY: two live events; the out-pointer is a valid local.
        call(|e, n| unsafe { tb_event_elapsed_ms(self.ptr, end.ptr, &mut ms, e, n) }).map_err(shim_err)?;
        Ok(ms / 1e3)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: `ptr` was made by `tb_event_new` and is freed exactly once.
        unsafe { tb_event_free(self.ptr) };
    }
}

/// The phases a step's boundaries end, in the order a plain step passes them (the WGAN step passes forward,
/// backward and optimizer twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The batch's copy onto the device.
    Copy = 0,
    /// The forward pass (and losses).
    Forward = 1,
    /// The backward pass.
    Backward = 2,
    /// The data-parallel exchange.
    Comm = 3,
    /// The optimizer step.
    Optimizer = 4,
}

/// Phase durations from a step's boundaries: `times[0]` the start, then each boundary `i` (seconds from the
/// start, non-decreasing up to clock noise) ending phase `phases[i - 1]`; each phase sums its intervals, never
/// negative. Indexed by [`Phase`].
pub fn accumulate(phases: &[Phase], times: &[f64]) -> [f64; 5] {
    let mut out = [0.0; 5];
    for (k, phase) in phases.iter().enumerate() {
        if let (Some(a), Some(b)) = (times.get(k), times.get(k + 1)) {
            out[*phase as usize] += (b - a).max(0.0);
        }
    }
    out
}

/// Events for the boundaries of one step on a CUDA device: a start, then one per phase ended, reused from
/// step to step (the pool grows to the longest step).
pub struct StepEvents {
    device: usize,
    pool: Vec<Event>,
    phases: Vec<Phase>,
}

impl StepEvents {
    /// An empty pool for CUDA device `device`.
    pub fn new(device: usize) -> Self {
        Self { device, pool: Vec::new(), phases: Vec::new() }
    }

    fn record(&mut self, at: usize) -> Result<(), TchError> {
        if self.pool.len() <= at {
            self.pool.push(Event::new(self.device)?);
        }
        self.pool[at].record()
    }

    /// Start a step: record its start boundary now.
    pub fn start(&mut self) -> Result<(), TchError> {
        self.phases.clear();
        self.record(0)
    }

    /// Record the boundary that ends `phase` now.
    pub fn mark(&mut self, phase: Phase) -> Result<(), TchError> {
        self.record(self.phases.len() + 1)?;
        self.phases.push(phase);
        Ok(())
    }

    /// Wait for the step's last boundary and return its phases in device time, indexed by [`Phase`].
    pub fn read(&self) -> Result<[f64; 5], TchError> {
        let n = self.phases.len();
        if n == 0 {
            return Ok([0.0; 5]);
        }
        self.pool[n].synchronize()?;
        let mut times = vec![0.0];
        for e in &self.pool[1..=n] {
            times.push(self.pool[0].seconds_to(e)?);
        }
        Ok(accumulate(&self.phases, &times))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn events_time_the_device_or_say_why_not() {
        match Event::new(0).and_then(|e| e.record().map(|()| e)) {
            // With a GPU: two events around some work give a non-negative device time.
            Ok(start) => {
                let x = tch::Tensor::ones([256, 256], (tch::Kind::Float, tch::Device::Cuda(0)));
                let _y = x.matmul(&x);
                let end = Event::new(0).unwrap();
                end.record().unwrap();
                end.synchronize().unwrap();
                assert!(start.seconds_to(&end).unwrap() >= 0.0);
            }
            // Without one: an error naming the event, not a crash.
            Err(e) => {
                assert!(!tch::Cuda::is_available());
                assert!(e.to_string().contains("CUDA event"), "{e}");
            }
        }
    }

    #[test]
    fn phases_sum_their_intervals() {
        use Phase::*;
        // A WGAN-like step: copy 1 ms, forward 3, backward 6, optimizer 2, then forward 1, backward 2, optimizer 1.
        let phases = [Copy, Forward, Backward, Optimizer, Forward, Backward, Optimizer];
        let times = [0.0, 0.001, 0.004, 0.010, 0.012, 0.013, 0.015, 0.016];
        let got = accumulate(&phases, &times);
        let want = [0.001, 0.004, 0.008, 0.0, 0.003];
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{got:?}");
        }
        // Clock noise that puts a boundary before the previous one never makes a negative phase.
        assert_eq!(accumulate(&[Copy, Forward], &[0.0, 0.002, 0.001])[Forward as usize], 0.0);
        // Fewer times than phases: the missing intervals count nothing.
        assert_eq!(accumulate(&[Copy, Forward], &[0.0, 0.002]), [0.002, 0.0, 0.0, 0.0, 0.0]);
    }
}
