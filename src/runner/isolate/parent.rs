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
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
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
            let engine = Transport::for_plans([p]).map_err(|e| RunnerError::Worker(e.to_string()))?;
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
    let ranked = launch.processes.is_some();
    let worker = start_worker(opts, launch, job)?;
    let limit = HangLimit::of(suite, opts, job);
    let watch = Arc::new(Watch::default());
    let pid = worker.child.id();
    let StartedWorker { mut child, stdin, stdout, stderr_thread, launcher_notices } = worker;
    let supervisor = supervise(stdin, opts.stop.clone(), watch.clone(), (pid, ranked), limit.after());
    let mut keeper = Keeper { recorder, ooms, on_result, flow: Flow::Continue, record_error: None };
    let mut heard = read_reports(suite, opts, job, ranked, stdout, &watch, &mut keeper);
    // Before `wait` reaps the worker: after that its pid may belong to another process.
    watch.finished.store(true, Ordering::SeqCst);
    let status = child.wait();
    let _ = supervisor.join();
    if let Some(t) = stderr_thread {
        let _ = t.join();
    }
    let notices = launcher_notices.lock().map(|n| n.clone()).unwrap_or_default();
    for (mut result, stop) in std::mem::take(&mut heard.failed_in_group) {
        let batch = result.plan.batch_size;
        result.outcome = outcome_with_rank_failures(result.outcome, &heard.failures, batch);
        keeper.keep(result, stop);
    }
    let Keeper { recorder, ooms, on_result, flow, record_error } = keeper;
    if let Some(e) = record_error {
        return Err(e);
    }
    if let Some(message) = heard.fatal {
        return Err(RunnerError::Worker(message));
    }
    if flow == Flow::Stop || opts.stop.is_set() {
        recorder.report.interrupted = true;
        return Ok(Flow::Stop);
    }
    let Some(exit) = exit_text(&status, &watch, &limit, &heard.failures, notices) else {
        return Ok(Flow::Continue);
    };
    let worker = LostWorker { pid, exit, devices: &heard.devices, failures: &heard.failures };
    record_lost(suite, opts, &worker, &heard.pending, ooms, recorder, on_result)
}

/// A worker process started and handed its job.
struct StartedWorker {
    child: Child,
    /// Its input, after the job line: the supervisor sends `stop` on it.
    stdin: ChildStdin,
    /// Its reports, one JSON message a line.
    stdout: ChildStdout,
    /// The thread passing a group's standard error through.
    stderr_thread: Option<JoinHandle<()>>,
    /// The MPI launcher's notices of a rank that died, kept from that standard error.
    launcher_notices: Arc<Mutex<Vec<String>>>,
}

/// Start the worker (`exe worker`, or a group of ranks through its launcher) and send it `job`.
fn start_worker(opts: &RunnerOptions, launch: Launch<'_>, job: &WorkerJob) -> Result<StartedWorker, RunnerError> {
    let line = serde_json::to_string(job).map_err(|e| RunnerError::Worker(e.to_string()))?;
    let exe = launch.exe;
    let ranked = launch.processes.is_some();
    let (processes, engine) = launch.processes.map_or((None, Transport::Mpi), |(n, e)| (Some(n), e));
    let mut command = launch::worker_command(exe, processes, engine).map_err(|e| RunnerError::Worker(e.to_string()))?;
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
    Ok(StartedWorker { child, stdin, stdout, stderr_thread, launcher_notices })
}

/// When a silent worker counts as hung: silent past the largest timeout of its runs plus a grace period.
struct HangLimit {
    /// The largest timeout of the job's runs; `None` when a run has none (a long run is then simply long).
    timeout_s: Option<f64>,
    /// The grace period past the timeout.
    grace: Duration,
}

impl HangLimit {
    fn of(suite: &Suite, opts: &RunnerOptions, job: &WorkerJob) -> Self {
        // Only runs that all have a timeout can be hung: without one, a long run is simply long.
        let timeouts: Option<Vec<f64>> = job.indices.iter().map(|&i| suite.plans[i].timeout_s).collect();
        let timeout_s = timeouts.and_then(|t| t.into_iter().reduce(f64::max));
        let repeat = job.indices.first().map_or(0, |&i| suite.plans[i].repeat);
        HangLimit { timeout_s, grace: opts.test_hooks.hung_grace(repeat) }
    }

    /// The silence after which the worker is killed as hung.
    fn after(&self) -> Option<Duration> {
        self.timeout_s.map(|t| Duration::from_secs_f64(t.max(0.0)) + self.grace)
    }
}

/// Where the results a worker reports go: noted when out of memory (their larger batches are then skipped) and
/// recorded, until one cannot be written.
struct Keeper<'a> {
    recorder: &'a mut Recorder,
    ooms: &'a mut Vec<RunPlan>,
    on_result: &'a mut dyn FnMut(&RunResult, &Path),
    /// Stop after this worker (the recorder said so).
    flow: Flow,
    /// The first result that could not be written.
    record_error: Option<RunnerError>,
}

