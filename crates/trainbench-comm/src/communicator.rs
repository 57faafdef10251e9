//! The engine interface: a group of ranks and its collectives ([`Communicator`]), the engine's identity
//! ([`EngineInfo`]) and why a collective failed ([`CommError`]). MPI, NCCL and the in-process engine implement it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The engine's identity, recorded in results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EngineInfo {
    /// `mpi`, `nccl`, or `threads` (the in-process test engine).
    pub name: String,
    /// The library's own version string (`Open MPI v4.1.4, ...`).
    pub version: String,
}

/// Refuse a reduce-scatter or all-gather whose buffers do not have the shapes the collective needs: `whole`
/// elements must be `ranks` blocks of `block` each.
pub fn check_blocks(engine: &str, what: &str, whole: usize, block: usize, ranks: usize) -> Result<(), CommError> {
    if block.checked_mul(ranks) == Some(whole) {
        return Ok(());
    }
    Err(CommError {
        engine: engine.to_string(),
        message: format!("{what} of {whole} values over {ranks} ranks in blocks of {block}"),
    })
}

/// Refuse an all-to-all whose counts do not fit its buffers: one count per rank on each side, `send` as long as
/// the send counts' sum and `recv` as long as the receive counts'.
pub fn check_counts(
    engine: &str,
    ranks: usize,
    send: (usize, &[usize]),
    recv: (usize, &[usize]),
) -> Result<(), CommError> {
    let fail = |message: String| Err(CommError { engine: engine.to_string(), message });
    for (side, (len, counts)) in [("send", send), ("receive", recv)] {
        if counts.len() != ranks {
            return fail(format!("all-to-all with {} {side} counts over {ranks} ranks", counts.len()));
        }
        let total = counts.iter().try_fold(0usize, |a, &c| a.checked_add(c));
        if total != Some(len) {
            return fail(format!("all-to-all {side} counts {counts:?} for a buffer of {len} values"));
        }
    }
    Ok(())
}

/// The ranks of `comm` that passed the same `color` to a split, in `key` order (ties by rank): the members of
/// this rank's new group, whose position in the list is its rank there. Every rank of `comm` calls it with its
/// own color and key (a collective: each learns every rank's pair through rank 0). For engines that build the
/// new group themselves from its members (the in-process engine, NCCL); MPI splits natively.
pub fn split_members(comm: &mut dyn Communicator, color: usize, key: usize) -> Result<Vec<usize>, CommError> {
    let size = comm.size();
    let mine: Vec<u8> = [color as u64, key as u64].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut all = comm.gather_bytes(0, &mine)?.map(|v| v.concat()).unwrap_or_default();
    comm.broadcast_bytes(0, &mut all)?;
    if all.len() != size * 16 {
        return Err(CommError {
            engine: comm.engine().name,
            message: format!("split: {} bytes of colors and keys for {size} ranks", all.len()),
        });
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&all[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    };
    let mut members: Vec<(u64, usize)> =
        (0..size).filter(|&r| word(2 * r) == color as u64).map(|r| (word(2 * r + 1), r)).collect();
    members.sort_unstable();
    Ok(members.into_iter().map(|(_, r)| r).collect())
}

/// Why a collective or a message failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{engine}: {message}")]
pub struct CommError {
    /// The engine that failed.
    pub engine: String,
    /// What happened.
    pub message: String,
}

/// A group of ranks and the few operations data-parallel training needs from an engine. Every rank of the
/// group calls collectives in the same order; messages are matched by peer and tag.
pub trait Communicator {
    /// This process's rank in `0..size()`.
    fn rank(&self) -> usize;
    /// Ranks in the group.
    fn size(&self) -> usize;
    /// The engine and its version.
    fn engine(&self) -> EngineInfo;
    /// Element-wise sum of `send` over every rank, into `recv` (the same length) on every rank.
    fn all_reduce_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError>;
    /// Element-wise sum of `send` over every rank, scattered: `send` holds `size()` equal blocks, and rank `r`
    /// receives the sum of every rank's block `r` into `recv` (one block long).
    fn reduce_scatter_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError>;
    /// Every rank's `send` (all of the same length), concatenated in rank order into `recv` on every rank.
    fn all_gather(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError>;
    /// Variable all-to-all (expert parallelism's dispatch and combine): `send` holds `send_counts[r]` values for
    /// each rank `r`, in rank order; `recv` receives `recv_counts[r]` values from each rank `r`, in rank order.
    /// Rank `r`'s `send_counts[s]` must equal rank `s`'s `recv_counts[r]` (the caller exchanges counts first).
    fn all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError>;
    /// Send `data` to rank `to` with `tag`.
    fn send(&mut self, to: usize, tag: u16, data: &[f32]) -> Result<(), CommError>;
    /// Receive exactly `data.len()` values from rank `from` with `tag`.
    fn recv(&mut self, from: usize, tag: u16, data: &mut [f32]) -> Result<(), CommError>;
    /// Start sending `data` to rank `to` with `tag` without waiting for its receive (`MPI_Isend`); the engine
    /// keeps the values until [`Communicator::wait_sends`]. A pipeline's ranks post their sends so that only
    /// receives block. The default sends at once: right for an engine whose sends never wait for their receive.
    fn post_send(&mut self, to: usize, tag: u16, data: Vec<f32>) -> Result<(), CommError> {
        self.send(to, tag, &data)
    }
    /// Wait until every send [`Communicator::post_send`] started has completed.
    fn wait_sends(&mut self) -> Result<(), CommError> {
        Ok(())
    }
    /// While `on`, this rank's waits (receives, collectives, posted sends) test between short sleeps instead of
    /// spinning, leaving the core to the ranks it waits for (a pipeline's stages idle by design, and on a
    /// machine with fewer cores than ranks a spinning wait slows the computation it waits for). The default
    /// ignores it.
    fn wait_politely(&mut self, on: bool) {
        let _ = on;
    }
    /// Every rank's `bytes`, in rank order, on `root` (`None` elsewhere).
    fn gather_bytes(&mut self, root: usize, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError>;
    /// `root`'s `bytes` on every rank.
    fn broadcast_bytes(&mut self, root: usize, bytes: &mut Vec<u8>) -> Result<(), CommError>;
    /// Wait until every rank is here.
    fn barrier(&mut self) -> Result<(), CommError>;
    /// A new group of the ranks that pass the same `color`, ordered by `key` (ties by rank): one mesh
    /// dimension's group (the tensor-parallel ranks of one data-parallel replica, say). Every rank of this group
    /// calls it, in the same order as its other collectives. The new group lives on after this one is dropped.
    /// The default refuses: an engine that cannot split says so.
    fn split(&mut self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError> {
        let _ = (color, key);
        Err(CommError {
            engine: self.engine().name,
            message: "this engine cannot split its group into sub-groups (needed for a device mesh)".into(),
        })
    }
    /// End every rank of the group with `code` (one rank failed mid-run; the others would wait for it
    /// forever). The default ends this process only.
    fn abort(&mut self, code: i32) -> ! {
        std::process::exit(code)
    }
}
