//! The run loop of a rank of a data-parallel group: [`serve_ranked`] (the plans of a `trainbench worker --ranks`
//! job: servers serve, workers train, rank 0 reports) and [`run_as_ranks`] (`trainbench run` itself started on
//! every rank by an external launcher: `mpirun -n N trainbench run SPEC` or `srun` for CPU specs, `torchrun` for
//! CUDA specs).

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use trainbench_contract::RunPlan;

use super::ranks::{Engine, Ranks};
use super::worker::WorkerMessage;
use super::{Flow, Pass, Recorder, RunnerError, RunnerOptions, Suite, SuiteReport};
use crate::backends;
use crate::result::{RunOutcome, RunResult};

/// How a rank's part of a run ended badly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankFailureKind {
    /// The backend ran out of memory (its typed error, [`trainbench_contract::BackendError::OutOfMemory`]).
    OutOfMemory,
    /// The run failed otherwise, or the rank could not run its job.
    Failed,
    /// The rank's process ended badly without saying why (a crash, a signal): told by trainbench's launcher.
    Died,
}

/// A rank of a data-parallel group that could not finish its part: which rank, how, in which run, and why. The
/// rank (or, for a rank that died, trainbench's launcher) sends it to the parent on the worker protocol as a
/// [`WorkerMessage::RankFailed`] line, so the parent learns another rank's failure, out of memory included,
/// without reading text; the same is printed on stderr for people ([`std::fmt::Display`]: `trainbench rank N:
/// run `ID` failed: MESSAGE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFailure {
    /// The rank in its group.
    pub rank: usize,
    /// How it failed.
    pub kind: RankFailureKind,
    /// The run it was in (its id), if it was in one.
    #[serde(default)]
    pub run: Option<String>,
    /// The error as the rank saw it.
    pub message: String,
}

impl RankFailure {
    /// Rank `rank`'s failure in a run that ended with `result`; `None` when the run did not fail (completed,
    /// interrupted, skipped).
    pub fn of_result(rank: usize, result: &RunResult) -> Option<RankFailure> {
        let (kind, message) = match &result.outcome {
            RunOutcome::OutOfMemory { message, .. } => (RankFailureKind::OutOfMemory, message),
            RunOutcome::Failed { message } => (RankFailureKind::Failed, message),
            _ => return None,
        };
        Some(RankFailure { rank, kind, run: Some(result.plan.id.clone()), message: message.clone() })
    }
}

impl std::fmt::Display for RankFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.run {
            Some(run) => write!(f, "trainbench rank {}: run `{run}` failed: {}", self.rank, self.message),
            None => write!(f, "trainbench rank {}: {}", self.rank, self.message),
        }
    }
}

/// One rank's part of its group's runs: servers serve, workers train through a [`Pass`] with the group, rank 0
/// prints each result; a run that did not complete ends the group, the other ranks first telling the parent how
/// theirs failed ([`WorkerMessage::RankFailed`] through `say`, and a line on stderr).
pub(crate) fn serve_ranked(
    ranks: &RefCell<Ranks>,
    suite: &Suite,
    opts: &RunnerOptions,
    backend: &mut dyn trainbench_contract::Backend,
    indices: &[usize],
    ooms: &mut Vec<RunPlan>,
    say: &mut dyn FnMut(&WorkerMessage) -> std::io::Result<()>,
) -> bool {
    let rank = ranks.borrow().rank();
    for &i in indices {
        let Some(plan) = suite.plans.get(i) else { continue };
        if ranks.borrow().is_server(plan) {
            if backend.check(plan, &suite.graph).is_err() {
                continue;
            }
            let served = ranks.borrow_mut().serve(plan, &suite.graph);
            if let Err(e) = served {
                let message = format!("parameter server: {e}");
                let failure = RankFailure { rank, kind: RankFailureKind::Failed, run: Some(plan.id.clone()), message };
                eprintln!("{failure}");
                let _ = say(&WorkerMessage::RankFailed(failure));
                ranks.borrow_mut().abort(1);
            }
            continue;
        }
        if let Some((repeat, victim, after_s)) = opts.test_hooks.abort_rank
            && repeat == plan.repeat
            && victim == rank
        {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(after_s.max(0.0)));
                eprintln!("trainbench rank {rank}: aborting the process (test hook)");
                std::process::abort();
            });
        }
        let pass = Pass { suite, opts, own_process_per_repeat: true, ranks: Some(ranks) };
        let mut failure = None;
        let ran = pass.run(backend, &[i], ooms, &mut |result, stop| {
            failure = RankFailure::of_result(rank, &result);
            say(&WorkerMessage::Result { result: Box::new(result), stop })
                .map(|()| Flow::Continue)
                .map_err(|source| RunnerError::Io { path: "standard output".into(), source })
        });
        if let Err(e) = ran {
            let _ = say(&WorkerMessage::Fatal(e.to_string()));
            ranks.borrow_mut().abort(1);
        }
        if let Some(failure) = failure {
            // Rank 0's result says how the run ended; another rank tells it before ending the group.
            if rank != 0 {
                eprintln!("{failure}");
                let _ = say(&WorkerMessage::RankFailed(failure));
            }
            ranks.borrow_mut().abort(1);
        }
    }
    true
}