impl Keeper<'_> {
    /// Note an out-of-memory plan and record the result, unless an earlier one could not be written; true when
    /// this one could not.
    fn keep(&mut self, result: Box<RunResult>, stop: Option<StopCause>) -> bool {
        if matches!(result.outcome, RunOutcome::OutOfMemory { .. }) {
            self.ooms.push(result.plan.clone());
        }
        if self.record_error.is_some() {
            return false;
        }
        match self.recorder.record(*result, stop, self.on_result) {
            Ok(Flow::Stop) => self.flow = Flow::Stop,
            Ok(Flow::Continue) => {}
            Err(e) => self.record_error = Some(e),
        }
        self.record_error.is_some()
    }
}

/// What a worker said besides the results already kept.
#[derive(Default)]
struct Heard {
    /// The job's runs it did not report.
    pending: Vec<usize>,
    /// A group's failed runs, kept for the group's end: another rank may report that it ran out of memory.
    failed_in_group: Vec<(Box<RunResult>, Option<StopCause>)>,
    /// The ranks' typed failures.
    failures: Vec<RankFailure>,
    /// The devices it listed.
    devices: Vec<DeviceInfo>,
    /// The error that ended it, as it reported it.
    fatal: Option<String>,
}

/// Read the worker's messages until its output ends: results are kept as they arrive (a group's failed runs
/// wait), the rest is gathered.
fn read_reports(
    suite: &Suite,
    opts: &RunnerOptions,
    job: &WorkerJob,
    ranked: bool,
    stdout: ChildStdout,
    watch: &Watch,
    keeper: &mut Keeper<'_>,
) -> Heard {
    let mut heard = Heard { pending: job.indices.clone(), ..Heard::default() };
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        watch.heard();
        match serde_json::from_str::<WorkerMessage>(&line) {
            Ok(WorkerMessage::Result { result, stop }) => {
                heard.pending.retain(|&i| suite.plans[i].id != result.plan.id);
                if ranked && matches!(result.outcome, RunOutcome::Failed { .. }) {
                    heard.failed_in_group.push((result, stop));
                    continue;
                }
                if keeper.keep(result, stop) {
                    // Nothing more can be written: ask the worker to stop, then report the error.
                    opts.stop.request();
                }
            }
            Ok(WorkerMessage::Fatal(message)) => heard.fatal = Some(message),
            Ok(WorkerMessage::Devices(listed)) => heard.devices = listed,
            Ok(WorkerMessage::RankFailed(failure)) => heard.failures.push(failure),
            Err(_) => eprintln!("{line}"),
        }
    }
    heard
}

/// How the worker ended, in words with what its ranks and launcher told; `None` when it exited successfully.
fn exit_text(
    status: &std::io::Result<ExitStatus>,
    watch: &Watch,
    limit: &HangLimit,
    failures: &[RankFailure],
    notices: Vec<String>,
) -> Option<String> {
    let killed = watch.killed_after.lock().ok().and_then(|k| *k);
    let exit = match (status, killed, limit.timeout_s) {
        (_, Some(silent), Some(t)) => format!(
            "killed as hung: no result for {:.0} s, past the run's {t} s timeout and a {:.0} s grace",
            silent.as_secs_f64(),
            limit.grace.as_secs_f64()
        ),
        (Ok(s), _, _) if s.success() => return None,
        (Ok(s), _, _) => s.to_string(),
        (Err(e), _, _) => e.to_string(),
    };
    let told: Vec<String> = failures.iter().map(ToString::to_string).chain(notices).collect();
    Some(if told.is_empty() { exit } else { format!("{exit}; {}", told.join("; ")) })
}

/// A worker that died before reporting every run: its process, how it ended, and what it had told.
struct LostWorker<'a> {
    pid: u32,
    exit: String,
    devices: &'a [DeviceInfo],
    failures: &'a [RankFailure],
}

/// Record the runs a dead worker did not report: the first unreported run is where it was (failed, or out of
/// memory when a rank said so); the rest of its repeat never started.
fn record_lost(
    suite: &Suite,
    opts: &RunnerOptions,
    worker: &LostWorker<'_>,
    pending: &[usize],
    ooms: &mut Vec<RunPlan>,
    recorder: &mut Recorder,
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<Flow, RunnerError> {
    let exit = &worker.exit;
    let analysis = analyze(&suite.graph);
    for (n, &i) in pending.iter().enumerate() {
        let message = if n == 0 {
            format!("the worker process running this repeat ended ({exit}) before the run finished")
        } else {
            format!("not run: the worker process of this repeat ended ({exit}) during an earlier run")
        };
        let device = device_in(worker.devices, &suite.plans[i]);
        let mut lost = lost_result(suite, opts, (&analysis, device), i, worker.pid, message);
        if n == 0 {
            // A rank that ran out of memory ended the group: the run is out of memory, not failed, and the
            // larger batches of its family are skipped.
            lost.outcome = outcome_with_rank_failures(lost.outcome, worker.failures, lost.plan.batch_size);
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
    mut stdin: ChildStdin,
    stop: StopFlag,
    watch: Arc<Watch>,
    (pid, group): (u32, bool),
    hung_after: Option<Duration>,
) -> JoinHandle<()> {
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
