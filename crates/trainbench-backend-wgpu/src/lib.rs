//! trainbench's wgpu backend: trains the workload graph with burn 0.22 on any wgpu adapter (Vulkan, Metal, DX12,
//! GL, and software Vulkan such as lavapipe), from the same seeded weights and synthetic data as every backend.
//!
//! The graph is lowered to burn tensor operations on raw parameter tensors in PyTorch's layouts
//! ([`trainbench_graph::params`]); gradients come from burn's autodiff and the optimizers are applied to the
//! raw tensors exactly as `torch.optim` computes them.

mod adapters;
mod backend;
mod error;
mod eval;
mod layers;
mod loss;
mod lower;
mod optim;
mod params;
mod seq;
mod step;
mod value;

pub use adapters::{Adapter, adapters, select};
pub use backend::{BURN_VERSION, CUBECL_VERSION, WGPU_VERSION, WgpuBackend, check};
