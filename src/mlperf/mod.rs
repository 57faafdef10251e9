//! MLPerf Training logs in and out (docs/mlperf.md): the `:::MLLOG` line format ([`line`]), a run's log derived
//! from its result ([`events`], on the result's own clock: [`clock`]), where logs go ([`output`]), and the
//! time-to-train score over repeats ([`score`]), and published results read back ([`import`] a folder,
//! [`imported`] a log as a result).

pub mod clock;
pub mod events;
pub mod import;
pub mod imported;
pub mod line;
pub mod output;
pub mod score;
