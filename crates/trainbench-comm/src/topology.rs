//! Where a run's workers are and how they combine their gradients: the one [`Topology`] every stage reads
//! (the plan, the runner and its launchers, the performance model, results and reports).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exchange::BUCKET_BYTES;
use crate::mesh::{Mesh, MeshCoords};
use crate::strategy::DataParallel;

/// Link carrying gradients and weights between devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Interconnect {
    /// PCIe within a machine.
    #[default]
    Pcie,
    /// NVLink within a machine.
    Nvlink,
    /// Ethernet between machines.
    Ethernet,
    /// InfiniBand between machines.
    Infiniband,
}

impl Interconnect {
    /// Name as written in specs and results.
    pub fn name(self) -> &'static str {
        match self {
            Interconnect::Pcie => "pcie",
            Interconnect::Nvlink => "nvlink",
            Interconnect::Ethernet => "ethernet",
            Interconnect::Infiniband => "infiniband",
        }
    }
}

/// A run's topology: machines, devices (workers) per machine, the strategy that combines their gradients
/// (with its server ranks) and the link between them.
///
/// In JSON it is written flat into the run's plan as `world_size` (nodes x devices per node, for readers of
/// results), `strategy` (left out when `single`), `nodes`, `devices_per_node` and `interconnect`. A result
/// written before the last three were stored reads as one machine holding every worker on PCIe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "TopologyWire", into = "TopologyWire")]
pub struct Topology {
    /// How the workers combine gradients.
    pub strategy: DataParallel,
    /// Machines (at least 1).
    pub nodes: usize,
    /// Workers per machine (at least 1).
    pub devices_per_node: usize,
    /// Link carrying gradients and weights.
    pub interconnect: Interconnect,
    /// Bytes per all-reduce bucket and per ZeRO-1/2 unit ([`crate::exchange::BUCKET_BYTES`] by default).
    pub bucket_bytes: u64,
    /// Exchange beside the computation: each bucket during the backward pass as soon as its gradients exist
    /// (all-reduce, ZeRO-1/2); each block's weights gathered while the block before it computes, and its
    /// gradients reduce-scattered while the next one does (ZeRO-3). `false` exchanges between the computation.
    pub overlap: bool,
    /// The device mesh: tensor and pipeline degrees (the strategy runs along the data-parallel dimension
    /// that is left) and the pipeline's schedule; [`Mesh::flat`] for plain data parallelism.
    pub mesh: Mesh,
}

impl Default for Topology {
    fn default() -> Self {
        Self::single()
    }
}

impl Topology {
    /// One worker on one device: nothing exchanged.
    pub fn single() -> Self {
        Self::on_one_node(DataParallel::Single, 1)
    }

    /// `devices` workers on one machine over PCIe, combined by `strategy`.
    pub fn on_one_node(strategy: DataParallel, devices: usize) -> Self {
        Topology {
            strategy,
            nodes: 1,
            devices_per_node: devices,
            interconnect: Interconnect::Pcie,
            bucket_bytes: BUCKET_BYTES,
            overlap: strategy.can_overlap(),
            mesh: Mesh::flat(),
        }
    }

    /// World size: the workers (nodes x devices per node), parameter servers not counted. Without a
    /// tensor or pipeline degree it is the data-parallel degree too.
    pub fn world_size(&self) -> usize {
        self.nodes * self.devices_per_node
    }

    /// Data-parallel degree: the world size over the mesh's tensor and pipeline degrees.
    pub fn data_parallel(&self) -> usize {
        (self.world_size() / self.mesh.model_ranks().max(1)).max(1)
    }

    /// Processes the run needs: the workers and, for parameter servers, the server ranks.
    pub fn processes(&self) -> usize {
        self.strategy.processes(self.world_size())
    }
}

/// [`Topology`] as written in results (see there).
#[derive(Serialize, Deserialize, JsonSchema)]
struct TopologyWire {
    /// Data-parallel world size (nodes x devices per node): the workers.
    world_size: usize,
    /// How the workers combine gradients (left out when `single`).
    #[serde(default, skip_serializing_if = "DataParallel::is_single")]
    strategy: DataParallel,
    /// Machines (absent in results written before it was stored: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nodes: Option<usize>,
    /// Workers per machine (absent in results written before it was stored: the world size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    devices_per_node: Option<usize>,
    /// Link between the workers (absent in results written before it was stored: PCIe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interconnect: Option<Interconnect>,
    /// Bytes per all-reduce bucket or ZeRO-1/2 unit (left out at the default, 25 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bucket_bytes: Option<u64>,
    /// Whether the exchange overlapped the backward pass (written for data-parallel strategies; absent in
    /// results written before it was recorded, which never overlapped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overlap: Option<bool>,
    /// The device mesh (left out without tensor or pipeline parallelism; absent in results written before it
    /// was recorded, which had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mesh: Option<MeshRecord>,
}

