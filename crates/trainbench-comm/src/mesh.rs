//! The device mesh of a run: how its ranks split into tensor-parallel, pipeline-parallel and data-parallel
//! groups ([`Mesh`]), the pipeline schedule ([`PipelineSchedule`]) and where each rank sits ([`MeshCoords`]).
//!
//! Ranks are placed **tensor-innermost**, then data, then pipeline outermost:
//! `rank = (pp x dp_degree + dp) x tp_degree + tp`. A tensor group is `tp_degree` consecutive ranks, so it stays
//! inside a machine whenever the tensor degree divides the devices per machine; a pipeline hop (one message per
//! micro-batch) is what crosses machines first. The data-parallel degree is what is left: the world size over
//! the tensor and pipeline degrees, and the data-parallel strategy (all-reduce, ZeRO-1/2/3) runs along it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a pipeline orders the forward and backward passes of its micro-batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineSchedule {
    /// Every micro-batch's forward, then every backward: activations of all `m` micro-batches held per stage.
    Gpipe,
    /// One forward, one backward in the steady state: at most `p` micro-batches' activations held per stage.
    #[default]
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// 1F1B over `v` virtual stages per rank (layers dealt round-robin in `p x v` chunks): the bubble shrinks
    /// by `v`, the point-to-point traffic grows by `v`.
    #[serde(rename = "interleaved-1f1b")]
    Interleaved1F1B,
}

impl PipelineSchedule {
    /// Name as written in specs and results.
    pub fn name(self) -> &'static str {
        match self {
            PipelineSchedule::Gpipe => "gpipe",
            PipelineSchedule::OneFOneB => "1f1b",
            PipelineSchedule::Interleaved1F1B => "interleaved-1f1b",
        }
    }
}

/// The degrees of a run's device mesh and how its pipeline runs (see the module documentation). The default,
/// every degree 1, is plain data parallelism (or one device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Mesh {
    /// Ranks one layer's matrices are split over (Megatron-style tensor parallelism).
    pub tensor_parallel: usize,
    /// Pipeline stages the layers are cut into.
    pub pipeline_parallel: usize,
    /// Norms and dropout on sequence shards inside a tensor group (all-gather before and reduce-scatter after
    /// each parallel region instead of an all-reduce).
    #[serde(default)]
    pub sequence_parallel: bool,
    /// Pipeline schedule (read with more than one stage).
    #[serde(default)]
    pub pipeline_schedule: PipelineSchedule,
    /// Micro-batches per step through the pipeline (read with more than one stage).
    pub microbatches: usize,
    /// Model chunks per pipeline rank (more than 1 with `interleaved-1f1b` only).
    pub virtual_stages: usize,
    /// Ranks a mixture-of-experts model's experts are sharded over, along the data-parallel dimension
    /// ([`crate::expert::ExpertGroups`]); 1 (left out of results) without expert parallelism.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub expert_parallel: usize,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl Default for Mesh {
    fn default() -> Self {
        Self::flat()
    }
}

/// Where one rank sits in the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct MeshCoords {
    /// Index along the data-parallel dimension.
    pub dp: usize,
    /// Pipeline stage.
    pub pp: usize,
    /// Index inside the tensor group.
    pub tp: usize,
}

/// A mesh that does not fit the world size it is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    /// The tensor and pipeline degrees do not divide the world size (or one of them is 0).
    #[error("tensor_parallel {tensor} x pipeline_parallel {pipeline} does not divide the world size {world}")]
    Indivisible {
        /// Tensor degree.
        tensor: usize,
        /// Pipeline degree.
        pipeline: usize,
        /// World size.
        world: usize,
    },
    /// A rank at or beyond the world size.
    #[error("rank {rank} is outside a world of {world}")]
    RankOutside {
        /// The rank asked about.
        rank: usize,
        /// World size.
        world: usize,
    },
}

impl Mesh {
    /// No tensor or pipeline parallelism: every rank a data-parallel replica.
    pub fn flat() -> Self {
        Mesh {
            tensor_parallel: 1,
            pipeline_parallel: 1,
            sequence_parallel: false,
            pipeline_schedule: PipelineSchedule::OneFOneB,
            microbatches: 1,
            virtual_stages: 1,
            expert_parallel: 1,
        }
    }

    /// Whether it is [`Mesh::flat`] (results leave it out then).
    pub fn is_flat(&self) -> bool {
        *self == Self::flat()
    }

    /// Whether the model itself is split (tensor or pipeline degree above 1).
    pub fn splits_model(&self) -> bool {
        self.tensor_parallel > 1 || self.pipeline_parallel > 1
    }

    /// Model chunks each pipeline rank runs: the virtual stages of an interleaved 1F1B schedule, 1 under the
    /// others.
    pub fn chunks_per_rank(&self) -> usize {
        match self.pipeline_schedule {
            PipelineSchedule::Interleaved1F1B => self.virtual_stages.max(1),
            PipelineSchedule::Gpipe | PipelineSchedule::OneFOneB => 1,
        }
    }

    /// Ranks one model replica spans: tensor degree x pipeline degree.
    pub fn model_ranks(&self) -> usize {
        self.tensor_parallel.max(1).saturating_mul(self.pipeline_parallel.max(1))
    }

    /// The data-parallel degree over `world` ranks.
    pub fn data_parallel(&self, world: usize) -> Result<usize, MeshError> {
        let model = self.model_ranks();
        if self.tensor_parallel == 0 || self.pipeline_parallel == 0 || world == 0 || world % model != 0 {
            return Err(MeshError::Indivisible {
                tensor: self.tensor_parallel,
                pipeline: self.pipeline_parallel,
                world,
            });
        }
        Ok(world / model)
    }

