//! Repeats in processes of their own (`run.isolation = "process"`, and every data-parallel run): the parent
//! side that starts a worker per repeat and records what it reports ([`parent`]), and the worker side that runs
//! the job it is handed ([`child`]). Both speak [`crate::runner::protocol`]; a group of ranks is started and run
//! through [`crate::runner::dist`].

pub mod child;
pub mod parent;

pub use child::serve;
pub(crate) use parent::run_isolated;
