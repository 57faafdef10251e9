//! The hidden `single-copy` subcommand: prints the shared-memory copy Open MPI's local ranks may use on this
//! machine, `cma` or `none` ([`crate::runner::dist::single_copy`]); the batch scripts `run --on slurm` writes ask
//! it on the node before `srun` starts the ranks, as `trainbench run` asks it before `mpirun`.

use super::{CommandError, Outcome};

/// Carry out `trainbench single-copy`: print the value of `btl_vader_single_copy_mechanism` for this machine.
pub fn execute() -> Result<Outcome, CommandError> {
    println!("{}", crate::runner::dist::single_copy::vader_single_copy_mechanism());
    Ok(Outcome::Success)
}
