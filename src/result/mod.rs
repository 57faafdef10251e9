//! The versioned result format: one [`RunResult`] per run (metrics + environment manifest) and a [`SuiteIndex`]
//! per results folder. `schema/result.schema.json` is generated from these types; doc comments are its text.
//!
//! Conventions: times are seconds (`_s`), memory is bytes (`_bytes`), rates are per second (`_per_s`),
//! fractions are in `0..=1` (not percent) unless the field name says `_percent`. A figure that could not be
//! measured is never written as zero: it is `null` (for `Option`) or a [`Sampled::Unavailable`] with a reason.

pub mod analysis;
pub mod distributed;
pub mod environment;
pub mod expert_load;
pub mod identity;
pub mod index;
pub mod load;
pub mod metrics;
pub mod mlperf;
pub mod prediction;
pub mod run;
pub mod sampled;
pub mod schema;
pub mod utilization;

pub use analysis::{AnalysisSummary, MemoryEstimate, StageRecord};
pub use environment::{CpuInfo, Environment, GpuDevice, GpuInventory, OsInfo, ProcessInfo, SchedulerJob};
pub use expert_load::{ExpertLoad, LayerLoad};
pub use index::{INDEX_FILE, IndexEntry, SuiteIndex};
pub use load::{LoadError, LoadedResult};
pub use metrics::{
    CpuUtilization, FlopUtilization, FreeRunningThroughput, GpuUtilization, GradientNorm, LossSummary, MemoryBreakdown,
    MemoryMeasuredSummary, Metrics, PhaseBreakdown, PhaseStat, PowerEnergy, SteadyState, StepTimeStats, Throughput,
};
pub use run::{DataSummary, FORMAT_VERSION, LoaderThroughput, RunOutcome, RunResult};
pub use sampled::Sampled;
pub use schema::{RESULT_SCHEMA_ID, result_schema, result_schema_text};
pub use utilization::{HardwareFlopUtilization, Mfu, ModelFlopUtilization, PeakUsed};
