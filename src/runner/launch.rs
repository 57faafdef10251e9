//! How `trainbench run` starts the processes of a run: one `trainbench worker` per repeat, or, for a
//! data-parallel run, its ranks through the MPI launcher (`mpirun`/`mpiexec`, `TRAINBENCH_MPIRUN` to choose
//! one) as `trainbench worker --ranks`, in a process group of their own so that a timeout ends all of them.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The MPI launcher found on this machine and whether it is Open MPI's (whose options differ from MPICH's).
#[derive(Debug, Clone)]
struct Launcher {
    program: String,
    open_mpi: bool,
}

fn launcher() -> Result<&'static Launcher, String> {
    static FOUND: OnceLock<Result<Launcher, String>> = OnceLock::new();
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
                    return Ok(Launcher { program, open_mpi: text.contains("Open MPI") || text.contains("OpenRTE") });
                }
            }
            Err("a data-parallel run starts its ranks with `mpirun`, which was not found: install an MPI (Debian: \
                 openmpi-bin libopenmpi-dev) or set TRAINBENCH_MPIRUN to its launcher"
                .to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The command that starts a run's worker: `exe worker`, or for `processes` ranks, the MPI launcher running
/// `exe worker --ranks` on this machine (oversubscribed: ranks may outnumber cores; never bound to cores).
pub fn worker_command(exe: &Path, processes: Option<usize>) -> Result<Command, String> {
    let Some(n) = processes else {
        let mut c = Command::new(exe);
        c.arg("worker");
        return Ok(c);
    };
    let l = launcher()?;
    let mut c = Command::new(&l.program);
    c.arg("-n").arg(n.to_string());
    if l.open_mpi {
        c.args(["--oversubscribe", "--bind-to", "none"]);
        // Containers often forbid the cross-memory attach Open MPI uses between local ranks.
        c.args(["--mca", "btl_vader_single_copy_mechanism", "none"]);
        if is_root() {
            c.arg("--allow-run-as-root");
        }
    }
    c.arg(exe).args(["worker", "--ranks"]);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        c.process_group(0);
    }
    Ok(c)
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

/// Whether a line a rank group printed on stderr says which rank failed and why (trainbench's own
/// `trainbench rank N:` lines, and the launcher's notice of a rank that died).
pub fn is_rank_failure_line(line: &str) -> bool {
    line.starts_with("trainbench rank ")
        || (line.contains("process rank") && (line.contains("exited") || line.contains("signal")))
        || line.contains("MPI_ABORT was invoked on rank")
}
