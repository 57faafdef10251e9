//! What a data-parallel strategy shards over its ranks ([`Sharding`]) and one rank's share of a step's memory
//! under it: ZeRO-1 the optimizer state, ZeRO-2 the gradients too, ZeRO-3 (FSDP) the weights too.

use serde::Serialize;
use trainbench_comm::DataParallel;
use trainbench_graph::analysis::MemoryEstimate;

/// What a data-parallel layout shards across its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharding {
    /// Every rank holds everything (DDP).
    Replicated,
    /// ZeRO-1: the optimizer state.
    Zero1,
    /// ZeRO-2: the optimizer state and the gradients.
    Zero2,
    /// ZeRO-3 (FSDP): the optimizer state, the gradients and the weights.
    Zero3,
}

impl Sharding {
    /// What `strategy` shards (parameter servers and plain all-reduce: nothing).
    pub fn of(strategy: DataParallel) -> Sharding {
        match strategy {
            DataParallel::Zero1 => Sharding::Zero1,
            DataParallel::Zero2 => Sharding::Zero2,
            DataParallel::Zero3 => Sharding::Zero3,
            DataParallel::Single | DataParallel::AllReduce | DataParallel::ParameterServer { .. } => {
                Sharding::Replicated
            }
        }
    }

    /// One rank's share of `mem` (one device's step, everything held) when `d` ranks shard as this says: the
    /// optimizer state (ZeRO-1), the gradients too (ZeRO-2), and the parameters' weights too (ZeRO-3; buffers,
    /// `buffer_bytes` of `mem.weights`, stay whole). Activations and workspace are the rank's own.
    pub fn share_of(self, mem: &MemoryEstimate, d: usize, buffer_bytes: u64) -> MemoryEstimate {
        let d = d.max(1) as u64;
        let shard = |bytes: u64| bytes.div_ceil(d);
        let mut out = mem.clone();
        if self != Sharding::Replicated {
            out.optimizer_state = shard(mem.optimizer_state);
        }
        if matches!(self, Sharding::Zero2 | Sharding::Zero3) {
            out.gradients = shard(mem.gradients);
        }
        if self == Sharding::Zero3 {
            let buffers = buffer_bytes.min(mem.weights);
            out.weights = shard(mem.weights - buffers) + buffers;
        }
        out.total = out.weights + out.gradients + out.optimizer_state + out.activations + out.workspace;
        out.activation_share = if out.total == 0 { 0.0 } else { out.activations as f64 / out.total as f64 };
        out.feature_maps_dominate = out.activations > out.weights + out.gradients + out.optimizer_state;
        out
    }

    /// Name in tables (`zero-3 (fsdp)`).
    pub fn name(self) -> &'static str {
        match self {
            Sharding::Replicated => "all-reduce (replicated)",
            Sharding::Zero1 => "zero-1",
            Sharding::Zero2 => "zero-2",
            Sharding::Zero3 => "zero-3 (fsdp)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranks_share_of_the_step_memory_follows_the_strategy() {
        let mem = MemoryEstimate {
            batch_size: 4,
            precision: trainbench_graph::training::Precision::Fp32,
            optimizer: "adam".into(),
            weights: 8_000 + 40,
            gradients: 8_000,
            optimizer_state: 16_000,
            activations: 1_000,
            workspace: 10,
            total: 33_050,
            activation_share: 1_000.0 / 33_050.0,
            feature_maps_dominate: false,
        };
        let at = |s: Sharding| s.share_of(&mem, 8, 40);
        assert_eq!(at(Sharding::Replicated), mem);
        let z1 = at(Sharding::Zero1);
        assert_eq!((z1.weights, z1.gradients, z1.optimizer_state), (8_040, 8_000, 2_000));
        let z2 = at(Sharding::Zero2);
        assert_eq!((z2.weights, z2.gradients, z2.optimizer_state), (8_040, 1_000, 2_000));
        let z3 = at(Sharding::Zero3);
        assert_eq!((z3.weights, z3.gradients, z3.optimizer_state, z3.total), (1_040, 1_000, 2_000, 5_050));
        assert!(z3.feature_maps_dominate == (1_000 > 4_040));
        assert_eq!(Sharding::Zero3.share_of(&mem, 1, 40), mem, "one rank holds everything");
    }
}
