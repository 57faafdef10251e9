//! The hidden `worker` subcommand: runs the repeat `trainbench run` hands it in a process of its own (see
//! `runner::isolate`). Not meant to be typed by people.

use std::time::Duration;

use super::{CommandError, Outcome};
use crate::runner::dist::Transport;

/// Arguments of `trainbench worker` (the job comes on standard input).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This process is one rank of a data-parallel group started by the transport's launcher.
    #[arg(long)]
    pub ranks: bool,
    /// Start this many ranks (`trainbench worker --ranks`) on this machine with torchrun's variables and wait
    /// for them: trainbench's own launcher, for NCCL ranks.
    #[arg(long, conflicts_with = "ranks")]
    pub launch: Option<usize>,
    /// The transport connecting the ranks.
    #[arg(long, value_enum, default_value = "mpi")]
    pub transport: TransportName,
    /// NCCL: the CUDA device of local rank 0 (local rank r drives the r-th device after it).
    #[arg(long, default_value_t = 0)]
    pub cuda_device: usize,
    /// NCCL: bound on the rendezvous and on each collective, in seconds.
    #[arg(long, default_value_t = 1800.0)]
    pub comm_timeout_s: f64,
}

/// The transports `--transport` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportName {
    /// MPI (CPU ranks).
    Mpi,
    /// NCCL (CUDA ranks).
    Nccl,
}

impl Args {
    fn transport(&self) -> Result<Transport, CommandError> {
        Ok(match self.transport {
            TransportName::Mpi => Transport::Mpi,
            TransportName::Nccl => {
                let timeout = Duration::try_from_secs_f64(self.comm_timeout_s)
                    .ok()
                    .filter(|t| !t.is_zero())
                    .ok_or_else(|| {
                        CommandError::Input(format!(
                            "--comm-timeout-s {}: the timeout must be a positive number of seconds",
                            self.comm_timeout_s
                        ))
                    })?;
                Transport::Nccl { first_device: self.cuda_device, timeout }
            }
        })
    }
}

/// Carry out `trainbench worker`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let engine = args.transport()?;
    let served = match args.launch {
        Some(n) => {
            let exe = std::env::current_exe().map_err(CommandError::OwnExecutable)?;
            crate::runner::dist::launch::launch_ranks(&exe, n, engine)?
        }
        None => crate::runner::isolate::serve(args.ranks.then_some(engine))?,
    };
    Ok(if served { Outcome::Success } else { Outcome::Failure })
}
