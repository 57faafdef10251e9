//! The `trainbench` front binary: every command that does not train runs here, with no backend linked; the
//! others are handed over to `trainbench-engine` ([`trainbench::cli`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    trainbench::cli::main(trainbench::cli::Binary::Front)
}
