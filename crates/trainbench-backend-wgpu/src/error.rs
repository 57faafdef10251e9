//! Why a wgpu training run stopped with an error ([`TrainError`]): the lowering, the device, or the contract's
//! own error passed on.

use trainbench_contract::BackendError;

use crate::value::ValueError;

/// Why a training run stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The lowering met an inconsistency.
    #[error(transparent)]
    Lower(#[from] ValueError),
    /// The device reported an execution failure.
    #[error("device execution failed: {0}")]
    Device(String),
    /// The dataset or the run's target failed (a [`BackendError::Data`]), passed on as it is.
    #[error(transparent)]
    Backend(BackendError),
}

impl From<BackendError> for TrainError {
    fn from(e: BackendError) -> Self {
        TrainError::Backend(e)
    }
}
