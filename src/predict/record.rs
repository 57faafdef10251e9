//! A run's own prediction: which hardware profile a run is predicted on, and the result's `prediction` section
//! made from the run's plan and topology, the graph, the input pipeline's measured throughput and that profile.
//!
//! The profile ([`RunProfile`]): one named with `trainbench run --hardware` is used for every run (a datasheet
//! profile is recorded as such, `calibrated = false`); otherwise this machine's calibrated profile
//! (`$TRAINBENCH_HARDWARE`, else `hardware/this-machine.toml`), but only for a run on the backend and device
//! its calibration measured (same backend, same device selector, same device name), since a calibration says
//! nothing about another backend's kernels or another device. Anything else leaves the section `absent` with
//! the reason.
//!
//! The input term: with a local dataset, the loader's own samples/s (measured before the run) gives the time
//! it takes for one device batch. Without reading threads the step waits for all of it; with them the batches
//! are read while the step computes, and the step waits only for what the batch time exceeds the rest of the
//! step by. The wait is added to T_data (the copy over the host link).

use std::path::Path;

use trainbench_contract::DeviceSelector;
use trainbench_graph::Graph;

use super::{Prediction, Setting, predict};
use crate::hardware::{Profile, ProfileValidator};
use crate::result::RunResult;
use crate::result::prediction::{
    PredictedBound, PredictedInput, PredictedInterval, PredictedPhases, PredictedShares, PredictionSection, ProfileRef,
    RecordedPrediction,
};

/// The hardware profile the runs of a `trainbench run` are predicted on, as it was found.
#[derive(Debug, Clone, PartialEq)]
pub enum RunProfile {
    /// Named with `--hardware`: every run is predicted on it, whatever its device.
    Given(Profile),
    /// This machine's calibrated profile: used for the runs on the backend and device it was calibrated on.
    ThisMachine(Profile),
    /// No profile: why (recorded in every result).
    Missing(String),
}

impl Default for RunProfile {
    fn default() -> Self {
        RunProfile::Missing("no hardware profile was given to the runner".into())
    }
}

impl RunProfile {
    /// This machine's calibrated profile under `dir` (see [`ProfileValidator::this_machine`]), or why there
    /// is none. A profile that does not validate is not used; the reason names its first problem.
    pub fn this_machine(validator: &ProfileValidator, dir: &Path) -> Self {
        match validator.this_machine(dir) {
            Ok(Some(p)) => RunProfile::ThisMachine(p),
            Ok(None) => RunProfile::Missing(format!(
                "no hardware profile: this machine has none (`${}` unset and no `{}`; write one with `trainbench \
                 calibrate --out {}`), and none was named with `run --hardware`",
                crate::hardware::ENV_VAR,
                crate::hardware::THIS_MACHINE,
                crate::hardware::THIS_MACHINE
            )),
            Err(d) => RunProfile::Missing(format!(
                "this machine's hardware profile is invalid: {}",
                d.first().map_or_else(|| "no diagnostics".into(), |d| format!("{}: {}", d.path, d.message))
            )),
        }
    }

    /// The profile to predict `result`'s run on, and how it was chosen; or why there is none for this run.
    fn for_run(&self, result: &RunResult) -> Result<(&Profile, &'static str), String> {
        match self {
            RunProfile::Given(p) => Ok((p, "--hardware")),
            RunProfile::Missing(why) => Err(why.clone()),
            RunProfile::ThisMachine(p) => {
                let Some(cal) = &p.file.calibration else {
                    return Err(format!(
                        "this machine's profile `{}` holds no calibration (datasheet figures); name it with \
                         `run --hardware` to predict on it anyway",
                        p.origin
                    ));
                };
                let same_device =
                    cal.device.parse::<DeviceSelector>().is_ok_and(|d| d.canonical() == result.plan.device.canonical());
                if cal.backend != result.backend || !same_device {
                    return Err(format!(
                        "this machine's profile `{}` was calibrated on {} {}, this run is on {} {}; calibrate this \
                         backend and device (`trainbench calibrate --backend {} --device {}`) or name a profile \
                         with `run --hardware`",
                        p.origin,
                        cal.backend,
                        cal.device,
                        result.backend,
                        result.plan.device,
                        result.backend,
                        result.plan.device
                    ));
                }
                if let Some(d) = result.environment.device.as_ref().filter(|d| d.name != p.file.device.name) {
                    return Err(format!(
                        "this machine's profile `{}` describes `{}`, this run's device is `{}`: recalibrate",
                        p.origin, p.file.device.name, d.name
                    ));
                }
                Ok((p, "this-machine"))
            }
        }
    }
}

