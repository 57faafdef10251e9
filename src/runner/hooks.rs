//! [`TestHooks`]: the runner's hooks for trainbench's own tests (a stop mid-run, a short hang grace, a mock
//! backend that crashes, hangs or fails, a backend taken for one left out of the build), held apart from the
//! options real runs use, and the one test-only channel that carries them to worker processes
//! ([`TestHooks::ENV`]: never the worker job).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use trainbench_contract::BackendKind;
use trainbench_contract::mock::MockConfig;
use trainbench_contract::{BackendError, RunPlan};

use super::protocol::HUNG_GRACE;

/// Hooks for trainbench's own tests, not for benchmarks: the default (every hook off) is a real run. They are
/// one value, [`super::RunnerOptions::test_hooks`]; `trainbench run` takes them as the hidden `--test-hooks
/// <JSON>` argument, e.g. `--test-hooks '{"mock_hang_repeat": 2, "hung_grace_s": 1}'`, and hands them to the
/// worker processes it starts in the variable [`TestHooks::ENV`] ([`TestHooks::pass_to`]), which a worker reads
/// in one place ([`TestHooks::inherited`]). The production job ([`super::protocol::WorkerJob`]) carries none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TestHooks {
    /// Request a stop, as Ctrl-C would, after this many iterations (warm-up included) of the run at this plan
    /// index: `[index, iterations]`.
    pub interrupt_at: Option<(usize, u64)>,
    /// Seconds a worker may stay silent past its runs' timeout before it is killed as hung (default:
    /// [`HUNG_GRACE`]). With `mock_hang_repeat` set, only that repeat's worker gets it and every other worker
    /// keeps [`HUNG_GRACE`]: a healthy worker that is slow to start on a loaded machine is never taken for a hang.
    pub hung_grace_s: Option<f64>,
    /// Mock backend: abort the process running this repeat, as a crash inside a backend library would.
    pub mock_abort_repeat: Option<u32>,
    /// Mock backend: never return in this repeat, as a hung backend call would.
    pub mock_hang_repeat: Option<u32>,
    /// Mock backend: fail every run of this repeat with a framework error.
    pub mock_fail_repeat: Option<u32>,
    /// Data-parallel runs: `[repeat, rank, seconds]`: that rank's process aborts this many seconds into its run
    /// of that repeat, as a rank that crashes mid-run would.
    pub abort_rank: Option<(u32, usize, f64)>,
    /// Data-parallel runs: `[repeat, rank]`: that rank's runs of that repeat end out of memory as they start
    /// (the backend's typed error), as a rank whose device cannot hold its slice of the batch would.
    pub oom_rank: Option<(u32, usize)>,
    /// Treat this backend (`"tch"`, `"wgpu"`) as left out of the build: the suite stops before any run with the
    /// error a build without its feature gives, so that path is tested in builds that have every backend.
    pub backend_not_built: Option<BackendKind>,
}

