//! How `trainbench run` starts the processes of a run: one `trainbench worker` per repeat, or, for a
//! data-parallel run, its ranks as `trainbench worker --ranks`, in a process group of their own so that a
//! timeout ends all of them: MPI ranks through the MPI launcher (`mpirun`/`mpiexec`, `TRAINBENCH_MPIRUN` to
//! choose one), NCCL ranks through trainbench's own launcher (`trainbench worker --launch N`, [`launch_ranks`]),
//! which gives each rank torchrun's variables and, like `mpirun`, ends the group when one rank fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::launcher::OWN_LAUNCHER_VARIABLE;
use super::transport::Transport;
use crate::runner::protocol::{RankFailure, RankFailureKind, WorkerMessage, print_message};

/// The MPI launcher found on this machine and whether it is Open MPI's (whose options differ from MPICH's).
#[derive(Debug, Clone)]
struct Launcher {
    program: String,
    open_mpi: bool,
}

/// Why the ranks of a data-parallel run could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// No MPI launcher (`mpirun`, `mpiexec`, or `TRAINBENCH_MPIRUN`) runs on this machine.
    #[error(
        "a data-parallel run starts its ranks with `mpirun`, which was not found: install an MPI (Debian: \
         openmpi-bin libopenmpi-dev) or set TRAINBENCH_MPIRUN to its launcher"
    )]
    LauncherMissing,
    /// The operating system gave no TCP port for the rendezvous.
    #[error("no free TCP port for the ranks' rendezvous: {0}")]
    NoFreePort(#[source] std::io::Error),
    /// A rank's process could not be started.
    #[error("cannot start rank {rank}: {source}")]
    RankNotStarted {
        /// The rank that did not start.
        rank: usize,
        /// Why the operating system refused it.
        source: std::io::Error,
    },
}

fn launcher() -> Result<&'static Launcher, LaunchError> {
    static FOUND: OnceLock<Option<Launcher>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let candidates: Vec<String> = match std::env::var("TRAINBENCH_MPIRUN") {
                Ok(p) if !p.trim().is_empty() => vec![p],
                _ => vec!["mpirun".into(), "mpiexec".into()],
            };
            for program in candidates {
                if let Ok(out) = Command::new(&program).arg("--version").output() {
                    let text =
                        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                    return Some(Launcher { program, open_mpi: text.contains("Open MPI") || text.contains("OpenRTE") });
                }
            }
            None
        })
        .as_ref()
        .ok_or(LaunchError::LauncherMissing)
}

/// The command that starts a run's worker: `exe worker`, or for `processes` ranks of `engine`, the launcher
/// that starts them on this machine: trainbench's own for NCCL, the MPI launcher running `exe worker --ranks`
/// for MPI (oversubscribed: ranks may outnumber cores; never bound to cores).
pub fn worker_command(exe: &Path, processes: Option<usize>, engine: Transport) -> Result<Command, LaunchError> {
    let Some(n) = processes else {
        let mut c = Command::new(exe);
        c.arg("worker");
        return Ok(c);
    };
    if let Transport::Nccl { .. } = engine {
        let mut c = Command::new(exe);
        c.args(["worker", "--launch", &n.to_string()]).args(transport_args(engine));
        in_own_group(&mut c);
        return Ok(c);
    }
    let l = launcher()?;
    let mut c = Command::new(&l.program);
    c.arg("-n").arg(n.to_string());
    if l.open_mpi {
        c.args(["--oversubscribe", "--bind-to", "none"]);
        // Cross-memory attach where this machine allows it (containers often forbid it), probed once.
        c.args(["--mca", "btl_vader_single_copy_mechanism", super::single_copy::vader_single_copy_mechanism()]);
        if is_root() {
            c.arg("--allow-run-as-root");
        }
    }
    c.arg(exe).args(["worker", "--ranks"]);
    in_own_group(&mut c);
    Ok(c)
}

