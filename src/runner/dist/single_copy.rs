//! Whether Open MPI's ranks on this machine may copy a large message straight from the sender's memory
//! (cross-memory attach, `process_vm_readv`), probed once: with it a receiver completes a large message on its
//! own; without it (`btl_vader_single_copy_mechanism none`) the message moves in fragments the sender pushes
//! only from inside MPI calls, so a send posted before a long computation arrives after it (a pipeline stage's
//! activations wait for its next forward pass). Containers often forbid the system call, which is why it is
//! probed rather than assumed.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The value of Open MPI's `btl_vader_single_copy_mechanism` for ranks started on this machine: `cma` where
/// [`cross_memory_attach_works`], else `none`.
pub fn vader_single_copy_mechanism() -> &'static str {
    static FOUND: OnceLock<&'static str> = OnceLock::new();
    FOUND.get_or_init(|| if cross_memory_attach_works() { "cma" } else { "none" })
}

/// True when this process can read a child process's memory with `process_vm_readv`, as Open MPI's
/// shared-memory transport reads a peer's: a `sleep` started for the probe, the first bytes of a file it maps
/// at offset 0 read through the system call and compared with the ELF magic number that file starts with.
/// False where the system call is refused (seccomp, ptrace policy), the child cannot be started, or anything
/// read differs.
pub fn cross_memory_attach_works() -> bool {
    let Ok(mut child) =
        Command::new("sleep").arg("10").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()
    else {
        return false;
    };
    let works = probe_child(child.id());
    let _ = child.kill();
    let _ = child.wait();
    works
}

/// Read 4 bytes at the start of a file mapped at offset 0 in process `pid` and check they are `\x7fELF`.
/// `spawn` returns once the child's `exec` is past its point of no return, which can be before the kernel has
/// mapped the new program (the maps then hold only its stack): the maps are read again, for up to a second,
/// until a file is mapped.
#[cfg(target_os = "linux")]
fn probe_child(pid: u32) -> bool {
    let mut address = None;
    for _ in 0..1000 {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return false };
        address = maps.lines().find_map(elf_mapping_start);
        if address.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let Some(address) = address else { return false };
    let mut bytes = [0u8; 4];
    let local = libc::iovec { iov_base: bytes.as_mut_ptr().cast(), iov_len: bytes.len() };
    let remote = libc::iovec { iov_base: address as *mut libc::c_void, iov_len: bytes.len() };
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: `local` points to `bytes`, 4 writable bytes that outlive the call; the remote address is only
    // read by the kernel, in the other process, which checks it.
    let read = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    read == 4 && &bytes == b"\x7fELF"
}

#[cfg(not(target_os = "linux"))]
fn probe_child(_pid: u32) -> bool {
    false
}

/// The start address of a line of `/proc/PID/maps` that maps a file readable at offset 0 (`start-end r... 0
/// dev inode /path`).
fn elf_mapping_start(line: &str) -> Option<usize> {
    let mut fields = line.split_whitespace();
    let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.nth(2)?;
    if !perms.starts_with('r') || usize::from_str_radix(offset, 16).ok()? != 0 || !path.starts_with('/') {
        return None;
    }
    usize::from_str_radix(range.split('-').next()?, 16).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_readable_file_mapping_at_offset_0_is_found_and_others_are_not() {
        let exe = "55d0c0a00000-55d0c0a28000 r--p 00000000 fd:01 1311 /usr/bin/sleep";
        assert_eq!(elf_mapping_start(exe), Some(0x55d0_c0a0_0000));
        assert_eq!(elf_mapping_start("55d0c0a28000-55d0c0a3e000 r-xp 00028000 fd:01 1311 /usr/bin/sleep"), None);
        assert_eq!(elf_mapping_start("7ffd1a000000-7ffd1a021000 rw-p 00000000 00:00 0 [stack]"), None);
        assert_eq!(elf_mapping_start("7f0000000000-7f0000001000 ---p 00000000 fd:01 7 /lib/x.so"), None);
        assert_eq!(elf_mapping_start("garbage"), None);
    }

    #[test]
    fn a_process_that_has_ended_is_not_readable() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!probe_child(pid));
    }
}
