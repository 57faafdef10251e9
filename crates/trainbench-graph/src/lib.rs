//! trainbench's workload graph: the typed graph of a model ([`Graph`]), the builder the zoo writes it with,
//! the model specs a benchmark names ([`ModelSpec`]), the zoo that builds each into a graph, the parameters
//! and their initial values, and the static analysis (parameter counts, FLOPs, memory) of a graph under a
//! [`Precision`] and an [`OptimizerSpec`]. Pure data and arithmetic: nothing here trains or measures.

pub mod analysis;
pub mod builder;
pub mod frozen_dtype;
pub mod graph;
pub mod init;
pub mod lora;
pub mod model;
mod op_classes;
pub mod params;
pub mod rng;
pub mod stages;
pub mod tensor_parallel;
pub mod training;
pub mod zoo;

pub use builder::{ConvCfg, GraphBuilder, ShapeError};
pub use graph::{Graph, Node, NodeId, Op, Shape};
pub use model::ModelSpec;
pub use training::{OptimizerSpec, Precision};
