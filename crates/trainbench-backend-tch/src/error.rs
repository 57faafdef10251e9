//! How a libtorch error of a run becomes the contract's error: an allocation failure is
//! [`BackendError::OutOfMemory`] (its first line kept), anything else [`BackendError::Framework`].

use tch::TchError;
use trainbench_contract::BackendError;

/// Map a libtorch error of a run to the backend contract's error.
pub(crate) fn map_error(err: TchError, batch_size: usize) -> BackendError {
    let message = err.to_string();
    if BackendError::is_oom_message(&message) {
        // Keep the first line: libtorch appends a long C++ backtrace.
        let first = message.lines().next().unwrap_or("");
        let first = first.strip_prefix("Internal torch error: ").unwrap_or(first).to_string();
        BackendError::OutOfMemory { batch_size, message: first }
    } else {
        BackendError::Framework(message)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn oom_messages_are_recognised() {
        let e = map_error(TchError::Torch("CUDA out of memory. Tried\nbacktrace".into()), 64);
        assert_eq!(e, BackendError::OutOfMemory { batch_size: 64, message: "CUDA out of memory. Tried".into() });
        // Every way libtorch 2.13 and the CUDA libraries say an allocation failed, as tch hands them over.
        for (raw, first) in [
            (
                "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of \
                 139.80 GiB of which 1.2 GiB is free.\nException raised from malloc",
                "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which \
                 1.2 GiB is free.",
            ),
            (
                "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
                "CUDA error: out of memory",
            ),
            (
                "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\nframe #0",
                "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            ),
            ("cuDNN error: CUDNN_STATUS_ALLOC_FAILED\nException raised from", "cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
            (
                "DefaultCPUAllocator: not enough memory: you tried to allocate 8589934592 bytes.",
                "DefaultCPUAllocator: not enough memory: you tried to allocate 8589934592 bytes.",
            ),
        ] {
            assert_eq!(
                map_error(TchError::Torch(raw.into()), 8),
                BackendError::OutOfMemory { batch_size: 8, message: first.into() },
                "{raw}"
            );
        }
        // Not allocation failures.
        for raw in ["CUDA error: an illegal memory access was encountered", "cuDNN error: CUDNN_STATUS_BAD_PARAM"] {
            assert!(matches!(map_error(TchError::Torch(raw.into()), 8), BackendError::Framework(_)), "{raw}");
        }
    }
}
