//! How a training step's phases are timed. On the CPU every libtorch op is synchronous, so host clocks between
//! phases are true. On CUDA, synchronising the host between phases would stop the CPU from queueing the next
//! kernels while the device works and inflate the step; instead each phase boundary records a CUDA event on
//! the stream ([`crate::events`]) and the step ends with one synchronisation on its last event. Without phase
//! timing (`run.phase_timing = false`) a CUDA step only synchronises at its end; in the free-running window it
//! does not synchronise at all.

use std::time::Instant;

use tch::{Device, TchError};

use crate::events::{Phase, StepEvents};

enum Mode {
    /// Host clocks between phases (the CPU: ops are synchronous).
    Host,
    /// CUDA events at phase boundaries, one synchronisation at the step's end.
    Events(StepEvents),
    /// No phase times; synchronise CUDA device `sync` at the step's end when set.
    Untimed {
        /// The device to synchronise at each step's end, if any.
        sync: Option<usize>,
    },
}

/// The phase timer of a run's steps.
pub struct Clock {
    mode: Mode,
    last: Instant,
    host: [f64; 5],
}

impl Clock {
    fn with(mode: Mode) -> Self {
        Self { mode, last: Instant::now(), host: [0.0; 5] }
    }

    /// The clock of a run's warm-up and measured steps on `device`: host clocks on the CPU; on CUDA, events when
    /// `phase_timing`, else only the step's end synchronised.
    pub fn for_run(device: Device, phase_timing: bool) -> Self {
        match device {
            Device::Cuda(i) if phase_timing => Self::with(Mode::Events(StepEvents::new(i))),
            Device::Cuda(i) => Self::with(Mode::Untimed { sync: Some(i) }),
            _ => Self::with(Mode::Host),
        }
    }

    /// The clock of the free-running window: no timing and no synchronisation at all.
    pub fn free_running() -> Self {
        Self::with(Mode::Untimed { sync: None })
    }

    /// A step starts (after its wait for the batch).
    pub fn start(&mut self) -> Result<(), TchError> {
        self.last = Instant::now();
        self.host = [0.0; 5];
        match &mut self.mode {
            Mode::Events(e) => e.start(),
            _ => Ok(()),
        }
    }

    /// `phase` ends now.
    pub fn lap(&mut self, phase: Phase) -> Result<(), TchError> {
        match &mut self.mode {
            Mode::Host => {
                let now = Instant::now();
                self.host[phase as usize] += now.duration_since(self.last).as_secs_f64();
                self.last = now;
                Ok(())
            }
            Mode::Events(e) => e.mark(phase),
            Mode::Untimed { .. } => Ok(()),
        }
    }

    /// The step ends: wait for the device as the mode says and return the phase times (indexed by [`Phase`]),
    /// or `None` when phases are not timed.
    pub fn finish(&mut self) -> Result<Option<[f64; 5]>, TchError> {
        match &mut self.mode {
            Mode::Host => Ok(Some(self.host)),
            Mode::Events(e) => e.read().map(Some),
            Mode::Untimed { sync } => {
                if let Some(i) = *sync {
                    tch::Cuda::synchronize(i as i64);
                }
                Ok(None)
            }
        }
    }
}