/// The arguments of `trainbench worker` that name `engine` (see `commands::worker`).
pub fn transport_args(engine: Transport) -> Vec<String> {
    match engine {
        Transport::Mpi => vec!["--transport".into(), "mpi".into()],
        Transport::Nccl { first_device, timeout } => vec![
            "--transport".into(),
            "nccl".into(),
            "--cuda-device".into(),
            first_device.to_string(),
            "--comm-timeout-s".into(),
            timeout.as_secs_f64().to_string(),
        ],
    }
}

/// Start `c` as the leader of a process group of its own (which its children join), so one signal ends all.
fn in_own_group(c: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        c.process_group(0);
    }
    #[cfg(not(unix))]
    let _ = c;
}

/// trainbench's launcher for NCCL ranks on one machine (`trainbench worker --launch N`): start `n` ranks of
/// `exe worker --ranks` with `engine`'s arguments and torchrun's variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
/// `LOCAL_WORLD_SIZE`, `MASTER_ADDR` = 127.0.0.1, `MASTER_PORT` = a free port), then wait for them. `Ok(true)`
/// when every rank succeeded.
pub fn launch_ranks(exe: &Path, n: usize, engine: Transport) -> Result<bool, LaunchError> {
    let port = free_port()?;
    let commands = (0..n)
        .map(|rank| {
            let mut c = Command::new(exe);
            c.args(["worker", "--ranks"]).args(transport_args(engine));
            c.env("RANK", rank.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env(OWN_LAUNCHER_VARIABLE, "1");
            c
        })
        .collect();
    run_group(commands)
}

/// A TCP port free on the loopback interface now (the operating system's choice; rank 0's store binds it a
/// moment later).
fn free_port() -> Result<u16, LaunchError> {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).map_err(LaunchError::NoFreePort)
}

/// Where the launcher writes the worker protocol: rank 0's lines and the ranks' typed failures, one whole line
/// at a time under the lock, so that lines from several ranks never interleave.
type ProtocolOut = Arc<Mutex<Box<dyn Write + Send>>>;

/// Start one process per command, rank 0 on this process's standard input, and wait for all. This process's
/// standard output carries the worker protocol to the parent: rank 0's output, and from the other ranks only
/// their [`WorkerMessage::RankFailed`] lines (the rest of their output goes to standard error). When one rank
/// ends badly, say which and how (a [`RankFailure`] of kind `died` to the parent, the same line on stderr for
/// people), kill the others (they would wait for it in a collective) and return `Ok(false)`.
pub fn run_group(commands: Vec<Command>) -> Result<bool, LaunchError> {
    run_group_into(commands, Arc::new(Mutex::new(Box::new(std::io::stdout()))))
}

