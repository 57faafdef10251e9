//! The engines that connect a group's ranks ([`Transport`]: CUDA ranks through NCCL, the others through MPI),
//! chosen from where the plans run, and joining one ([`open_transport`]); nothing else in the runner knows which
//! engine it talks to.

use std::time::Duration;

use trainbench_comm::Communicator;
use trainbench_contract::linked::Rendezvous;
use trainbench_contract::{DeviceSelector, RunPlan};

use super::launcher::LauncherEnv;
use crate::runner::protocol::HUNG_GRACE;

/// c10d's own bound on a collective, used when the runs have no `run.timeout_s`.
const DEFAULT_COMM_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The engine that connects a group's ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Transport {
    /// MPI (`MPI_COMM_WORLD`, feature `mpi`): CPU ranks, and every rank that stages through the host.
    Mpi,
    /// NCCL through the tch backend's c10d shim (feature `tch`): CUDA ranks, one per GPU; local rank `r`
    /// drives CUDA device `first_device + r`.
    Nccl {
        /// The CUDA device of local rank 0 (the plans' device index).
        first_device: usize,
        /// Bound on the rendezvous and on each collective: the runs' timeout plus the hung-worker grace, or
        /// c10d's 30 minutes without one.
        timeout: Duration,
    },
}

/// Why one group of ranks cannot run a set of plans.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransportError {
    /// Plans on different kinds of device, or on CUDA from different first devices, share one group.
    #[error(
        "run `{run}` runs on {device}, other runs of the same ranks on {first}: one group of ranks runs on one \
         kind of device and, on CUDA, from one first device (CUDA ranks through NCCL, the others through MPI); \
         launch them separately"
    )]
    MixedDevices {
        /// The run that differs.
        run: String,
        /// Its device.
        device: DeviceSelector,
        /// The device of the runs before it.
        first: DeviceSelector,
    },
}

impl Transport {
    /// The engine for a group that runs `plans`: NCCL when they run on CUDA, MPI otherwise; plans on CUDA and
    /// elsewhere, or on different CUDA devices, cannot share a group.
    pub fn for_plans<'a>(plans: impl IntoIterator<Item = &'a RunPlan>) -> Result<Transport, TransportError> {
        let mut engine: Option<(Transport, DeviceSelector)> = None;
        let mut timeout = Some(0.0f64);
        for plan in plans {
            timeout = timeout.zip(plan.timeout_s).map(|(a, b)| a.max(b));
            let this = match plan.device {
                DeviceSelector::Cuda(index) => {
                    Transport::Nccl { first_device: index.unwrap_or(0), timeout: DEFAULT_COMM_TIMEOUT }
                }
                _ => Transport::Mpi,
            };
            match engine {
                Some((e, first)) if e != this => {
                    return Err(TransportError::MixedDevices { run: plan.id.to_string(), device: plan.device, first });
                }
                _ => engine = Some((this, plan.device)),
            }
        }
        Ok(match engine {
            Some((Transport::Nccl { first_device, .. }, _)) => Transport::Nccl {
                first_device,
                timeout: timeout
                    .filter(|t| *t > 0.0)
                    .map_or(DEFAULT_COMM_TIMEOUT, |t| Duration::from_secs_f64(t) + HUNG_GRACE),
            },
            _ => Transport::Mpi,
        })
    }

    /// Name as recorded in results (`mpi`, `nccl`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Mpi => "mpi",
            Transport::Nccl { .. } => "nccl",
        }
    }
}

/// An engine's group, the host this rank runs on and, for NCCL, the CUDA device it drives.
pub(crate) struct Opened {
    pub(crate) comm: Box<dyn Communicator>,
    pub(crate) host: String,
    pub(crate) cuda_device: Option<usize>,
}

/// Join the group through `engine`. A third engine is one more arm here (and a variant of [`Transport`]) that
/// returns its `Communicator`.
pub(crate) fn open_transport(engine: Transport) -> Result<Opened, String> {
    match engine {
        Transport::Mpi => open_mpi(),
        Transport::Nccl { first_device, timeout } => open_nccl(first_device, timeout),
    }
}

