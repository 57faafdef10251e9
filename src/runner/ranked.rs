//! The run loop of a rank of a data-parallel group: [`serve_ranked`] (the plans of a `trainbench worker --ranks`
//! job: servers serve, workers train, rank 0 reports) and [`run_as_ranks`] (`trainbench run` itself started on
//! every rank by an external launcher: `mpirun -n N trainbench run SPEC` or `srun` for CPU specs, `torchrun` for
//! CUDA specs).

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use trainbench_workload::RunPlan;

use super::ranks::{Engine, Ranks};
use super::worker::WorkerMessage;
use super::{Flow, Pass, Recorder, RunnerError, RunnerOptions, Suite, SuiteReport};
use crate::backends;
use crate::result::{RunOutcome, RunResult};

/// One rank's part of its group's runs: servers serve, workers train through a [`Pass`] with the group, rank 0
/// prints each result; a run that did not complete ends the group.
pub(crate) fn serve_ranked(
    ranks: &RefCell<Ranks>,
    suite: &Suite,
    opts: &RunnerOptions,
    backend: &mut dyn trainbench_workload::Backend,
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
                eprintln!("trainbench rank {rank}: parameter server of `{}` failed: {e}", plan.id);
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
        let mut ended_badly = false;
        let ran = pass.run(backend, &[i], ooms, &mut |result, stop| {
            ended_badly = matches!(result.outcome, RunOutcome::Failed { .. } | RunOutcome::OutOfMemory { .. });
            if let (true, RunOutcome::Failed { message } | RunOutcome::OutOfMemory { message, .. }) =
                (rank != 0, &result.outcome)
            {
                eprintln!("trainbench rank {rank}: run `{}` failed: {message}", result.plan.id);
            }
            say(&WorkerMessage::Result { result: Box::new(result), stop })
                .map(|()| Flow::Continue)
                .map_err(|source| RunnerError::Io { path: "standard output".into(), source })
        });
        if let Err(e) = ran {
            let _ = say(&WorkerMessage::Fatal(e.to_string()));
            ranks.borrow_mut().abort(1);
        }
        if ended_badly {
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
    if let Some(p) = suite.plans.iter().find(|p| p.strategy.is_single() || p.strategy.processes(p.world_size) != size) {
        return Err(RunnerError::Worker(format!(
            "{who} started {size} ranks, but run `{}` needs {} ({} worker(s), strategy {}): launch as many ranks as \
             the spec's topology asks for (workers plus parameter servers), or run the spec without a launcher",
            p.id,
            p.strategy.processes(p.world_size),
            p.world_size,
            p.strategy.name()
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
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Ranks on one machine share its cores; the launcher says how many share this one.
    let local = ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok().and_then(|x| x.trim().parse::<usize>().ok()))
        .unwrap_or(size);
    for plan in &mut suite.plans {
        plan.cpu_threads = plan.cpu_threads.or(Some(u32::try_from((threads / local.max(1)).max(1)).unwrap_or(1)));
    }
    let mut recorder = Recorder::new(&suite, opts);
    let mut backend = backends::create(suite.backend, &opts.mock_config());
    let mut ooms = Vec::new();
    let indices: Vec<usize> = (0..suite.plans.len()).collect();
    let mut record_error: Option<RunnerError> = None;
    serve_ranked(&ranks, &suite, opts, backend.as_mut(), &indices, &mut ooms, &mut |message| {
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

/// The outcome of a data-parallel run as its group ended: a run rank 0 reports as failed (its exchange broke
/// off) because another rank ran out of memory is out of memory, with that rank's line
/// (`trainbench rank N: run ... failed: CUDA out of memory ...`) as the message, so the sweep skips larger
/// batches as it does for one worker. Any other outcome is kept.
pub(crate) fn outcome_with_rank_failures(outcome: RunOutcome, failures: &[String], batch_size: usize) -> RunOutcome {
    let RunOutcome::Failed { .. } = outcome else { return outcome };
    match failures.iter().find(|l| trainbench_workload::BackendError::is_oom_message(l)) {
        Some(line) => RunOutcome::OutOfMemory { batch_size, message: line.clone() },
        None => outcome,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn another_ranks_allocation_failure_makes_the_run_out_of_memory() {
        let failed = RunOutcome::Failed { message: "data-parallel exchange: NCCL: remote process exited".into() };
        for line in [
            "trainbench rank 1: run `m.b64.fp32.1x2.r0` failed: CUDA out of memory. Tried to allocate 2.00 GiB",
            "trainbench rank 1: run `m` failed: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`",
            "trainbench rank 3: run `m` failed: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        ] {
            let failures = vec!["trainbench rank 0: the process ended (exit status: 1)".to_string(), line.to_string()];
            assert_eq!(
                outcome_with_rank_failures(failed.clone(), &failures, 64),
                RunOutcome::OutOfMemory { batch_size: 64, message: line.to_string() }
            );
        }
        // Other failures stay failures; other outcomes are kept whatever the lines say.
        let other = vec!["trainbench rank 1: run `m` failed: shape mismatch".to_string()];
        assert_eq!(outcome_with_rank_failures(failed.clone(), &other, 64), failed);
        let oom_line = vec!["trainbench rank 1: run `m` failed: CUDA out of memory".to_string()];
        assert_eq!(outcome_with_rank_failures(RunOutcome::Completed, &oom_line, 64), RunOutcome::Completed);
    }
}
