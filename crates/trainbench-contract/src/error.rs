//! Why a backend could not run a plan ([`BackendError`]), and how a framework's panic or allocator message
//! becomes one (out of memory or not).

/// Why a backend could not run a plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// The backend was compiled out.
    #[error(
        "trainbench was built without feature `{feature}`; rebuild with `--features {feature}` to use the {backend} backend"
    )]
    NotBuilt {
        /// Backend name.
        backend: &'static str,
        /// Cargo feature that enables it.
        feature: &'static str,
    },
    /// A layer, loss or precision the backend cannot execute.
    #[error("the {backend} backend cannot run layer `{layer}` ({op}): {reason}")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// Layer name.
        layer: String,
        /// Operation kind.
        op: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The device ran out of memory; recorded as the run's outcome.
    #[error("out of memory at batch size {batch_size}: {message}")]
    OutOfMemory {
        /// Batch size that did not fit.
        batch_size: usize,
        /// The framework's message.
        message: String,
    },
    /// The selected device does not exist or cannot be opened.
    #[error("device `{selector}` is not available: {reason}")]
    Device {
        /// Selector as written.
        selector: String,
        /// Why.
        reason: String,
    },
    /// The dataset could not deliver a batch (a corrupt or unreadable file, named in the message).
    #[error("dataset: {0}")]
    Data(String),
    /// Anything else the framework reported.
    #[error("{0}")]
    Framework(String),
}

/// Lower-cased fragments of allocator messages (libtorch's CPU and CUDA allocators, wgpu/cubecl) that mean the
/// device or host ran out of memory.
const OOM_MARKERS: &[&str] = &[
    "out of memory",
    "outofmemory",
    "can't allocate memory",
    "not enough memory",
    "allocation",
    // cuBLAS and cuDNN report their own workspace allocation failures under these status names.
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
];

impl BackendError {
    /// Whether a framework message reports an allocation failure.
    pub fn is_oom_message(message: &str) -> bool {
        let lower = message.to_ascii_lowercase();
        OOM_MARKERS.iter().any(|m| lower.contains(m))
    }

    /// The error for a panic caught around a framework call at `batch_size`: [`BackendError::OutOfMemory`] when
    /// its message reports an allocation failure, else [`BackendError::Framework`] prefixed with `context`
    /// (`libtorch call panicked`).
    pub fn from_panic(payload: &(dyn std::any::Any + Send), batch_size: usize, context: &str) -> Self {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "unknown panic".to_string());
        if Self::is_oom_message(&message) {
            BackendError::OutOfMemory { batch_size, message }
        } else {
            BackendError::Framework(format!("{context}: {message}"))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_errors_and_allocation_failures_out_of_memory() {
        let oom = std::panic::catch_unwind(|| panic!("CUDA out of memory. Tried to allocate 2.00 GiB")).unwrap_err();
        assert!(matches!(
            BackendError::from_panic(oom.as_ref(), 8, "x"),
            BackendError::OutOfMemory { batch_size: 8, .. }
        ));
        let other = std::panic::catch_unwind(|| panic!("{}", String::from("shape mismatch"))).unwrap_err();
        assert_eq!(
            BackendError::from_panic(other.as_ref(), 8, "libtorch call panicked"),
            BackendError::Framework("libtorch call panicked: shape mismatch".into())
        );
        assert!(BackendError::is_oom_message(
            "DefaultCPUAllocator: not enough memory: you tried to allocate 1000 bytes"
        ));
        assert!(!BackendError::is_oom_message("shape mismatch"));
        for variant in [
            "CUDA error: out of memory",
            "CUDA out of memory. Tried to allocate 20.00 MiB",
            "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        ] {
            assert!(BackendError::is_oom_message(variant), "{variant}");
        }
    }
}
