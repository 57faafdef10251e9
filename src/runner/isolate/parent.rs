//! The parent side of repeats in processes of their own (`run.isolation = "process"`): `trainbench run` starts
//! one `trainbench worker` per repeat index (and one group of ranks per data-parallel run), hands it the
//! canonical spec and the runs of that repeat as one [`WorkerJob`] line on its standard input, and records each
//! result the worker prints the moment it arrives. A fresh process per repeat means fresh allocators, thread
//! pools and caches, so the repeats of a configuration sample the noise *between* processes, the noise a later
//! comparison with another process faces.
//!
//! A worker that dies before reporting a run (a crash inside a backend library) leaves that run recorded as
//! `failed`, on the device it was placed on, and the sweep goes on with the next repeat; what was already
//! reported is kept. When the runs have a timeout, a worker that stays silent for the timeout plus a grace
//! period ([`HUNG_GRACE`](crate::runner::protocol::HUNG_GRACE)) is hung inside a backend call (the backend stops at its timeout between iterations,
//! so only a call that never returns gets there): it is killed and its run recorded as `failed`. The protocol
//! itself is [`crate::runner::protocol`]; test hooks reach the worker through their own variable
//! ([`TestHooks::pass_to`](crate::runner::hooks::TestHooks::pass_to)), not in the job.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use trainbench_contract::{BackendKind, DeviceInfo, RunPlan};
use trainbench_graph::analysis::{Analysis, analyze};

use crate::result::{ProcessInfo, RunOutcome, RunResult};
use crate::runner::dist::{Transport, launch};
use crate::runner::in_process::{Flow, Recorder};
use crate::runner::options::{RunnerError, RunnerOptions, SuiteReport};
use crate::runner::plan_run::{RunSlot, device_in};
use crate::runner::probe::{StopCause, StopFlag};
use crate::runner::protocol::{RankFailure, WorkerJob, WorkerMessage, outcome_with_rank_failures};
use crate::runner::suite::Suite;

/// Run `suite` with one worker process per repeat index, recording results in `opts.out_dir`.
pub(crate) fn run_isolated(
    suite: &Suite,
    opts: &RunnerOptions,
    exe: &Path,
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<SuiteReport, RunnerError> {
    let mut recorder = Recorder::new(suite, opts);
    let mut ooms: Vec<RunPlan> = Vec::new();
    let repeats = suite.plans.iter().map(|p| p.repeat).max().map_or(0, |r| r + 1);
    for repeat in 0..repeats {
        if opts.stop.is_set() {
            recorder.report.interrupted = true;
            break;
        }
        let indices: Vec<usize> = (0..suite.plans.len()).filter(|&i| suite.plans[i].repeat == repeat).collect();
        // Single-worker runs share the repeat's process; each data-parallel run starts its own group of ranks,
        // so a rank that dies fails only its run.
        let simulated = suite.backend == BackendKind::Mock;
        let (single, ranked): (Vec<usize>, Vec<usize>) =
            indices.into_iter().partition(|&i| simulated || suite.plans[i].topology.strategy.is_single());
        let mut groups: Vec<(Vec<usize>, Option<RankCount>)> = Vec::new();
        if !single.is_empty() {
            groups.push((single, None));
        }
        for i in ranked {
            let p = &suite.plans[i];
            let engine = Transport::for_plans([p]).map_err(RunnerError::Worker)?;
            groups.push((vec![i], Some((p.topology.processes(), engine))));
        }
        let mut flow = Flow::Continue;
        for (indices, processes) in groups {
            if opts.stop.is_set() {
                recorder.report.interrupted = true;
                flow = Flow::Stop;
                break;
            }
            let job = WorkerJob {
                spec_canonical: suite.spec_canonical.clone(),
                plans: suite.plans.clone(),
                indices,
                known_ooms: ooms.clone(),
                backend: suite.backend,
                progress: opts.progress,
                progress_interval: opts.progress_interval,
                no_collectors: opts.no_collectors,
                mock: opts.mock.clone(),
                data: suite.data.clone(),
            };
            let launch = Launch { exe, processes };
            if run_worker(suite, opts, launch, &job, &mut ooms, &mut recorder, on_result)? == Flow::Stop {
                flow = Flow::Stop;
                break;
            }
        }
        if flow == Flow::Stop {
            break;
        }
    }
    Ok(recorder.report)
}

/// A group's ranks and the engine that connects them.
type RankCount = (usize, Transport);

/// How a worker is started: `exe worker`, or `processes` ranks of an engine through its launcher.
#[derive(Debug, Clone, Copy)]
struct Launch<'a> {
    exe: &'a Path,
    processes: Option<RankCount>,
}