/// The device mesh as results record it: its degrees and schedule, and where each rank sat, so a published
/// layout can be reproduced (the stage of a rank is its `pp` coordinate).
#[derive(Serialize, Deserialize, JsonSchema)]
struct MeshRecord {
    /// Degrees and the pipeline's schedule.
    #[serde(flatten)]
    mesh: Mesh,
    /// Data-parallel degree: world size over tensor x pipeline degrees (written for readers; recomputed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_parallel: Option<usize>,
    /// Each rank's coordinates, in rank order (tensor-innermost, pipeline outermost; written for readers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ranks: Vec<MeshCoords>,
}

impl TryFrom<TopologyWire> for Topology {
    type Error = String;
    fn try_from(w: TopologyWire) -> Result<Self, String> {
        let nodes = w.nodes.unwrap_or(1);
        let devices_per_node = w.devices_per_node.unwrap_or(w.world_size / nodes.max(1));
        if nodes == 0 || devices_per_node == 0 || nodes * devices_per_node != w.world_size {
            return Err(format!(
                "a topology of world_size {} cannot have {nodes} nodes of {devices_per_node} devices",
                w.world_size
            ));
        }
        let mesh = w.mesh.map(|m| m.mesh).unwrap_or_default();
        mesh.data_parallel(w.world_size).map_err(|e| e.to_string())?;
        Ok(Topology {
            strategy: w.strategy,
            nodes,
            devices_per_node,
            interconnect: w.interconnect.unwrap_or_default(),
            bucket_bytes: w.bucket_bytes.unwrap_or(BUCKET_BYTES),
            overlap: w.overlap.unwrap_or(false),
            mesh,
        })
    }
}

impl From<Topology> for TopologyWire {
    fn from(t: Topology) -> Self {
        TopologyWire {
            world_size: t.world_size(),
            strategy: t.strategy,
            nodes: Some(t.nodes),
            devices_per_node: Some(t.devices_per_node),
            interconnect: Some(t.interconnect),
            bucket_bytes: (t.bucket_bytes != BUCKET_BYTES).then_some(t.bucket_bytes),
            overlap: (!t.strategy.is_single()).then_some(t.overlap),
            mesh: (!t.mesh.is_flat()).then(|| MeshRecord {
                mesh: t.mesh,
                data_parallel: Some(t.data_parallel()),
                ranks: t.mesh.placement(t.world_size()).unwrap_or_default(),
            }),
        }
    }
}

impl JsonSchema for Topology {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Topology".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        TopologyWire::json_schema(generator)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_results_written_before_it_was_stored() {
        let t = Topology {
            strategy: DataParallel::ParameterServer { servers: 2 },
            nodes: 2,
            devices_per_node: 4,
            interconnect: Interconnect::Ethernet,
            bucket_bytes: 1 << 20,
            overlap: false,
            mesh: Mesh::flat(),
        };
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(json["world_size"], 8);
        assert_eq!(serde_json::from_value::<Topology>(json.clone()).unwrap(), t);
        let old: Topology = serde_json::from_str(r#"{"world_size": 2, "strategy": {"kind": "all-reduce"}}"#).unwrap();
        assert_eq!((old.nodes, old.devices_per_node, old.interconnect), (1, 2, Interconnect::Pcie));
        let single = serde_json::to_value(Topology::single()).unwrap();
        assert!(single.get("strategy").is_none(), "{single}");
        let bad = serde_json::from_str::<Topology>(r#"{"world_size": 3, "nodes": 2, "devices_per_node": 2}"#);
        assert!(bad.unwrap_err().to_string().contains("world_size 3 cannot have 2 nodes of 2 devices"));
        assert!(json.get("mesh").is_none(), "{json}");
        let meshed = Topology { mesh: Mesh { tensor_parallel: 4, ..Mesh::flat() }, ..t };
        let json = serde_json::to_value(meshed).unwrap();
        assert_eq!(json["mesh"]["tensor_parallel"], 4);
        assert_eq!(json["mesh"]["data_parallel"], 2);
        assert_eq!(json["mesh"]["ranks"][5], serde_json::json!({"dp": 1, "pp": 0, "tp": 1}));
        assert_eq!(serde_json::from_value::<Topology>(json).unwrap(), meshed);
        assert_eq!(meshed.data_parallel(), 2);
        let bad = r#"{"world_size": 2, "mesh": {"tensor_parallel": 4, "pipeline_parallel": 1, "microbatches": 1, "virtual_stages": 1}}"#;
        assert!(serde_json::from_str::<Topology>(bad).unwrap_err().to_string().contains("does not divide"));
    }
}