/// The `prediction` section of `result`: its configuration, as its plan fixes it, predicted on `profile` for
/// `graph`.
pub fn section(profile: &RunProfile, graph: &Graph, result: &RunResult) -> PredictionSection {
    let absent = |reason: String| PredictionSection::Absent { reason };
    let (chosen, by) = match profile.for_run(result) {
        Ok(found) => found,
        Err(reason) => return absent(reason),
    };
    let mut p = match predict(graph, &Setting::of(&result.plan), &chosen.file) {
        Ok(p) => p,
        Err(e) => return absent(e.to_string()),
    };
    p.layers.clear();
    let input = input_term(&p, result);
    PredictionSection::Predicted(Box::new(recorded(chosen, by, &p, input)))
}

/// The input pipeline's term for a run reading a local dataset with a measured loader.
fn input_term(p: &Prediction, result: &RunResult) -> Option<PredictedInput> {
    let data = result.data.as_ref()?;
    let rate = data.loader.as_ref()?.samples_per_s;
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    let batch_s = p.per_device_batch as f64 / rate;
    let prefetched = data.workers > 0;
    let wait = if prefetched { (batch_s - p.step_time_s).max(0.0) } else { batch_s };
    Some(PredictedInput { loader_samples_per_s: rate, loader_batch_s: batch_s, prefetched, input_wait_s: wait })
}

fn recorded(profile: &Profile, by: &str, p: &Prediction, input: Option<PredictedInput>) -> RecordedPrediction {
    let wait = input.map_or(0.0, |i| i.input_wait_s);
    let ph = &p.phases;
    let data_s = ph.data_s + wait;
    let compute_s = ph.forward_s + ph.backward_s + ph.optimizer_s;
    let step = data_s + compute_s + ph.comm_s;
    let overlapped = match input {
        Some(i) if i.prefetched => p.step_time_overlapped_s.max(ph.data_s + i.loader_batch_s),
        Some(i) => p.step_time_overlapped_s + i.loader_batch_s,
        None => p.step_time_overlapped_s,
    };
    let share = |x: f64| if step > 0.0 { x / step } else { 0.0 };
    let cal = profile.file.calibration.as_ref();
    RecordedPrediction {
        profile: ProfileRef {
            name: profile.file.name.clone(),
            origin: profile.origin.clone(),
            chosen_by: by.to_string(),
            calibrated: cal.is_some(),
            calibrated_at: cal.map(|c| c.measured_at.clone()),
            calibrated_on: cal.map(|c| format!("{} {}", c.backend, c.device)),
        },
        model: super::MODEL_VERSION.to_string(),
        world_size: p.world_size,
        per_device_batch: p.per_device_batch,
        step_time_s: step,
        step_time_overlapped_s: overlapped,
        samples_per_s: if step > 0.0 { p.batch_size as f64 / step } else { 0.0 },
        phases: PredictedPhases {
            data_s,
            forward_s: ph.forward_s,
            backward_s: ph.backward_s,
            optimizer_s: ph.optimizer_s,
            comm_s: ph.comm_s,
        },
        shares: PredictedShares { data: share(data_s), compute: share(compute_s), comm: share(ph.comm_s) },
        bound: PredictedBound {
            compute_bound_s: p.bound.compute_bound_s,
            memory_bound_s: p.bound.memory_bound_s,
            overhead_s: p.bound.overhead_s,
        },
        comm_link: p.comm.link.clone(),
        comm_bytes_per_worker: p.comm.bytes_per_worker,
        input,
        // The prediction's relative range around this step (the input wait moves the step, not the range's width).
        interval: Some(PredictedInterval {
            level: p.interval.level,
            low_s: step * (-p.interval.log_half_width).exp(),
            high_s: step * p.interval.log_half_width.exp(),
        }),
    }
}