    /// Where `rank` of `world` sits (tensor-innermost, pipeline outermost).
    pub fn coords(&self, rank: usize, world: usize) -> Result<MeshCoords, MeshError> {
        let dp_degree = self.data_parallel(world)?;
        if rank >= world {
            return Err(MeshError::RankOutside { rank, world });
        }
        let tp = rank % self.tensor_parallel;
        let rest = rank / self.tensor_parallel;
        Ok(MeshCoords { dp: rest % dp_degree, pp: rest / dp_degree, tp })
    }

    /// The rank at `coords` in a world of `world` (the inverse of [`Mesh::coords`]).
    pub fn rank(&self, coords: MeshCoords, world: usize) -> Result<usize, MeshError> {
        let dp_degree = self.data_parallel(world)?;
        let rank = (coords.pp * dp_degree + coords.dp) * self.tensor_parallel + coords.tp;
        if coords.tp >= self.tensor_parallel || coords.dp >= dp_degree || rank >= world {
            return Err(MeshError::RankOutside { rank, world });
        }
        Ok(rank)
    }

    /// Every rank's coordinates, in rank order.
    pub fn placement(&self, world: usize) -> Result<Vec<MeshCoords>, MeshError> {
        (0..world).map(|rank| self.coords(rank, world)).collect()
    }

    /// The ranks of `rank`'s group along one dimension, in order (its tensor group, its pipeline, or its
    /// data-parallel group).
    pub fn group(&self, rank: usize, world: usize, dimension: MeshDim) -> Result<Vec<usize>, MeshError> {
        let at = self.coords(rank, world)?;
        let size = match dimension {
            MeshDim::Tensor => self.tensor_parallel,
            MeshDim::Pipeline => self.pipeline_parallel,
            MeshDim::Data => self.data_parallel(world)?,
        };
        (0..size)
            .map(|i| {
                let c = match dimension {
                    MeshDim::Tensor => MeshCoords { tp: i, ..at },
                    MeshDim::Pipeline => MeshCoords { pp: i, ..at },
                    MeshDim::Data => MeshCoords { dp: i, ..at },
                };
                self.rank(c, world)
            })
            .collect()
    }
}

/// One dimension of a [`Mesh`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MeshDim {
    /// The tensor-parallel group.
    Tensor,
    /// The pipeline.
    Pipeline,
    /// The data-parallel group.
    Data,
}

impl MeshDim {
    /// Name in tables and results.
    pub fn name(self) -> &'static str {
        match self {
            MeshDim::Tensor => "tensor",
            MeshDim::Pipeline => "pipeline",
            MeshDim::Data => "data",
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn mesh(tp: usize, pp: usize) -> Mesh {
        Mesh { tensor_parallel: tp, pipeline_parallel: pp, ..Mesh::flat() }
    }

    #[test]
    fn ranks_are_placed_tensor_innermost_then_data_then_pipeline() {
        // 16 ranks: TP 2 x DP 2 x PP 4.
        let m = mesh(2, 4);
        assert_eq!(m.data_parallel(16), Ok(2));
        let c = |dp, pp, tp| MeshCoords { dp, pp, tp };
        assert_eq!(m.coords(0, 16), Ok(c(0, 0, 0)));
        assert_eq!(m.coords(1, 16), Ok(c(0, 0, 1)));
        assert_eq!(m.coords(2, 16), Ok(c(1, 0, 0)));
        assert_eq!(m.coords(4, 16), Ok(c(0, 1, 0)));
        assert_eq!(m.coords(15, 16), Ok(c(1, 3, 1)));
        for rank in 0..16 {
            assert_eq!(m.rank(m.coords(rank, 16).unwrap(), 16), Ok(rank));
        }
        assert_eq!(m.group(5, 16, MeshDim::Tensor).unwrap(), [4, 5]);
        assert_eq!(m.group(5, 16, MeshDim::Data).unwrap(), [5, 7]);
        assert_eq!(m.group(5, 16, MeshDim::Pipeline).unwrap(), [1, 5, 9, 13]);
        // Every coordinate once.
        let placed = m.placement(16).unwrap();
        let mut unique = placed.clone();
        unique.sort_by_key(|c| (c.pp, c.dp, c.tp));
        unique.dedup();
        assert_eq!(unique.len(), 16);
    }

    #[test]
    fn torchtitan_70b_layout_keeps_each_tensor_group_in_one_node() {
        // FSDP 32 x TP 8 on 256 GPUs, 8 per node.
        let m = mesh(8, 1);
        assert_eq!(m.data_parallel(256), Ok(32));
        for rank in 0..256 {
            let group = m.group(rank, 256, MeshDim::Tensor).unwrap();
            assert!(group.iter().all(|r| r / 8 == rank / 8), "rank {rank}: {group:?}");
        }
        assert_eq!(m.group(9, 256, MeshDim::Data).unwrap()[..3], [1, 9, 17]);
    }

    #[test]
    fn a_mesh_that_does_not_fit_is_refused() {
        assert_eq!(mesh(3, 1).data_parallel(8), Err(MeshError::Indivisible { tensor: 3, pipeline: 1, world: 8 }));
        assert!(mesh(0, 1).data_parallel(8).is_err());
        assert_eq!(mesh(2, 2).coords(8, 8), Err(MeshError::RankOutside { rank: 8, world: 8 }));
        assert!(Mesh::flat().is_flat() && !Mesh::flat().splits_model());
        assert_eq!(Mesh::flat().coords(3, 4), Ok(MeshCoords { dp: 3, pp: 0, tp: 0 }));
        let json = serde_json::to_value(mesh(2, 4)).unwrap();
        assert_eq!(json["pipeline_schedule"], "1f1b");
        assert_eq!(serde_json::from_value::<Mesh>(json).unwrap(), mesh(2, 4));
    }
}