/// [`run_group`], writing the protocol to `out`.
fn run_group_into(commands: Vec<Command>, out: ProtocolOut) -> Result<bool, LaunchError> {
    let mut children: Vec<(usize, Child)> = Vec::new();
    let (done, forwarded) = std::sync::mpsc::channel::<()>();
    let mut forwarders = 0;
    for (rank, mut c) in commands.into_iter().enumerate() {
        if rank > 0 {
            c.stdin(Stdio::null());
        }
        c.stdout(Stdio::piped());
        match c.spawn() {
            Ok(mut child) => {
                if let Some(stdout) = child.stdout.take() {
                    let (out, done) = (out.clone(), done.clone());
                    std::thread::spawn(move || {
                        forward(rank, stdout, &out);
                        let _ = done.send(());
                    });
                    forwarders += 1;
                }
                children.push((rank, child));
            }
            Err(e) => {
                end_all(&mut children);
                drain(&forwarded, forwarders);
                return Err(LaunchError::RankNotStarted { rank, source: e });
            }
        }
    }
    let mut ok = true;
    while !children.is_empty() {
        // The first rank found ended, and how, when it failed.
        let mut ended: Option<(usize, Option<String>)> = None;
        for (i, (_, child)) in children.iter_mut().enumerate() {
            let failed = match child.try_wait() {
                Ok(Some(status)) if status.success() => None,
                Ok(Some(status)) => Some(format!("the process ended ({status})")),
                Ok(None) => continue,
                Err(e) => Some(format!("cannot be waited for ({e})")),
            };
            ended = Some((i, failed));
            break;
        }
        match ended {
            Some((i, failed)) => {
                let (rank, _) = children.swap_remove(i);
                if let Some(message) = failed {
                    let failure = RankFailure { rank, kind: RankFailureKind::Died, run: None, message };
                    eprintln!("{failure}");
                    if let Ok(mut out) = out.lock() {
                        let _ = print_message(&mut *out, &WorkerMessage::RankFailed(failure));
                    }
                    ok = false;
                    end_all(&mut children);
                }
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    drain(&forwarded, forwarders);
    Ok(ok)
}

/// Pass rank `rank`'s standard output on: rank 0's lines and the other ranks' [`WorkerMessage::RankFailed`]
/// lines to `out`, whole, as they come; the other ranks' other lines (a library's chatter) to stderr.
fn forward(rank: usize, from: impl Read, out: &ProtocolOut) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        let protocol =
            rank == 0 || matches!(serde_json::from_slice::<WorkerMessage>(&line), Ok(WorkerMessage::RankFailed(_)));
        if protocol {
            if let Ok(mut out) = out.lock() {
                let _ = out.write_all(&line).and_then(|()| out.flush());
            }
        } else {
            let _ = std::io::stderr().write_all(&line);
        }
    }
}

/// How long the ranks' output may take to drain once every rank has ended (a process a rank started may hold
/// its output open after it).
const DRAIN: Duration = Duration::from_secs(5);

/// Wait, up to [`DRAIN`], for the `n` forwarding threads to pass on the last of their ranks' output (each ends
/// when its rank's output closes).
fn drain(forwarded: &std::sync::mpsc::Receiver<()>, n: usize) {
    let until = std::time::Instant::now() + DRAIN;
    for _ in 0..n {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if forwarded.recv_timeout(left).is_err() {
            break;
        }
    }
}

/// Kill and reap every child still running.
fn end_all(children: &mut Vec<(usize, Child)>) {
    for (_, child) in children.iter_mut() {
        let _ = child.kill();
    }
    for (_, child) in children.iter_mut() {
        let _ = child.wait();
    }
    children.clear();
}

#[cfg(unix)]
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(not(unix))]
fn is_root() -> bool {
    false
}