/// `trainbench run` started on every rank by an external launcher (`mpirun -n N trainbench run SPEC`, `srun`):
/// this process is one rank and runs every plan of the suite as such; each plan must need exactly the launcher's
/// N processes (refused at start otherwise). Rank 0 writes the results; the other ranks write nothing.
pub(crate) fn run_as_ranks(
    suite: &Suite,
    opts: &RunnerOptions,
    launcher: (&str, usize),
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<SuiteReport, RunnerError> {
    let (who, size) = launcher;
    if let Some(p) = suite
        .plans
        .iter()
        .find(|p| p.topology.strategy.is_single() || p.topology.strategy.processes(p.topology.world_size()) != size)
    {
        return Err(RunnerError::Worker(format!(
            "{who} started {size} ranks, but run `{}` needs {} ({} worker(s), strategy {}): launch as many ranks as \
             the spec's topology asks for (workers plus parameter servers), or run the spec without a launcher",
            p.id,
            p.topology.strategy.processes(p.topology.world_size()),
            p.topology.world_size(),
            p.topology.strategy.name()
        )));
    }
    let engine = Engine::for_plans(&suite.plans).map_err(RunnerError::Worker)?;
    let ranks = RefCell::new(Ranks::open(engine).map_err(RunnerError::Worker)?);
    let rank = ranks.borrow().rank();
    let mut suite = suite.clone();
    for plan in &mut suite.plans {
        ranks.borrow().check_plan(plan).map_err(RunnerError::Worker)?;
        ranks.borrow().place(plan);
    }
    for plan in &mut suite.plans {
        share_cpu_threads(plan, size);
    }
    let mut recorder = Recorder::new(&suite, opts);
    let mut backend = backends::create(suite.backend, &opts.mock_config());
    let mut ooms = Vec::new();
    let indices: Vec<usize> = (0..suite.plans.len()).collect();
    let mut record_error: Option<RunnerError> = None;
    serve_ranked(&ranks, &suite, opts, backend.as_mut(), &indices, &mut ooms, &mut |message| {
        // Rank 0 records the results; another rank's failure is on stderr already (no parent to tell).
        match (rank, message) {
            (_, WorkerMessage::Fatal(m)) => eprintln!("trainbench rank {rank}: {m}"),
            (0, WorkerMessage::Result { result, stop }) if record_error.is_none() => {
                if let Err(e) = recorder.record((**result).clone(), *stop, on_result) {
                    record_error = Some(e);
                }
            }
            _ => {}
        }
        Ok(())
    });
    match record_error {
        Some(e) => Err(e),
        None => Ok(recorder.report),
    }
}

/// The launcher variables that say how many ranks run on this machine, in the order they are trusted.
const LOCAL_SIZE_VARIABLES: &[&str] =
    &["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"];

/// Give `plan`, run by one rank of a group of `group_size`, its share of this machine's CPU threads unless the
/// spec set `run.cpu_threads`: the rule of [`rank_cpu_threads`] over the threads this process may use and the
/// ranks on this machine (the launcher's count, else the whole group). Every path that starts ranks
/// (`trainbench worker --ranks`, `trainbench run` under an external launcher) takes it.
pub(crate) fn share_cpu_threads(plan: &mut RunPlan, group_size: usize) {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    let local = LOCAL_SIZE_VARIABLES
        .iter()
        .find_map(|v| std::env::var(v).ok().and_then(|x| x.trim().parse::<usize>().ok()))
        .filter(|&n| n > 0)
        .unwrap_or(group_size);
    plan.cpu_threads = rank_cpu_threads(plan.cpu_threads, available, local);
}

/// A rank's intra-op threads: the spec's `run.cpu_threads` when it sets them, else this machine's `available`
/// threads divided evenly over the `local_ranks` sharing its cores (rounded down), at least 1.
pub(crate) fn rank_cpu_threads(spec: Option<u32>, available: usize, local_ranks: usize) -> Option<u32> {
    spec.or_else(|| Some(u32::try_from((available / local_ranks.max(1)).max(1)).unwrap_or(u32::MAX)))
}

/// The outcome of a data-parallel run as its group ended, given the failures its ranks reported
/// ([`RankFailure`]): a run rank 0 reports as failed (its exchange broke off), or that no rank reported, is out of
/// memory when another rank ran out of memory, with that rank's failure (`trainbench rank N: run ... failed:
/// CUDA out of memory ...`) as the message, so the sweep skips larger batches as it does for one worker. Any other
/// outcome is kept. Decided by the failures' kinds, never by their text.
pub(crate) fn outcome_with_rank_failures(
    outcome: RunOutcome,
    failures: &[RankFailure],
    batch_size: usize,
) -> RunOutcome {
    let RunOutcome::Failed { .. } = outcome else { return outcome };
    match failures.iter().find(|f| f.kind == RankFailureKind::OutOfMemory) {
        Some(f) => RunOutcome::OutOfMemory { batch_size, message: f.to_string() },
        None => outcome,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ranks_share_the_machines_threads_unless_the_spec_sets_them() {
        assert_eq!(rank_cpu_threads(None, 16, 4), Some(4));
        assert_eq!(rank_cpu_threads(None, 16, 3), Some(5), "rounded down");
        assert_eq!(rank_cpu_threads(None, 2, 4), Some(1), "at least one each");
        assert_eq!(rank_cpu_threads(None, 8, 0), Some(8), "no count: one rank");
        assert_eq!(rank_cpu_threads(Some(3), 16, 4), Some(3), "the spec's choice is kept");
    }

    fn failure(rank: usize, kind: RankFailureKind, message: &str) -> RankFailure {
        RankFailure { rank, kind, run: Some("m.b64.fp32.1x2.r0".into()), message: message.into() }
    }

    #[test]
    fn another_ranks_out_of_memory_makes_the_run_out_of_memory() {
        let failed = RunOutcome::Failed { message: "data-parallel exchange: NCCL: remote process exited".into() };
        let died = RankFailure { rank: 0, kind: RankFailureKind::Died, run: None, message: "the process ended".into() };
        let oom = failure(1, RankFailureKind::OutOfMemory, "CUDA out of memory. Tried to allocate 2.00 GiB");
        assert_eq!(
            outcome_with_rank_failures(failed.clone(), &[died.clone(), oom.clone()], 64),
            RunOutcome::OutOfMemory {
                batch_size: 64,
                message: "trainbench rank 1: run `m.b64.fp32.1x2.r0` failed: CUDA out of memory. Tried to allocate \
                          2.00 GiB"
                    .into()
            }
        );
        // The kind decides, not the text: a failure that merely mentions memory stays a failure.
        let other = failure(1, RankFailureKind::Failed, "CUDA out of memory (but reported as a plain failure)");
        assert_eq!(outcome_with_rank_failures(failed.clone(), &[other, died], 64), failed);
        // Other outcomes are kept whatever the ranks reported.
        assert_eq!(outcome_with_rank_failures(RunOutcome::Completed, &[oom], 64), RunOutcome::Completed);
    }

    #[test]
    fn a_rank_failure_travels_as_one_typed_worker_line() {
        let f = failure(3, RankFailureKind::OutOfMemory, "cuDNN error: CUDNN_STATUS_ALLOC_FAILED");
        let line = serde_json::to_string(&WorkerMessage::RankFailed(f.clone())).unwrap();
        assert!(!line.contains('\n'));
        assert!(line.contains(r#""kind":"out_of_memory""#), "{line}");
        match serde_json::from_str::<WorkerMessage>(&line).unwrap() {
            WorkerMessage::RankFailed(back) => assert_eq!(back, f),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            f.to_string(),
            "trainbench rank 3: run `m.b64.fp32.1x2.r0` failed: cuDNN error: CUDNN_STATUS_ALLOC_FAILED"
        );
    }

    #[test]
    fn a_failed_or_out_of_memory_result_is_a_rank_failure_and_nothing_else_is() {
        let mut result: RunResult = serde_json::from_str(include_str!(
            "../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json"
        ))
        .unwrap();
        result.outcome = RunOutcome::OutOfMemory { batch_size: 8, message: "out of memory".into() };
        let f = RankFailure::of_result(2, &result).unwrap();
        assert_eq!(
            (f.rank, f.kind, f.run.as_deref()),
            (2, RankFailureKind::OutOfMemory, Some(result.plan.id.as_str()))
        );
        result.outcome = RunOutcome::Failed { message: "shape mismatch".into() };
        assert_eq!(RankFailure::of_result(2, &result).unwrap().kind, RankFailureKind::Failed);
        result.outcome = RunOutcome::Completed;
        assert_eq!(RankFailure::of_result(2, &result), None);
    }
}