/// Why test hooks could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    /// The text is not the hooks' JSON (an unknown key, a wrong type).
    #[error("--test-hooks: {0}")]
    NotJson(#[source] serde_json::Error),
    /// `hung_grace_s` is negative or not a number.
    #[error("--test-hooks: `hung_grace_s` must be a number of seconds, at least 0, not {0}")]
    BadGrace(f64),
    /// The hooks handed to this worker through `TRAINBENCH_TEST_HOOKS` are bad.
    #[error("TRAINBENCH_TEST_HOOKS: {0}")]
    Inherited(#[source] Box<HooksError>),
}

impl TestHooks {
    /// The environment variable that hands the hooks, as JSON, to the worker processes of a run (and, through
    /// their launcher, to every rank): set by the parent only when some hook is on.
    pub const ENV: &'static str = "TRAINBENCH_TEST_HOOKS";

    /// Hand these hooks to the worker process `command` starts ([`TestHooks::ENV`]); with every hook off, make
    /// sure it inherits none.
    pub fn pass_to(&self, command: &mut std::process::Command) {
        match serde_json::to_string(self) {
            Ok(json) if *self != TestHooks::default() => command.env(Self::ENV, json),
            _ => command.env_remove(Self::ENV),
        };
    }

    /// The hooks this worker process was handed ([`TestHooks::ENV`]); all off when the variable is not set.
    pub fn inherited() -> Result<Self, HooksError> {
        match std::env::var(Self::ENV) {
            Ok(json) => Self::from_json(&json).map_err(|e| HooksError::Inherited(Box::new(e))),
            Err(_) => Ok(TestHooks::default()),
        }
    }

    /// The hooks written as JSON (the `--test-hooks` argument); an unknown key or a negative grace is an error.
    pub fn from_json(text: &str) -> Result<Self, HooksError> {
        let hooks: TestHooks = serde_json::from_str(text).map_err(HooksError::NotJson)?;
        match hooks.hung_grace_s {
            Some(s) if !(s.is_finite() && s >= 0.0) => Err(HooksError::BadGrace(s)),
            _ => Ok(hooks),
        }
    }

    /// How long the worker of `repeat` may stay silent past its runs' timeout.
    pub fn hung_grace(&self, repeat: u32) -> Duration {
        if self.mock_hang_repeat.is_some_and(|hung| hung != repeat) {
            return HUNG_GRACE;
        }
        self.hung_grace_s.filter(|s| s.is_finite() && *s >= 0.0).map_or(HUNG_GRACE, Duration::from_secs_f64)
    }

    /// The out-of-memory error rank `rank` meets in `plan` ([`TestHooks::oom_rank`]), if any.
    pub fn rank_out_of_memory(&self, plan: &RunPlan, rank: usize) -> Option<BackendError> {
        (self.oom_rank == Some((plan.repeat, rank))).then(|| BackendError::OutOfMemory {
            batch_size: plan.batch_size,
            message: format!("out of memory on rank {rank} (test hook)"),
        })
    }

    /// `mock` with the mock backend's hooks applied.
    pub fn mock_config(&self, mock: &MockConfig) -> MockConfig {
        MockConfig {
            abort_in_repeat: self.mock_abort_repeat.or(mock.abort_in_repeat),
            hang_in_repeat: self.mock_hang_repeat.or(mock.hang_in_repeat),
            fail_in_repeat: self.mock_fail_repeat.or(mock.fail_in_repeat),
            ..mock.clone()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hooks_read_from_json_and_default_to_off() {
        assert_eq!(TestHooks::from_json("{}").unwrap(), TestHooks::default());
        let h = TestHooks::from_json(
            r#"{"interrupt_at": [1, 10], "hung_grace_s": 1.5, "mock_abort_repeat": 2, "mock_fail_repeat": 1}"#,
        )
        .unwrap();
        assert_eq!(h.interrupt_at, Some((1, 10)));
        assert_eq!(h.hung_grace(0), Duration::from_millis(1500));
        assert_eq!(h.mock_config(&MockConfig::default()).abort_in_repeat, Some(2));
        assert_eq!(h.mock_config(&MockConfig::default()).fail_in_repeat, Some(1));
        assert_eq!(TestHooks::default().hung_grace(0), HUNG_GRACE);
        // With a repeat told to hang, only its worker gets the short grace.
        let h = TestHooks::from_json(r#"{"mock_hang_repeat": 2, "hung_grace_s": 1}"#).unwrap();
        assert_eq!((h.hung_grace(2), h.hung_grace(0)), (Duration::from_secs(1), HUNG_GRACE));
        let h = TestHooks::from_json(r#"{"backend_not_built": "tch"}"#).unwrap();
        assert_eq!(h.backend_not_built, Some(BackendKind::Tch));
        assert!(TestHooks::from_json(r#"{"mock_abort": 1}"#).unwrap_err().to_string().contains("unknown field"));
        assert!(TestHooks::from_json(r#"{"hung_grace_s": -1}"#).is_err());
        let oom = TestHooks::from_json(r#"{"oom_rank": [0, 1]}"#).unwrap();
        let plan = RunPlan::for_tests("p", 2);
        assert!(matches!(oom.rank_out_of_memory(&plan, 1), Some(BackendError::OutOfMemory { batch_size: 4, .. })));
        assert_eq!(oom.rank_out_of_memory(&plan, 0), None);
    }

    #[test]
    fn hooks_reach_a_worker_in_their_variable_only_when_some_are_on() {
        let var = |c: &std::process::Command| {
            c.get_envs().find(|(k, _)| *k == TestHooks::ENV).map(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
        };
        let mut c = std::process::Command::new("true");
        TestHooks::default().pass_to(&mut c);
        assert_eq!(var(&c), Some(None), "removed, not inherited");
        let hooks = TestHooks { mock_fail_repeat: Some(1), hung_grace_s: Some(0.5), ..TestHooks::default() };
        hooks.pass_to(&mut c);
        let json = var(&c).flatten().unwrap();
        assert_eq!(TestHooks::from_json(&json).unwrap(), hooks);
    }
}
