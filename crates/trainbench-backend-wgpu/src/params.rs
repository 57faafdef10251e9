//! The model's tensors on the device: every parameter and buffer the contract declares, with the shared seeded
//! initial values, held flat (rank 1) so one optimizer update fits every layer.

use std::collections::HashMap;

use burn::tensor::{Device, Tensor, TensorData};
use trainbench_contract::MemoryMeasured;
use trainbench_graph::graph::NodeId;
use trainbench_graph::init::initial_values;
use trainbench_graph::params::{ParamDecl, graph_tensors, is_tied, tensors};
use trainbench_graph::{Graph, OptimizerSpec};

/// One declared tensor and its current value (without autodiff).
pub struct Slot {
    /// The declaration (name, shape, initialiser, role).
    pub decl: ParamDecl,
    /// Current value, flat.
    pub value: Tensor<1>,
}

/// All tensors of a graph, addressable by node and local name.
pub struct Store {
    /// Slots in declaration order (node by node, PyTorch's registration order within a node).
    pub slots: Vec<Slot>,
    index: HashMap<(NodeId, String), usize>,
}

impl Store {
    /// Allocate every tensor of `graph` ([`graph_tensors`]: tied weights once, with their owner) on `device` with
    /// its seeded initial values.
    pub fn new(graph: &Graph, seed: u64, device: &Device) -> Self {
        let mut slots = Vec::new();
        let mut index = HashMap::new();
        for (id, decl) in graph_tensors(graph) {
            let values = initial_values(&decl, seed);
            let n = values.len();
            let value = Tensor::<1>::from_data(TensorData::new(values, [n]), device);
            index.insert((id, decl.local.clone()), slots.len());
            slots.push(Slot { decl, value });
        }
        // A tied weight is its owner's tensor: both uses read (and send gradients to) one slot.
        for (id, node) in graph.nodes.iter().enumerate() {
            let Some(owner) = node.tied_to else { continue };
            for decl in tensors(node).iter().filter(|d| is_tied(node, d)) {
                if let Some(&slot) = index.get(&(owner, decl.local.clone())) {
                    index.insert((id, decl.local.clone()), slot);
                }
            }
        }
        Self { slots, index }
    }

    /// Slot index of a node's tensor, if declared.
    pub fn find(&self, node: NodeId, local: &str) -> Option<usize> {
        self.index.get(&(node, local.to_string())).copied()
    }

    /// Number of trained parameter elements, counted from the tensors as allocated on the device.
    pub fn parameter_count(&self) -> u64 {
        self.slots.iter().filter(|s| s.decl.trainable()).map(|s| s.value.dims()[0] as u64).sum()
    }

    /// Bytes of weights (parameters and buffers), gradients and optimizer state, all fp32.
    pub fn memory(&self, optimizer: &OptimizerSpec) -> MemoryMeasured {
        let all: u64 = self.slots.iter().map(|s| s.value.dims()[0] as u64).sum();
        let trained = self.parameter_count();
        MemoryMeasured {
            weights: all * 4,
            gradients: trained * 4,
            optimizer_state: trained * 4 * optimizer.state_buffers(),
            peak_allocated: None,
            reserved: None,
            activations: None,
        }
    }

    /// Autodiff leaves for one step: trained tensors require gradients, buffers are constants.
    pub fn leaves(&self) -> Vec<Tensor<1>> {
        self.slots
            .iter()
            .map(|s| {
                let t = s.value.clone().autodiff();
                if s.decl.trainable() { t.require_grad() } else { t }
            })
            .collect()
    }
}
