//! Safe wrappers over the C++ shim (shim/shim.cpp): caching-allocator statistics, autocast for a device type
//! and dtype, library versions, CUDA device properties and PCI bus ids, the driver's CUDA version, the TF32
//! switches and pinning — the libtorch APIs tch does not expose. CUDA events are in [`crate::events`], the fused
//! optimizers in [`crate::fused`].

use std::ffi::{CStr, c_char, c_int, c_long};

use tch::Tensor;
use torch_sys::C_tensor;

unsafe extern "C" {
    fn tb_torch_version() -> *const c_char;
    fn tb_linked_torch(
        version: *mut c_char,
        version_len: usize,
        path: *mut c_char,
        path_len: usize,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_cpu_capability(out: *mut c_char, out_len: usize, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_cuda_versions(cudart: *mut c_long, cudnn: *mut c_long, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_cuda_memory_stats(device: c_int, out: *mut i64, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_cuda_reset_peak(device: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_cuda_empty_cache(err: *mut c_char, err_len: usize) -> c_int;
    #[allow(dead_code)]
    fn tb_cuda_mem_info(device: c_int, free: *mut u64, total: *mut u64, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_cuda_device_properties(
        device: c_int,
        name: *mut c_char,
        name_len: usize,
        major: *mut c_int,
        minor: *mut c_int,
        sms: *mut c_int,
        total_mem: *mut u64,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_cuda_driver_version(version: *mut c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_cuda_pci_bus_id(device: c_int, out: *mut c_char, out_len: usize, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_set_tf32(
        matmul: c_int,
        cudnn: c_int,
        got_matmul: *mut c_int,
        got_cudnn: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_pin_memory(t: *const C_tensor, out: *mut *mut C_tensor, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_leaky_relu(
        x: *const C_tensor,
        slope: f64,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_autocast_enter(
        device_cuda: c_int,
        dtype_bf16: c_int,
        prev_enabled: *mut c_int,
        prev_dtype: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_autocast_exit(
        device_cuda: c_int,
        prev_enabled: c_int,
        prev_dtype: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

/// A message reported by the shim (a C++ exception's `what()`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShimError(pub String);

const ERR_LEN: usize = 1024;

/// Call a shim function with an error buffer; a non-zero return becomes the buffer's message.
pub(crate) fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), ShimError> {
    let mut buf = vec![0 as c_char; ERR_LEN];
    let rc = f(buf.as_mut_ptr(), ERR_LEN);
    if rc == 0 {
        Ok(())
    } else {
        // SAFETY: the shim always NUL-terminates the buffer it was given (copy_message).
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
        Err(ShimError(msg))
    }
}

/// The libtorch version the shim was compiled against (`2.13.0`).
pub fn torch_version() -> String {
    // SAFETY: returns a pointer to a static string literal.
    unsafe { CStr::from_ptr(tb_torch_version()) }.to_string_lossy().into_owned()
}

/// The libtorch this process runs on, asked of the loaded library itself (not of the headers the shim was
/// compiled against): what results record, and what a build for another PyTorch release is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedTorch {
    /// Its version (`2.13.0`), from its build settings.
    pub version: String,
    /// The file it was loaded from (`.../torch/lib/libtorch_cpu.so`).
    pub library: String,
}

/// The loaded libtorch's version and file, asked once per process.
pub fn linked_torch() -> Result<LinkedTorch, ShimError> {
    static LINKED: std::sync::OnceLock<Result<LinkedTorch, ShimError>> = std::sync::OnceLock::new();
    LINKED
        .get_or_init(|| {
            let mut version = vec![0 as c_char; 64];
            let mut path = vec![0 as c_char; 4096];
            let (vlen, plen) = (version.len(), path.len());
            // SAFETY: both buffers are live for the call with the lengths given; the shim NUL-terminates them.
            call(|e, n| unsafe { tb_linked_torch(version.as_mut_ptr(), vlen, path.as_mut_ptr(), plen, e, n) })?;
            // SAFETY: NUL-terminated by the shim (copy_message).
            let text = |b: &[c_char]| unsafe { CStr::from_ptr(b.as_ptr()) }.to_string_lossy().into_owned();
            Ok(LinkedTorch { version: text(&version), library: text(&path) })
        })
        .clone()
}

/// The CPU kernel level ATen dispatches to on this machine (`AVX512`, `AVX2`, `DEFAULT`), as libtorch reports it.
pub fn cpu_capability() -> Result<String, ShimError> {
    let mut out = vec![0 as c_char; 64];
    let len = out.len();
    // SAFETY: `out` is a live buffer of `len` elements; the shim NUL-terminates what it writes.
    call(|e, n| unsafe { tb_cpu_capability(out.as_mut_ptr(), len, e, n) })?;
    // SAFETY: NUL-terminated by the shim (copy_message).
    Ok(unsafe { CStr::from_ptr(out.as_ptr()) }.to_string_lossy().into_owned())
}

/// CUDA runtime and cuDNN versions as libtorch encodes them (`13000`, `91300`), 0 where absent.
pub fn cuda_versions() -> Result<(i64, i64), ShimError> {
    let (mut cudart, mut cudnn): (c_long, c_long) = (0, 0);
    // SAFETY: out-pointers are valid locals; the buffer is ERR_LEN long.
    call(|e, n| unsafe { tb_cuda_versions(&mut cudart, &mut cudnn, e, n) })?;
    // c_long is i64 on LP64 Linux but 32-bit elsewhere.
    #[allow(clippy::useless_conversion)]
    Ok((i64::from(cudart), i64::from(cudnn)))
}

/// Caching-allocator statistics of one CUDA device, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CudaMemoryStats {
    /// Bytes currently allocated to tensors.
    pub allocated: u64,
    /// Peak of `allocated` since the last reset.
    pub peak_allocated: u64,
    /// Bytes currently reserved from the driver (allocated + cached).
    pub reserved: u64,
    /// Peak of `reserved` since the last reset.
    pub peak_reserved: u64,
}

/// Read the caching allocator's statistics for CUDA device `device`.
pub fn cuda_memory_stats(device: usize) -> Result<CudaMemoryStats, ShimError> {
    let mut out = [0i64; 4];
    // SAFETY: `out` holds the four values the shim writes.
    call(|e, n| unsafe { tb_cuda_memory_stats(device as c_int, out.as_mut_ptr(), e, n) })?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(CudaMemoryStats {
        allocated: u(out[0]),
        peak_allocated: u(out[1]),
        reserved: u(out[2]),
        peak_reserved: u(out[3]),
    })
}

/// Reset the peak statistics of CUDA device `device`.
pub fn cuda_reset_peak(device: usize) -> Result<(), ShimError> {
    // SAFETY: plain call with a valid error buffer.
    call(|e, n| unsafe { tb_cuda_reset_peak(device as c_int, e, n) })
}

/// Return the caching allocator's unused blocks to the driver (after an out-of-memory error).
pub fn cuda_empty_cache() -> Result<(), ShimError> {
    // SAFETY: plain call with a valid error buffer.
    call(|e, n| unsafe { tb_cuda_empty_cache(e, n) })
}

/// Static properties of a CUDA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDeviceProps {
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// Device memory in bytes.
    pub total_memory: u64,
}

/// Query the properties of CUDA device `device`.
pub fn cuda_device_properties(device: usize) -> Result<CudaDeviceProps, ShimError> {
    let mut name = vec![0 as c_char; 256];
    let (mut major, mut minor, mut sms, mut mem) = (0, 0, 0, 0u64);
    // SAFETY: every out-pointer is a valid local; `name` is 256 bytes and its length is passed.
    call(|e, n| unsafe {
        tb_cuda_device_properties(
            device as c_int,
            name.as_mut_ptr(),
            name.len(),
            &mut major,
            &mut minor,
            &mut sms,
            &mut mem,
            e,
            n,
        )
    })?;
    // SAFETY: the shim NUL-terminates `name`.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    Ok(CudaDeviceProps { name, capability: (major, minor), multiprocessors: sms, total_memory: mem })
}

/// The CUDA version the installed NVIDIA driver supports, as `13.0`; `None` without a driver (no libcuda).
pub fn cuda_driver_version() -> Result<Option<String>, ShimError> {
    let mut v: c_int = 0;
    // SAFETY: the out-pointer is a valid local.
    call(|e, n| unsafe { tb_cuda_driver_version(&mut v, e, n) })?;
    Ok((v > 0).then(|| cuda_version_text(i64::from(v))))
}

/// `13000` -> `13.0` (CUDA's encoding: 1000 x major + 10 x minor).
pub fn cuda_version_text(v: i64) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The PCI bus id of CUDA device `device` (`0000:17:00.0`), which names the same GPU to NVML whatever the CUDA
/// device order and `CUDA_VISIBLE_DEVICES` (a MIG instance gives its parent GPU's).
pub fn cuda_pci_bus_id(device: usize) -> Result<String, ShimError> {
    let mut out = vec![0 as c_char; 64];
    let len = out.len();
    // SAFETY: `out` is a live buffer of `len` elements; the driver NUL-terminates what it writes.
    call(|e, n| unsafe { tb_cuda_pci_bus_id(device as c_int, out.as_mut_ptr(), len, e, n) })?;
    // SAFETY: NUL-terminated (the buffer was zeroed and the driver writes fewer than `len` bytes).
    Ok(unsafe { CStr::from_ptr(out.as_ptr()) }.to_string_lossy().into_owned())
}

/// Set the TF32 switches of CUDA fp32 work (process-wide, as PyTorch's flags) and return what libtorch reads
/// back: `(matmul, cudnn)`.
pub fn set_tf32(matmul: bool, cudnn: bool) -> Result<(bool, bool), ShimError> {
    let (mut m, mut c) = (0, 0);
    // SAFETY: out-pointers are valid locals.
    call(|e, n| unsafe { tb_set_tf32(c_int::from(matmul), c_int::from(cudnn), &mut m, &mut c, e, n) })?;
    Ok((m != 0, c != 0))
}

/// A pinned copy of a CPU tensor (libtorch's `pin_memory()` without the deprecated device argument).
pub fn pin_memory(t: &Tensor) -> Result<Tensor, ShimError> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `t` is a live tensor handle; the shim writes a new handle to `out` on success.
    call(|e, n| unsafe { tb_pin_memory(t.as_ptr(), &mut out, e, n) })?;
    if out.is_null() {
        return Err(ShimError("pin_memory returned no tensor".into()));
    }
    // SAFETY: `out` is a fresh `at::Tensor*` allocated by the shim, owned from here on by the tch Tensor.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// `torch.nn.functional.leaky_relu(x, slope)` (tch's `leaky_relu` fixes the slope at 0.01): one kernel, with
/// PyTorch's one-pass backward, itself differentiable in one pass (the WGAN-GP penalty's double backward).
pub fn leaky_relu(x: &Tensor, slope: f64) -> Result<Tensor, ShimError> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `x` is a live tensor handle; the shim writes a new handle to `out` on success.
    call(|e, n| unsafe { tb_leaky_relu(x.as_ptr(), slope, &mut out, e, n) })?;
    if out.is_null() {
        return Err(ShimError("leaky_relu returned no tensor".into()));
    }
    // SAFETY: `out` is a fresh `at::Tensor*` allocated by the shim, owned from here on by the tch Tensor.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// An active autocast region; leaving it (drop) restores the previous autocast state of the device type.
#[derive(Debug)]
pub struct AutocastGuard {
    cuda: c_int,
    prev_enabled: c_int,
    prev_dtype: c_int,
}

/// Lower-precision type of an autocast region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutocastDtype {
    /// IEEE half precision.
    Half,
    /// bfloat16.
    BFloat16,
}

impl AutocastGuard {
    /// Enter autocast on CUDA (`cuda = true`) or CPU with the given lower-precision type.
    pub fn enter(cuda: bool, dtype: AutocastDtype) -> Result<Self, ShimError> {
        let (mut prev_enabled, mut prev_dtype) = (0, 0);
        let cuda = c_int::from(cuda);
        let bf16 = c_int::from(dtype == AutocastDtype::BFloat16);
        // SAFETY: out-pointers are valid locals.
        call(|e, n| unsafe { tb_autocast_enter(cuda, bf16, &mut prev_enabled, &mut prev_dtype, e, n) })?;
        Ok(Self { cuda, prev_enabled, prev_dtype })
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        // Restoring thread-local flags cannot fail in practice; a failure leaves autocast as it was.
        // SAFETY: plain call with values the shim produced on entry.
        let _ = call(|e, n| unsafe { tb_autocast_exit(self.cuda, self.prev_enabled, self.prev_dtype, e, n) });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use tch::{Device, Kind};

    use super::*;

    #[test]
    fn the_loaded_libtorch_is_the_one_the_shim_was_compiled_against() {
        let linked = linked_torch().unwrap();
        assert_eq!(linked.version, torch_version(), "{linked:?}");
        let file = std::path::Path::new(&linked.library);
        assert!(file.is_file(), "{linked:?}");
        assert!(file.file_name().unwrap().to_string_lossy().starts_with("libtorch"), "{linked:?}");
    }

    #[test]
    fn the_tf32_switches_are_set_and_read_back() {
        // libtorch keeps them in its global context, which exists without a GPU. The other tests of this binary
        // never read them.
        assert_eq!(set_tf32(true, false).unwrap(), (true, false));
        assert_eq!(set_tf32(false, false).unwrap(), (false, false));
        assert_eq!(set_tf32(true, true).unwrap(), (true, true));
        // PyTorch's defaults again.
        assert_eq!(set_tf32(false, true).unwrap(), (false, true));
    }

    #[test]
    fn the_driver_version_is_absent_or_dotted() {
        match cuda_driver_version().unwrap() {
            None => assert!(!tch::Cuda::is_available(), "a CUDA device but no driver version"),
            Some(v) => assert!(v.split('.').all(|p| p.parse::<u32>().is_ok()) && v.contains('.'), "{v}"),
        }
        // Without a driver there is no PCI bus id either, and the query says why instead of crashing.
        if !tch::Cuda::is_available() {
            assert!(!cuda_pci_bus_id(0).unwrap_err().0.is_empty());
        } else {
            let bus = cuda_pci_bus_id(0).unwrap();
            assert_eq!(bus.matches(':').count(), 2, "{bus}");
        }
    }

    #[test]
    fn pinning_gives_the_same_values_or_says_why_not() {
        let t = Tensor::arange(6, (Kind::Float, Device::Cpu));
        match pin_memory(&t) {
            // With an accelerator: a pinned copy of the same values.
            Ok(p) => {
                assert!(p.is_pinned(Device::Cuda(0)));
                assert_eq!(Vec::<f32>::try_from(&p).unwrap(), Vec::<f32>::try_from(&t).unwrap());
            }
            // Without one (this machine when no GPU): libtorch's reason, not a crash.
            Err(e) => assert!(!tch::Cuda::is_available() && !e.0.is_empty(), "{e}"),
        }
    }
}
