//! The worker side of a repeat in a process of its own (`trainbench worker`, and each rank of
//! `trainbench worker --ranks`): read the [`WorkerJob`] from stdin (rank 0 reads it and hands it to the other
//! ranks), run it, print each result as a [`WorkerMessage`] line. The test hooks come from their own variable
//! ([`TestHooks::inherited`]), never from the job.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use crate::backend_registry;
use crate::digest::sha256_hex;
use crate::runner::dist::rank_loop::{fit_plans, run_ranks};
use crate::runner::dist::{LauncherEnv, Ranks, Transport};
use crate::runner::hooks::TestHooks;
use crate::runner::in_process::{Flow, Pass};
use crate::runner::options::{RunnerError, RunnerOptions};
use crate::runner::plan_run::devices_of;
use crate::runner::probe::{self, StopFlag};
use crate::runner::protocol::{RankFailure, RankFailureKind, WorkerJob, WorkerMessage, print_message};
use crate::runner::suite::Suite;

/// Why a worker had no job to run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// This rank could not join its group.
    #[error(transparent)]
    Group(#[from] crate::runner::dist::group::GroupError),
    /// The job could not be read from standard input.
    #[error("reading the job: {0}")]
    Read(#[source] std::io::Error),
    /// Rank 0 could not hand the job to the other ranks.
    #[error("handing the job to every rank: {0}")]
    Handoff(#[source] trainbench_comm::CommError),
    /// The job handed over is not UTF-8.
    #[error("the job is not text: {0}")]
    NotText(#[source] std::string::FromUtf8Error),
    /// The input is not a job (the worker was started by hand).
    #[error("`trainbench worker` is started by `trainbench run`: {0}")]
    NotAJob(#[source] serde_json::Error),
}

/// The worker side (`trainbench worker`): read the job from stdin, run it, print each result as a line.
/// `Ok(false)` when the job failed and the parent was told (a [`WorkerMessage::Fatal`] line, which the parent
/// reports); `Err` when there is no job to run (the message is for whoever started the worker by hand).
///
/// With `ranked` (`trainbench worker --ranks`, started by the engine's launcher) this process is one rank of a
/// data-parallel group connected by that engine: rank 0 reads the job and hands it to the others, workers train
/// with the gradient exchange and parameter-server ranks serve, only rank 0 prints results, and a run that fails
/// mid-way ends the whole group (the other ranks would wait for the failed one forever).
pub fn serve(ranked: Option<Transport>) -> Result<bool, ServeError> {
    probe::install_interrupt_handler();
    let ranks = match ranked {
        Some(engine) => match Ranks::open(engine) {
            Ok(r) => Some(RefCell::new(r)),
            Err(e) => {
                // The parent learns which rank could not join, and why, through the launcher.
                if let Some(rank) = LauncherEnv::get().rank {
                    let failure =
                        RankFailure { rank, kind: RankFailureKind::Failed, run: None, message: e.to_string() };
                    let _ = print_message(&mut std::io::stdout().lock(), &WorkerMessage::RankFailed(failure));
                }
                return Err(e.into());
            }
        },
        None => None,
    };
    let rank = ranks.as_ref().map_or(0, |r| r.borrow().rank());
    let mut input = BufReader::new(std::io::stdin());
    let mut line = String::new();
    if rank == 0 {
        input.read_line(&mut line).map_err(ServeError::Read)?;
    }
    if let Some(r) = &ranks {
        let mut bytes = std::mem::take(&mut line).into_bytes();
        r.borrow_mut().broadcast(&mut bytes).map_err(ServeError::Handoff)?;
        line = String::from_utf8(bytes).map_err(ServeError::NotText)?;
    }
    let mut job: WorkerJob = serde_json::from_str(&line).map_err(ServeError::NotAJob)?;
    let stop = StopFlag::default();
    if rank == 0 {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                match input.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if line.trim() == "stop" => break,
                    Ok(_) => {}
                }
            }
            stop.request();
        });
    }
    let mut out = std::io::stdout().lock();
    // Rank 0 reports the runs; another rank tells the parent only how it failed.
    let mut say = |message: &WorkerMessage| -> std::io::Result<()> {
        match (rank, message) {
            (0, m) | (_, m @ WorkerMessage::RankFailed(_)) => print_message(&mut out, m),
            (_, WorkerMessage::Fatal(m)) => {
                let failure = RankFailure { rank, kind: RankFailureKind::Failed, run: None, message: m.clone() };
                eprintln!("{failure}");
                print_message(&mut out, &WorkerMessage::RankFailed(failure))
            }
            _ => Ok(()),
        }
    };
    let mut suite = match Suite::from_spec_text("worker job", &job.spec_canonical) {
        Ok(s) if sha256_hex(&s.spec_canonical) == sha256_hex(&job.spec_canonical) => s,
        Ok(_) => {
            let message = "the spec does not read back to the same canonical form".to_string();
            let _ = say(&WorkerMessage::Fatal(message));
            return Ok(false);
        }
        Err(e) => {
            let _ = say(&WorkerMessage::Fatal(e.to_string()));
            return Ok(false);
        }
    };
    if let Some(r) = &ranks {
        if let Err(e) = fit_plans(&r.borrow(), &mut job.plans, &job.indices) {
            let _ = say(&WorkerMessage::Fatal(e));
            return Ok(false);
        }
    }
    let test_hooks = match TestHooks::inherited() {
        Ok(hooks) => hooks,
        Err(e) => {
            let _ = say(&WorkerMessage::Fatal(e.to_string()));
            return Ok(false);
        }
    };
    suite.plans = job.plans;
    suite.backend = job.backend;
    suite.data = job.data;
    let opts = RunnerOptions {
        out_dir: PathBuf::new(),
        progress: job.progress,
        progress_interval: job.progress_interval,
        no_collectors: job.no_collectors,
        mock: job.mock.clone(),
        stop,
        worker_exe: None,
        test_hooks,
        // The parent adds each result's prediction as it records it.
        hardware: Default::default(),
    };
    let mut backend = backend_registry::create(job.backend, &opts.mock_config());
    if rank == 0 {
        let placed = job.indices.iter().filter_map(|&i| suite.plans.get(i));
        let _ = say(&WorkerMessage::Devices(devices_of(backend.as_ref(), placed)));
    }
    let mut ooms = job.known_ooms;
    if let Some(r) = &ranks {
        return Ok(run_ranks(r, &suite, &opts, backend.as_mut(), &job.indices, &mut ooms, &mut say));
    }
    let pass = Pass { suite: &suite, opts: &opts, own_process_per_repeat: true, ranks: None };
    let ran = pass.run(backend.as_mut(), &job.indices, &mut ooms, &mut |result, stop| {
        say(&WorkerMessage::Result { result: Box::new(result), stop })
            .map(|()| Flow::Continue)
            .map_err(|source| RunnerError::Io { path: "standard output".into(), source })
    });
    match ran {
        Ok(_) => Ok(true),
        Err(e) => {
            let _ = say(&WorkerMessage::Fatal(e.to_string()));
            Ok(false)
        }
    }
}
