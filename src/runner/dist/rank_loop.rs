//! The rank loop of a data-parallel group, entered one way ([`run_ranks`]) from either of the two paths that
//! start ranks: a `trainbench worker --ranks` job (`isolate::child`), or `trainbench run` itself started on every
//! rank by an external launcher ([`run_as_ranks`]: `mpirun -n N trainbench run SPEC` or `srun` for CPU specs,
//! `torchrun` for CUDA specs). Servers serve, workers train through a [`Pass`] with the group, rank 0 reports;
//! plans are fitted to the group in one place ([`fit_plans`]).

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use trainbench_contract::{Backend, RunPlan};

use super::group::Ranks;
use super::launcher::LauncherEnv;
use super::transport::Transport;
use crate::backend_registry;
use crate::result::RunResult;
use crate::runner::in_process::{Flow, Pass, Recorder};
use crate::runner::options::{RunnerError, RunnerOptions, SuiteReport};
use crate::runner::protocol::{RankFailure, RankFailureKind, WorkerMessage};
use crate::runner::suite::Suite;

/// The rank loop, the one way into it for both paths (see the module docs): this rank's part of its group's
/// runs at `indices`: servers serve, workers train through a [`Pass`] with the group, rank 0
/// prints each result; a run that did not complete ends the group, the other ranks first telling the parent how
/// theirs failed ([`WorkerMessage::RankFailed`] through `say`, and a line on stderr).
pub(crate) fn run_ranks(
    ranks: &RefCell<Ranks>,
    suite: &Suite,
    opts: &RunnerOptions,
    backend: &mut dyn Backend,
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
    if let Some(p) = suite.plans.iter().find(|p| p.topology.strategy.is_single() || p.topology.processes() != size) {
        return Err(RunnerError::Worker(format!(
            "{who} started {size} ranks, but run `{}` needs {} ({} worker(s), strategy {}): launch as many ranks as \
             the spec's topology asks for (workers plus parameter servers), or run the spec without a launcher",
            p.id,
            p.topology.processes(),
            p.topology.world_size(),
            p.topology.strategy.name()
        )));
    }
    let engine = Transport::for_plans(&suite.plans).map_err(|e| RunnerError::Worker(e.to_string()))?;
    let ranks = RefCell::new(Ranks::open(engine).map_err(|e| RunnerError::Worker(e.to_string()))?);
    let rank = ranks.borrow().rank();
    let mut suite = suite.clone();
    let indices: Vec<usize> = (0..suite.plans.len()).collect();
    fit_plans(&ranks.borrow(), &mut suite.plans, &indices).map_err(RunnerError::Worker)?;
    let mut recorder = Recorder::new(&suite, opts);
    let mut backend = backend_registry::create(suite.backend, &opts.mock_config());
    let mut ooms = Vec::new();
    let mut record_error: Option<RunnerError> = None;
    run_ranks(&ranks, &suite, opts, backend.as_mut(), &indices, &mut ooms, &mut |message| {
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

/// Fit the plans at `indices` to this rank's group: each must be one the group can run ([`Ranks::check_plan`]),
/// and is placed on this rank's device and given its share of this machine's CPU threads. Both ways of starting
/// ranks (a worker job, `trainbench run` under a launcher) fit their plans here.
pub(crate) fn fit_plans(group: &Ranks, plans: &mut [RunPlan], indices: &[usize]) -> Result<(), String> {
    for &i in indices {
        let Some(plan) = plans.get_mut(i) else { continue };
        group.check_plan(plan).map_err(|e| e.to_string())?;
        group.place(plan);
        share_cpu_threads(plan, group.size());
    }
    Ok(())
}

/// Give `plan`, run by one rank of a group of `group_size`, its share of this machine's CPU threads unless the
/// spec set `run.cpu_threads`: the rule of [`rank_cpu_threads`] over the threads this process may use and the
/// ranks on this machine (the launcher's count, else the whole group). Every path that starts ranks
/// (`trainbench worker --ranks`, `trainbench run` under an external launcher) takes it.
pub(crate) fn share_cpu_threads(plan: &mut RunPlan, group_size: usize) {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    let local = LauncherEnv::get().local_size.unwrap_or(group_size);
    plan.cpu_threads = rank_cpu_threads(plan.cpu_threads, available, local);
}

/// A rank's intra-op threads: the spec's `run.cpu_threads` when it sets them, else this machine's `available`
/// threads divided evenly over the `local_ranks` sharing its cores (rounded down), at least 1.
pub(crate) fn rank_cpu_threads(spec: Option<u32>, available: usize, local_ranks: usize) -> Option<u32> {
    spec.or_else(|| Some(u32::try_from((available / local_ranks.max(1)).max(1)).unwrap_or(u32::MAX)))
}

#[cfg(test)]
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
}