/// Start one worker, record what it reports, and record the runs it did not report as failed.
fn run_worker(
    suite: &Suite,
    opts: &RunnerOptions,
    launch: Launch<'_>,
    job: &WorkerJob,
    ooms: &mut Vec<RunPlan>,
    recorder: &mut Recorder,
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<Flow, RunnerError> {
    let line = serde_json::to_string(job).map_err(|e| RunnerError::Worker(e.to_string()))?;
    let exe = launch.exe;
    let ranked = launch.processes.is_some();
    let (processes, engine) = launch.processes.map_or((None, Transport::Mpi), |(n, e)| (Some(n), e));
    let mut command = launch::worker_command(exe, processes, engine).map_err(RunnerError::Worker)?;
    opts.test_hooks.pass_to(&mut command);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if ranked { Stdio::piped() } else { Stdio::inherit() })
        .spawn()
        .map_err(|e| RunnerError::Worker(format!("cannot start the worker `{} worker`: {e}", exe.display())))?;
    // A group of ranks: its stderr is passed through, keeping the MPI launcher's notices of a rank that died
    // (for people: how a group failed is decided by the ranks' typed failures on stdout).
    let launcher_notices = Arc::new(Mutex::new(Vec::<String>::new()));
    let stderr_thread = child.stderr.take().map(|err| {
        let keep = launcher_notices.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if launch::is_launcher_failure_line(line.trim()) {
                    if let Ok(mut k) = keep.lock() {
                        k.push(line.trim().to_string());
                    }
                }
            }
        })
    });
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err(RunnerError::Worker("the worker's standard streams could not be opened".into()));
    };
    let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
    // Only runs that all have a timeout can be hung: without one, a long run is simply long.
    let timeouts: Option<Vec<f64>> = job.indices.iter().map(|&i| suite.plans[i].timeout_s).collect();
    let timeout_s = timeouts.and_then(|t| t.into_iter().reduce(f64::max));
    let repeat = job.indices.first().map_or(0, |&i| suite.plans[i].repeat);
    let grace = opts.test_hooks.hung_grace(repeat);
    let hung_after = timeout_s.map(|t| Duration::from_secs_f64(t.max(0.0)) + grace);
    let watch = Arc::new(Watch::default());
    let pid = child.id();
    let supervisor = supervise(stdin, opts.stop.clone(), watch.clone(), (pid, ranked), hung_after);

    let mut pending: Vec<usize> = job.indices.clone();
    // A group's failed runs wait for the group's end: another rank may report that it ran out of memory.
    let mut failed_in_group = Vec::new();
    let mut failures: Vec<RankFailure> = Vec::new();
    let mut devices: Vec<DeviceInfo> = Vec::new();
    let mut flow = Flow::Continue;
    let mut fatal: Option<String> = None;
    let mut record_error: Option<RunnerError> = None;
    // Note an out-of-memory plan (its larger batches are then skipped) and record the result, unless an earlier
    // one could not be written; true when this one could not.
    let mut keep = |result: Box<RunResult>, stop: Option<StopCause>, record_error: &mut Option<RunnerError>| {
        if matches!(result.outcome, RunOutcome::OutOfMemory { .. }) {
            ooms.push(result.plan.clone());
        }
        if record_error.is_some() {
            return false;
        }
        match recorder.record(*result, stop, on_result) {
            Ok(Flow::Stop) => flow = Flow::Stop,
            Ok(Flow::Continue) => {}
            Err(e) => *record_error = Some(e),
        }
        record_error.is_some()
    };
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        watch.heard();
        match serde_json::from_str::<WorkerMessage>(&line) {
            Ok(WorkerMessage::Result { result, stop }) => {
                pending.retain(|&i| suite.plans[i].id != result.plan.id);
                if ranked && matches!(result.outcome, RunOutcome::Failed { .. }) {
                    failed_in_group.push((result, stop));
                    continue;
                }
                if keep(result, stop, &mut record_error) {
                    // Nothing more can be written: ask the worker to stop, then report the error.
                    opts.stop.request();
                }
            }
            Ok(WorkerMessage::Fatal(message)) => fatal = Some(message),
            Ok(WorkerMessage::Devices(listed)) => devices = listed,
            Ok(WorkerMessage::RankFailed(failure)) => failures.push(failure),
            Err(_) => eprintln!("{line}"),
        }
    }
    // Before `wait` reaps the worker: after that its pid may belong to another process.
    watch.finished.store(true, Ordering::SeqCst);
    let status = child.wait();
    let _ = supervisor.join();
    if let Some(t) = stderr_thread {
        let _ = t.join();
    }
    let notices = launcher_notices.lock().map(|n| n.clone()).unwrap_or_default();
    for (mut result, stop) in failed_in_group {
        let batch = result.plan.batch_size;
        result.outcome = outcome_with_rank_failures(result.outcome, &failures, batch);
        keep(result, stop, &mut record_error);
    }
    if let Some(e) = record_error {
        return Err(e);
    }
    if let Some(message) = fatal {
        return Err(RunnerError::Worker(message));
    }
    if flow == Flow::Stop || opts.stop.is_set() {
        recorder.report.interrupted = true;
        return Ok(Flow::Stop);
    }
    let killed = watch.killed_after.lock().ok().and_then(|k| *k);
    let exit = match (&status, killed, timeout_s) {
        (_, Some(silent), Some(t)) => format!(
            "killed as hung: no result for {:.0} s, past the run's {t} s timeout and a {:.0} s grace",
            silent.as_secs_f64(),
            grace.as_secs_f64()
        ),
        (Ok(s), _, _) if s.success() => return Ok(Flow::Continue),
        (Ok(s), _, _) => s.to_string(),
        (Err(e), _, _) => e.to_string(),
    };
    let told: Vec<String> = failures.iter().map(ToString::to_string).chain(notices).collect();
    let exit = if told.is_empty() { exit } else { format!("{exit}; {}", told.join("; ")) };
    // The worker died: the first unreported run is where it was; the rest of its repeat never started.
    let analysis = analyze(&suite.graph);
    for (n, &i) in pending.iter().enumerate() {
        let message = if n == 0 {
            format!("the worker process running this repeat ended ({exit}) before the run finished")
        } else {
            format!("not run: the worker process of this repeat ended ({exit}) during an earlier run")
        };
        let device = device_in(&devices, &suite.plans[i]);
        let mut lost = lost_result(suite, opts, (&analysis, device), i, pid, message);
        if n == 0 {
            // A rank that ran out of memory ended the group: the run is out of memory, not failed, and the
            // larger batches of its family are skipped.
            lost.outcome = outcome_with_rank_failures(lost.outcome, &failures, lost.plan.batch_size);
            if matches!(lost.outcome, RunOutcome::OutOfMemory { .. }) {
                ooms.push(lost.plan.clone());
            }
        }
        if recorder.record(lost, None, on_result)? == Flow::Stop {
            return Ok(Flow::Stop);
        }
    }
    Ok(Flow::Continue)
}

