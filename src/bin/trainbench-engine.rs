//! The `trainbench-engine` binary: the same command line with the training engines this build links (libtorch,
//! wgpu, MPI, NCCL) installed. `trainbench` hands `run`, `devices`, `calibrate` and the internal worker
//! commands to it; its workers and ranks are this binary again.

use std::process::ExitCode;

fn main() -> ExitCode {
    trainbench::backend_registry::install(trainbench_linked::linked());
    trainbench::cli::main(trainbench::cli::Binary::Engine)
}
