//! The data-parallel strategies a run can use ([`DataParallel`]) and what each implies (overlap, ZeRO stage,
//! server ranks).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a run's workers combine their gradients (PAI's job classes: 1w1g, 1wng / AllReduce, PS/worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DataParallel {
    /// One worker, one device: nothing is exchanged.
    #[default]
    Single,
    /// Synchronous data parallelism: gradients summed by a ring all-reduce in buckets after backward, averaged,
    /// and every worker applies the same optimizer step.
    AllReduce,
    /// Workers push gradients to dedicated server ranks, which hold the weights (sharded by tensor) and the
    /// optimizer state, and pull the updated weights back every step.
    ParameterServer {
        /// Server ranks (at least 1).
        servers: usize,
    },
    /// ZeRO stage 1: gradients reduce-scattered, each worker updates its shard of the weights with its shard
    /// of the optimizer state, and the weights are all-gathered after the step.
    #[serde(rename = "zero-1")]
    Zero1,
    /// ZeRO stage 2: as stage 1, and a worker keeps only its shard of the gradients after the reduce-scatter.
    #[serde(rename = "zero-2")]
    Zero2,
    /// ZeRO stage 3 (FSDP): the weights sharded too, each unit (a recomputable block, or the rest of the
    /// model) all-gathered before its forward and again before its backward, and freed after.
    #[serde(rename = "zero-3")]
    Zero3,
}

impl DataParallel {
    /// Name as written in specs and results.
    pub fn name(self) -> &'static str {
        match self {
            DataParallel::Single => "single",
            DataParallel::AllReduce => "all-reduce",
            DataParallel::ParameterServer { .. } => "parameter-server",
            DataParallel::Zero1 => "zero-1",
            DataParallel::Zero2 => "zero-2",
            DataParallel::Zero3 => "zero-3",
        }
    }

    /// Whether its exchange can run beside the computation: all-reduce and ZeRO-1/2 bucket by bucket during the
    /// backward pass; ZeRO-3 block by block, the next block's weights gathered while the current one computes.
    pub fn can_overlap(self) -> bool {
        matches!(self, DataParallel::AllReduce | DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3)
    }

    /// The ZeRO stage (1, 2 or 3) of a sharded strategy; `None` for the others.
    pub fn zero_stage(self) -> Option<u8> {
        match self {
            DataParallel::Zero1 => Some(1),
            DataParallel::Zero2 => Some(2),
            DataParallel::Zero3 => Some(3),
            _ => None,
        }
    }

    /// Whether nothing is exchanged.
    pub fn is_single(&self) -> bool {
        *self == DataParallel::Single
    }

    /// Parameter-server ranks beside the `workers` (0 for the other strategies).
    pub fn servers(self) -> usize {
        match self {
            DataParallel::ParameterServer { servers } => servers,
            _ => 0,
        }
    }

    /// Processes a run with `workers` workers needs: the workers and the servers.
    pub fn processes(self, workers: usize) -> usize {
        workers + self.servers()
    }
}