/// What the supervisor thread and the reading loop share about one worker.
#[derive(Debug)]
struct Watch {
    /// The worker's output has ended; the supervisor must stop.
    finished: AtomicBool,
    /// When the worker last printed a line (or started).
    last_heard: Mutex<Instant>,
    /// Set when the supervisor killed the worker as hung: how long it had been silent.
    killed_after: Mutex<Option<Duration>>,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            finished: AtomicBool::new(false),
            last_heard: Mutex::new(Instant::now()),
            killed_after: Mutex::new(None),
        }
    }
}

impl Watch {
    fn heard(&self) {
        if let Ok(mut t) = self.last_heard.lock() {
            *t = Instant::now();
        }
    }
    fn silent_for(&self) -> Duration {
        self.last_heard.lock().map(|t| t.elapsed()).unwrap_or_default()
    }
}

/// A thread that tells the worker to stop when the suite's stop flag is set, kills it when it stays silent
/// longer than `hung_after`, and closes its input when it is done.
fn supervise(
    mut stdin: std::process::ChildStdin,
    stop: StopFlag,
    watch: Arc<Watch>,
    (pid, group): (u32, bool),
    hung_after: Option<Duration>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut stop_sent = false;
        while !watch.finished.load(Ordering::SeqCst) {
            if !stop_sent && stop.is_set() {
                let _ = writeln!(stdin, "stop").and_then(|()| stdin.flush());
                stop_sent = true;
            }
            let silent = watch.silent_for();
            if hung_after.is_some_and(|limit| silent > limit) && kill(pid, group) {
                if let Ok(mut k) = watch.killed_after.lock() {
                    *k = Some(silent);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Kill a hung worker (with `group`, its whole process group: the launcher and every rank); false where this
/// platform cannot.
#[cfg(unix)]
fn kill(pid: u32, group: bool) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    let target = if group { -pid } else { pid };
    // SAFETY: `kill` has no memory-safety preconditions; the pid is our own child, not yet reaped (the reading
    // loop sets `finished` before `wait`), and with `group` the leader of the group it was started in.
    unsafe { libc::kill(target, libc::SIGKILL) == 0 }
}

/// Kill a hung worker; false where this platform cannot.
#[cfg(not(unix))]
fn kill(_pid: u32, _group: bool) -> bool {
    false
}

/// The result of the run at `index`, which worker `pid` never reported: built like every other result, with the
/// worker's process and the device the run was placed on (as the worker listed it) recorded.
fn lost_result(
    suite: &Suite,
    opts: &RunnerOptions,
    (analysis, device): (&Analysis, Option<DeviceInfo>),
    index: usize,
    pid: u32,
    message: String,
) -> RunResult {
    let ctx = RunSlot {
        suite,
        graph: &suite.graph,
        analysis,
        opts,
        index,
        process: ProcessInfo { pid, own_process_per_repeat: true },
        ranks: None,
    };
    let now = SystemTime::now();
    ctx.result(&suite.plans[index], suite.backend.name(), RunOutcome::Failed { message }, (now, now), device, None)
}
