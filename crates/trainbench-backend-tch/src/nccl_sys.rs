//! The NCCL engine's calls into the shim's C API (shim/nccl.cpp), compiled with `cfg(trainbench_nccl)`: each
//! call passes an error buffer and turns a non-zero return into the shim's message; [`Handle`] frees its group.

use std::ffi::{CStr, CString, c_char, c_int, c_void};

use tch::Tensor;

use super::{NcclError, Rendezvous};

unsafe extern "C" {
    fn tb_nccl_open(
        addr: *const c_char,
        port: c_int,
        rank: c_int,
        world: c_int,
        device: c_int,
        timeout_ms: i64,
        err: *mut c_char,
        err_len: usize,
    ) -> *mut c_void;
    fn tb_nccl_split(
        parent: *mut c_void,
        name: *const c_char,
        rank: c_int,
        size: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> *mut c_void;
    fn tb_nccl_all_reduce_sum(handle: *mut c_void, tensor: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_nccl_reduce_scatter_sum(
        handle: *mut c_void,
        output: *mut c_void,
        input: *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_nccl_all_gather(
        handle: *mut c_void,
        output: *mut c_void,
        input: *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_nccl_broadcast(
        handle: *mut c_void,
        tensor: *mut c_void,
        root: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_nccl_send(
        handle: *mut c_void,
        tensor: *mut c_void,
        peer: c_int,
        tag: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_nccl_recv(
        handle: *mut c_void,
        tensor: *mut c_void,
        peer: c_int,
        tag: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_nccl_all_to_all(
        handle: *mut c_void,
        output: *mut c_void,
        input: *mut c_void,
        counts: *const i64,
        ranks: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_nccl_barrier(handle: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_nccl_abort(handle: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_nccl_destroy(handle: *mut c_void);
    fn tb_nccl_version(out: *mut c_char, out_len: usize, err: *mut c_char, err_len: usize) -> c_int;
}

const ERR_LEN: usize = 2048;

/// The shim's group; freed when dropped.
pub struct Handle(*mut c_void);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the pointer came from tb_nccl_open and is freed exactly once, here.
        unsafe { tb_nccl_destroy(self.0) }
    }
}

fn text(buf: &[c_char]) -> String {
    // SAFETY: the shim NUL-terminates every buffer it writes, and the buffers start zeroed.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Call a shim function with an error buffer; a non-zero return becomes the buffer's message.
fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), NcclError> {
    let mut buf = vec![0 as c_char; ERR_LEN];
    if f(buf.as_mut_ptr(), ERR_LEN) == 0 { Ok(()) } else { Err(NcclError::Failed(text(&buf))) }
}

fn int(value: usize, what: &'static str) -> Result<c_int, NcclError> {
    c_int::try_from(value).map_err(|_| NcclError::OutOfRange(what, value))
}

pub fn open(at: &Rendezvous) -> Result<Handle, NcclError> {
    let addr = CString::new(at.master_addr.as_str()).map_err(|_| NcclError::NulInAddress)?;
    let timeout_ms = i64::try_from(at.timeout.as_millis()).unwrap_or(i64::MAX).max(1);
    let mut buf = vec![0 as c_char; ERR_LEN];
    // SAFETY: `addr` is NUL-terminated and outlives the call; `buf` is ERR_LEN long.
    let h = unsafe {
        tb_nccl_open(
            addr.as_ptr(),
            c_int::from(at.master_port),
            int(at.rank, "rank")?,
            int(at.world, "world size")?,
            int(at.device, "CUDA device")?,
            timeout_ms,
            buf.as_mut_ptr(),
            ERR_LEN,
        )
    };
    if h.is_null() { Err(NcclError::Failed(text(&buf))) } else { Ok(Handle(h)) }
}

/// A new group of `size` of `parent`'s ranks, this one its `rank`, rendezvoused under `name`.
pub fn split(parent: &Handle, name: &str, rank: usize, size: usize) -> Result<Handle, NcclError> {
    let name =
        CString::new(name).map_err(|_| NcclError::Failed(format!("the group name {name:?} holds a NUL byte")))?;
    let mut buf = vec![0 as c_char; ERR_LEN];
    // SAFETY: live parent handle; `name` is NUL-terminated and outlives the call; `buf` is ERR_LEN long.
    let h = unsafe {
        tb_nccl_split(parent.0, name.as_ptr(), int(rank, "rank")?, int(size, "group size")?, buf.as_mut_ptr(), ERR_LEN)
    };
    if h.is_null() { Err(NcclError::Failed(text(&buf))) } else { Ok(Handle(h)) }
}

fn ptr(t: &Tensor) -> *mut c_void {
    t.as_ptr() as *mut c_void
}

pub fn all_reduce_sum(h: &Handle, t: &Tensor) -> Result<(), NcclError> {
    // SAFETY: live handle and tensor; the shim checks the tensor's device and layout.
    call(|e, n| unsafe { tb_nccl_all_reduce_sum(h.0, ptr(t), e, n) })
}

pub fn reduce_scatter_sum(h: &Handle, out: &Tensor, input: &Tensor) -> Result<(), NcclError> {
    // SAFETY: live handle and tensors; the shim checks their devices, layouts and sizes.
    call(|e, n| unsafe { tb_nccl_reduce_scatter_sum(h.0, ptr(out), ptr(input), e, n) })
}

pub fn all_gather(h: &Handle, out: &Tensor, input: &Tensor) -> Result<(), NcclError> {
    // SAFETY: live handle and tensors; the shim checks their devices, layouts and sizes.
    call(|e, n| unsafe { tb_nccl_all_gather(h.0, ptr(out), ptr(input), e, n) })
}

pub fn broadcast(h: &Handle, t: &Tensor, root: c_int) -> Result<(), NcclError> {
    // SAFETY: as for all_reduce_sum.
    call(|e, n| unsafe { tb_nccl_broadcast(h.0, ptr(t), root, e, n) })
}

pub fn send(h: &Handle, t: &Tensor, peer: c_int, tag: c_int) -> Result<(), NcclError> {
    // SAFETY: as for all_reduce_sum.
    call(|e, n| unsafe { tb_nccl_send(h.0, ptr(t), peer, tag, e, n) })
}

pub fn recv(h: &Handle, t: &Tensor, peer: c_int, tag: c_int) -> Result<(), NcclError> {
    // SAFETY: as for all_reduce_sum.
    call(|e, n| unsafe { tb_nccl_recv(h.0, ptr(t), peer, tag, e, n) })
}

/// `counts`: the values sent to each rank, then those received from each.
pub fn all_to_all(h: &Handle, out: &Tensor, input: &Tensor, counts: &[i64]) -> Result<(), NcclError> {
    let ranks = int(counts.len() / 2, "ranks")?;
    // SAFETY: live handle and tensors; `counts` holds 2 x `ranks` values and outlives the call; the shim
    // checks the tensors' devices, layouts and sizes against the counts.
    call(|e, n| unsafe { tb_nccl_all_to_all(h.0, ptr(out), ptr(input), counts.as_ptr(), ranks, e, n) })
}

pub fn barrier(h: &Handle) -> Result<(), NcclError> {
    // SAFETY: live handle.
    call(|e, n| unsafe { tb_nccl_barrier(h.0, e, n) })
}

pub fn abort(h: &Handle) -> Result<(), NcclError> {
    // SAFETY: live handle.
    call(|e, n| unsafe { tb_nccl_abort(h.0, e, n) })
}

pub fn version() -> Result<String, NcclError> {
    let mut out = vec![0 as c_char; 64];
    let len = out.len();
    // SAFETY: `out` is `len` long; the shim NUL-terminates it.
    call(|e, n| unsafe { tb_nccl_version(out.as_mut_ptr(), len, e, n) })?;
    Ok(text(&out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn message(f: impl FnOnce(*mut c_char, usize) -> c_int) -> String {
        call(f).unwrap_err().to_string()
    }

    #[test]
    fn the_shim_refuses_null_handles_and_tensors_with_a_message() {
        let t = Tensor::from_slice(&[1.0f32]);
        // SAFETY: null handles are what is being tested; the shim checks them before any use.
        let m = message(|e, n| unsafe { tb_nccl_all_reduce_sum(std::ptr::null_mut(), ptr(&t), e, n) });
        assert!(m.contains("closed"), "{m}");
        // SAFETY: as above.
        let m = message(|e, n| unsafe { tb_nccl_barrier(std::ptr::null_mut(), e, n) });
        assert!(m.contains("closed"), "{m}");
        // SAFETY: as above.
        let m = message(|e, n| unsafe { tb_nccl_abort(std::ptr::null_mut(), e, n) });
        assert!(m.contains("closed"), "{m}");
        let name = CString::new("g").unwrap();
        let mut buf = vec![0 as c_char; ERR_LEN];
        // SAFETY: as above; `name` and `buf` outlive the call.
        let h = unsafe { tb_nccl_split(std::ptr::null_mut(), name.as_ptr(), 0, 1, buf.as_mut_ptr(), ERR_LEN) };
        assert!(h.is_null());
        assert!(text(&buf).contains("closed"), "{}", text(&buf));
        // SAFETY: destroying null is a no-op.
        unsafe { tb_nccl_destroy(std::ptr::null_mut()) };
    }

    #[test]
    fn the_shim_refuses_bad_rendezvous_arguments_and_a_machine_without_a_gpu() {
        let at = |port: u16, rank: usize, world: usize| Rendezvous {
            master_addr: "127.0.0.1".into(),
            master_port: port,
            rank,
            world,
            device: 0,
            timeout: std::time::Duration::from_secs(5),
        };
        let m = open(&at(0, 0, 1)).err().unwrap().to_string();
        assert!(m.contains("not a TCP port"), "{m}");
        let m = open(&at(29500, 2, 2)).err().unwrap().to_string();
        assert!(m.contains("rank 2 of a world of 2"), "{m}");
        if tch::Cuda::device_count() == 0 {
            let m = open(&at(29500, 0, 1)).err().unwrap().to_string();
            assert!(m.contains("no CUDA device"), "{m}");
        }
    }

    #[test]
    fn the_nccl_version_is_read_without_a_gpu() {
        let v = version().unwrap();
        assert!(v.starts_with("2."), "NCCL 2.x: {v}");
    }
}