/// Whether a line a group of ranks printed on stderr is the MPI launcher's notice of a rank that died or aborted,
/// kept for the message of a run the group did not report (for people only: how the run ended is decided by the
/// ranks' typed failures, [`WorkerMessage::RankFailed`]).
pub fn is_launcher_failure_line(line: &str) -> bool {
    (line.contains("process rank") && (line.contains("exited") || line.contains("signal")))
        || line.contains("MPI_ABORT was invoked on rank")
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_group_whose_ranks_all_succeed_succeeds() {
        assert!(run_group(vec![sh("exit 0"), sh("sleep 0.2"), sh("true")]).unwrap());
    }

    #[test]
    fn a_rank_that_fails_ends_the_others_at_once() {
        let start = Instant::now();
        // Rank 0 would wait 60 s for its peer (as in a collective); rank 1 fails.
        let ok = run_group(vec![sh("sleep 60"), sh("sleep 0.2; exit 3")]).unwrap();
        assert!(!ok);
        assert!(start.elapsed() < Duration::from_secs(30), "rank 0 was killed, not waited for");
    }

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_parent_gets_rank_0s_lines_and_every_ranks_typed_failure() {
        let oom = RankFailure {
            rank: 1,
            kind: RankFailureKind::OutOfMemory,
            run: Some("m.b8.fp32.1x2.r0".into()),
            message: "CUDA out of memory".into(),
        };
        let line = serde_json::to_string(&WorkerMessage::RankFailed(oom.clone())).unwrap();
        let buf = Shared::default();
        // Rank 1 fails only once rank 0 has written its line (a loaded machine may start rank 0's shell late).
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("rank0-wrote");
        let rank0 = format!("echo rank0-line; touch '{}'; sleep 60", mark.display());
        let rank1 =
            format!("until [ -e '{}' ]; do sleep 0.01; done; echo chatter; echo '{line}'; exit 3", mark.display());
        let ok = run_group_into(vec![sh(&rank0), sh(&rank1)], Arc::new(Mutex::new(Box::new(buf.clone())))).unwrap();
        assert!(!ok);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"rank0-line"), "{text}");
        assert!(!text.contains("chatter"), "another rank's other output goes to stderr: {text}");
        let failures: Vec<RankFailure> = lines
            .iter()
            .filter_map(|l| match serde_json::from_str::<WorkerMessage>(l) {
                Ok(WorkerMessage::RankFailed(f)) => Some(f),
                _ => None,
            })
            .collect();
        assert!(failures.contains(&oom), "{text}");
        let died = failures.iter().find(|f| f.kind == RankFailureKind::Died).unwrap();
        assert_eq!(died.rank, 1);
        assert!(died.message.contains("the process ended"), "{died:?}");
    }

    /// `sleep 60` as a rank that writes its pid into `pid_file` between fork and exec, so the pid is there by
    /// the time `spawn` returns.
    fn sleeper(pid_file: &std::fs::File) -> Command {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let fd = pid_file.as_raw_fd();
        let mut c = Command::new("sleep");
        c.arg("60");
        // SAFETY: the hook runs in the forked child before exec and calls only `getpid` and `pwrite`, both
        // async-signal-safe, on a descriptor the parent keeps open; it allocates nothing.
        unsafe {
            c.pre_exec(move || {
                let pid = libc::getpid().to_le_bytes();
                libc::pwrite(fd, pid.as_ptr().cast(), pid.len(), 0);
                Ok(())
            });
        }
        c
    }

    /// The pid a [`sleeper`] wrote.
    fn pid_in(file: &std::fs::File) -> libc::pid_t {
        use std::os::unix::fs::FileExt;
        let mut bytes = [0u8; 4];
        file.read_exact_at(&mut bytes, 0).unwrap();
        libc::pid_t::from_le_bytes(bytes)
    }

    /// Whether process `pid` exists: running, or ended and not yet reaped (a zombie).
    fn exists(pid: libc::pid_t) -> bool {
        // SAFETY: signal 0 sends nothing; `kill` only checks that the process exists.
        unsafe { libc::kill(pid, 0) == 0 }
    }

    #[test]
    fn a_rank_that_cannot_start_is_an_error_and_leaves_no_rank_running() {
        let pid_file = tempfile::tempfile().unwrap();
        let missing = Command::new("/nonexistent/trainbench-rank");
        let e = run_group(vec![sleeper(&pid_file), missing]).unwrap_err();
        assert!(matches!(e, LaunchError::RankNotStarted { rank: 1, .. }), "{e}");
        assert!(e.to_string().contains("cannot start rank 1"), "{e}");
        let rank0 = pid_in(&pid_file);
        assert!(rank0 > 0 && rank0.unsigned_abs() != std::process::id(), "{rank0}");
        // Killed and reaped: neither still sleeping nor a zombie.
        assert!(!exists(rank0), "rank 0 (pid {rank0}) was left running or unreaped");
    }

    #[test]
    fn the_ranks_get_torchruns_variables() {
        let dir = std::env::temp_dir().join(format!("tb-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A stand-in for `trainbench worker --ranks`: writes what it was given.
        let exe = dir.join("rank.sh");
        std::fs::write(
            &exe,
            "#!/bin/sh\necho \"$* $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $TRAINBENCH_LAUNCHER\" > \"$(dirname \"$0\")/rank$RANK\"\n",
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let engine = Transport::Nccl { first_device: 1, timeout: Duration::from_secs(90) };
        assert!(launch_ranks(&exe, 2, engine).unwrap());
        for rank in 0..2 {
            let got = std::fs::read_to_string(dir.join(format!("rank{rank}"))).unwrap();
            assert_eq!(
                got.trim(),
                format!(
                    "worker --ranks --transport nccl --cuda-device 1 --comm-timeout-s 90 {rank} 2 {rank} 2 127.0.0.1 1"
                )
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