/// Why this process cannot open an engine: left out of the build (rebuild with its feature), or this process
/// links no engine at all (only `trainbench-engine` starts ranks).
fn engine_missing(what: &str, feature: &str, built: bool) -> String {
    if built {
        format!("{what} is linked into trainbench-engine, not this process; ranks run `trainbench-engine worker`")
    } else {
        format!("{what}: trainbench was built without feature `{feature}`; rebuild with `--features {feature}`")
    }
}

fn open_mpi() -> Result<Opened, String> {
    let Some(join) = crate::backend_registry::linked().mpi else {
        return Err(engine_missing(
            "data-parallel runs on CPU ranks need the MPI engine",
            "mpi",
            cfg!(feature = "mpi"),
        ) + " (Debian packages libopenmpi-dev openmpi-bin libclang-dev)");
    };
    let joined = join().map_err(|e| e.to_string())?;
    Ok(Opened { comm: joined.comm, host: joined.host, cuda_device: None })
}

/// NCCL's rendezvous from torchrun's variables (`MASTER_ADDR`, `MASTER_PORT`) and the launcher's rank and world.
fn open_nccl(first_device: usize, timeout: Duration) -> Result<Opened, String> {
    let Some(nccl) = crate::backend_registry::linked().nccl else {
        return Err(engine_missing(
            "data-parallel runs on CUDA ranks need the NCCL engine of the tch backend",
            "tch",
            cfg!(feature = "tch"),
        ));
    };
    let launcher = LauncherEnv::get();
    let (Some(addr), Some(port)) = launcher.master.clone() else {
        return Err("CUDA ranks meet through NCCL's TCP store at MASTER_ADDR:MASTER_PORT, which are not set: start \
                    them with `trainbench run` (one node) or `torchrun`, or set both beside the launcher's rank \
                    variables"
            .into());
    };
    let master_port = port.trim().parse::<u16>().map_err(|_| format!("MASTER_PORT `{port}` is not a TCP port"))?;
    let (Some(rank), Some((_, world))) = (launcher.rank, launcher.world) else {
        return Err("CUDA ranks take their rank and world size from the launcher (RANK and WORLD_SIZE, or Slurm's or \
                    MPI's variables), which are not set"
            .into());
    };
    let who = launcher.launcher_name("unknown");
    let device = first_device + launcher.local_rank;
    let at = Rendezvous { master_addr: addr.trim().to_string(), master_port, rank, world, device, timeout };
    let comm = (nccl.open)(&at).map_err(|e| format!("rank {rank} of {world} ({who}): {e}"))?;
    Ok(Opened { comm, host: host_name(), cuda_device: Some(device) })
}

/// This machine's host name (the kernel's), for the result's list of hosts.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unwrap_used)]
    fn plan(device: DeviceSelector, timeout_s: Option<f64>) -> RunPlan {
        let mut p = RunPlan::for_tests("p", 2);
        p.device = device;
        p.timeout_s = timeout_s;
        p
    }

    #[test]
    fn cuda_plans_take_nccl_and_the_others_mpi() {
        assert_eq!(Transport::for_plans([&plan(DeviceSelector::Cpu, None)]), Ok(Transport::Mpi));
        assert_eq!(
            Transport::for_plans([&plan(DeviceSelector::Cuda(Some(1)), None)]),
            Ok(Transport::Nccl { first_device: 1, timeout: DEFAULT_COMM_TIMEOUT })
        );
        let mixed = Transport::for_plans([&plan(DeviceSelector::Cuda(None), None), &plan(DeviceSelector::Cpu, None)]);
        assert!(mixed.is_err_and(|e| e.to_string().contains("one kind of device")));
    }

    #[test]
    fn the_nccl_timeout_is_the_runs_timeout_plus_the_grace() {
        let plans = [plan(DeviceSelector::Cuda(None), Some(30.0)), plan(DeviceSelector::Cuda(None), Some(90.0))];
        assert_eq!(
            Transport::for_plans(&plans),
            Ok(Transport::Nccl { first_device: 0, timeout: Duration::from_secs(90) + HUNG_GRACE })
        );
        let one_without = [plan(DeviceSelector::Cuda(None), Some(30.0)), plan(DeviceSelector::Cuda(None), None)];
        assert_eq!(
            Transport::for_plans(&one_without),
            Ok(Transport::Nccl { first_device: 0, timeout: DEFAULT_COMM_TIMEOUT })
        );
    }
}
