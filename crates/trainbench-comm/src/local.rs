//! `threads`: an in-process engine for tests. Ranks are threads of one process exchanging messages over
//! channels; collectives gather to rank 0 and fan out, in rank order, so results are deterministic. It lets the
//! strategies and the parameter-server protocol be tested without MPI; real runs use a real engine.

use std::sync::mpsc::{Receiver, Sender, channel};

use crate::communicator::{CommError, Communicator, EngineInfo, check_blocks, check_counts};

const TAG_REDUCE: u16 = u16::MAX;
const TAG_REDUCED: u16 = u16::MAX - 1;
const TAG_GATHER: u16 = u16::MAX - 2;
const TAG_BCAST: u16 = u16::MAX - 3;
const TAG_SPLIT: u16 = u16::MAX - 4;
const TAG_ALL_TO_ALL: u16 = u16::MAX - 5;

enum Payload {
    F32(Vec<f32>),
    Bytes(Vec<u8>),
    /// A member's inbox in a group being split off.
    Inbox(Sender<Message>),
}

struct Message {
    from: usize,
    tag: u16,
    payload: Payload,
}

/// One rank of an in-process group (see the module documentation).
pub struct ThreadComm {
    rank: usize,
    peers: Vec<Sender<Message>>,
    inbox: Receiver<Message>,
    /// Messages received before they were asked for.
    early: Vec<Message>,
}

impl ThreadComm {
    /// A group of `size` ranks; hand one to each thread.
    pub fn group(size: usize) -> Vec<ThreadComm> {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..size).map(|_| channel::<Message>()).unzip();
        receivers
            .into_iter()
            .enumerate()
            .map(|(rank, inbox)| ThreadComm { rank, peers: senders.clone(), inbox, early: Vec::new() })
            .collect()
    }

    fn error(&self, message: String) -> CommError {
        CommError { engine: "threads".into(), message }
    }

    fn post(&self, to: usize, tag: u16, payload: Payload) -> Result<(), CommError> {
        let peer = self.peers.get(to).ok_or_else(|| self.error(format!("no rank {to}")))?;
        peer.send(Message { from: self.rank, tag, payload }).map_err(|_| self.error(format!("rank {to} has gone")))
    }

    fn take(&mut self, from: usize, tag: u16) -> Result<Payload, CommError> {
        if let Some(i) = self.early.iter().position(|m| m.from == from && m.tag == tag) {
            return Ok(self.early.remove(i).payload);
        }
        loop {
            let m = self.inbox.recv().map_err(|_| self.error(format!("rank {from} has gone")))?;
            if m.from == from && m.tag == tag {
                return Ok(m.payload);
            }
            self.early.push(m);
        }
    }

    fn take_f32(&mut self, from: usize, tag: u16) -> Result<Vec<f32>, CommError> {
        match self.take(from, tag)? {
            Payload::F32(v) => Ok(v),
            Payload::Bytes(_) | Payload::Inbox(_) => {
                Err(self.error(format!("rank {from} sent bytes where values were expected")))
            }
        }
    }

    fn take_bytes(&mut self, from: usize, tag: u16) -> Result<Vec<u8>, CommError> {
        match self.take(from, tag)? {
            Payload::Bytes(v) => Ok(v),
            Payload::F32(_) | Payload::Inbox(_) => {
                Err(self.error(format!("rank {from} sent values where bytes were expected")))
            }
        }
    }
}

impl Communicator for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.peers.len()
    }
    fn engine(&self) -> EngineInfo {
        EngineInfo { name: "threads".into(), version: "in-process test engine".into() }
    }

    fn all_reduce_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        if self.rank == 0 {
            recv.copy_from_slice(send);
            for r in 1..self.size() {
                let v = self.take_f32(r, TAG_REDUCE)?;
                if v.len() != recv.len() {
                    return Err(self.error(format!("rank {r} reduced {} values, rank 0 {}", v.len(), recv.len())));
                }
                recv.iter_mut().zip(&v).for_each(|(a, b)| *a += b);
            }
            for r in 1..self.size() {
                self.post(r, TAG_REDUCED, Payload::F32(recv.to_vec()))?;
            }
        } else {
            self.post(0, TAG_REDUCE, Payload::F32(send.to_vec()))?;
            let v = self.take_f32(0, TAG_REDUCED)?;
            recv.copy_from_slice(&v);
        }
        Ok(())
    }

    fn reduce_scatter_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        check_blocks("threads", "reduce-scatter", send.len(), recv.len(), self.size())?;
        let mut whole = vec![0.0f32; send.len()];
        self.all_reduce_sum(send, &mut whole)?;
        let at = self.rank * recv.len();
        recv.copy_from_slice(&whole[at..at + recv.len()]);
        Ok(())
    }

    fn all_gather(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        check_blocks("threads", "all-gather", recv.len(), send.len(), self.size())?;
        // Every other rank contributes zeros to this rank's block: the sum is the block, bit for bit.
        let mut mine = vec![0.0f32; recv.len()];
        let at = self.rank * send.len();
        mine[at..at + send.len()].copy_from_slice(send);
        self.all_reduce_sum(&mine, recv)
    }

    fn all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        check_counts("threads", self.size(), (send.len(), send_counts), (recv.len(), recv_counts))?;
        // Every block posted first (the channels do not block), then each peer's taken in rank order.
        let starts = |counts: &[usize]| -> Vec<usize> {
            counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect()
        };
        let (from, to) = (starts(send_counts), starts(recv_counts));
        for r in (0..self.size()).filter(|&r| r != self.rank) {
            self.post(r, TAG_ALL_TO_ALL, Payload::F32(send[from[r]..from[r] + send_counts[r]].to_vec()))?;
        }
        for r in 0..self.size() {
            let block = if r == self.rank {
                send[from[r]..from[r] + send_counts[r]].to_vec()
            } else {
                self.take_f32(r, TAG_ALL_TO_ALL)?
            };
            if block.len() != recv_counts[r] {
                return Err(self.error(format!(
                    "all-to-all: rank {r} sent {} values, {} expected",
                    block.len(),
                    recv_counts[r]
                )));
            }
            recv[to[r]..to[r] + block.len()].copy_from_slice(&block);
        }
        Ok(())
    }

    fn send(&mut self, to: usize, tag: u16, data: &[f32]) -> Result<(), CommError> {
        self.post(to, tag, Payload::F32(data.to_vec()))
    }

    fn recv(&mut self, from: usize, tag: u16, data: &mut [f32]) -> Result<(), CommError> {
        let v = self.take_f32(from, tag)?;
        if v.len() != data.len() {
            return Err(self.error(format!("rank {from} sent {} values, {} expected", v.len(), data.len())));
        }
        data.copy_from_slice(&v);
        Ok(())
    }

    fn gather_bytes(&mut self, root: usize, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        if self.rank != root {
            self.post(root, TAG_GATHER, Payload::Bytes(bytes.to_vec()))?;
            return Ok(None);
        }
        let mut all = Vec::with_capacity(self.size());
        for r in 0..self.size() {
            all.push(if r == root { bytes.to_vec() } else { self.take_bytes(r, TAG_GATHER)? });
        }
        Ok(Some(all))
    }

    fn broadcast_bytes(&mut self, root: usize, bytes: &mut Vec<u8>) -> Result<(), CommError> {
        if self.rank == root {
            for r in (0..self.size()).filter(|&r| r != root) {
                self.post(r, TAG_BCAST, Payload::Bytes(bytes.clone()))?;
            }
        } else {
            *bytes = self.take_bytes(root, TAG_BCAST)?;
        }
        Ok(())
    }

    fn barrier(&mut self) -> Result<(), CommError> {
        let mut none = [0.0f32; 0];
        self.all_reduce_sum(&[], &mut none)
    }

    fn split(&mut self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError> {
        let members = crate::communicator::split_members(self, color, key)?;
        // Each member makes its inbox and hands its sender to the others.
        let (tx, inbox) = channel::<Message>();
        for &r in members.iter().filter(|r| **r != self.rank) {
            self.post(r, TAG_SPLIT, Payload::Inbox(tx.clone()))?;
        }
        let mut peers = Vec::with_capacity(members.len());
        let mut rank = 0;
        for (i, &r) in members.iter().enumerate() {
            if r == self.rank {
                rank = i;
                peers.push(tx.clone());
                continue;
            }
            match self.take(r, TAG_SPLIT)? {
                Payload::Inbox(peer) => peers.push(peer),
                Payload::F32(_) | Payload::Bytes(_) => {
                    return Err(self.error(format!("split: rank {r} sent data where its inbox was expected")));
                }
            }
        }
        Ok(Box::new(ThreadComm { rank, peers, inbox, early: Vec::new() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_to_all_delivers_each_block_to_its_rank_with_uneven_counts() {
        // Rank s sends (s + 1) x (r + 1) values to rank r, each value 100 s + r.
        let handles: Vec<_> = ThreadComm::group(3)
            .into_iter()
            .map(|mut c| {
                std::thread::spawn(move || {
                    let me = c.rank();
                    let send_counts: Vec<usize> = (0..3).map(|r| (me + 1) * (r + 1)).collect();
                    let recv_counts: Vec<usize> = (0..3).map(|s| (s + 1) * (me + 1)).collect();
                    let send: Vec<f32> =
                        (0..3).flat_map(|r| std::iter::repeat_n((100 * me + r) as f32, send_counts[r])).collect();
                    let mut recv = vec![0f32; recv_counts.iter().sum()];
                    c.all_to_all(&send, &send_counts, &mut recv, &recv_counts).unwrap();
                    // Counts that do not fit the buffers are refused.
                    let bad = c.all_to_all(&send, &[1, 1], &mut recv, &recv_counts).unwrap_err();
                    (me, recv, bad.message)
                })
            })
            .collect();
        for h in handles {
            let (me, recv, bad) = h.join().unwrap();
            let expected: Vec<f32> =
                (0..3).flat_map(|s| std::iter::repeat_n((100 * s + me) as f32, (s + 1) * (me + 1))).collect();
            assert_eq!(recv, expected, "rank {me}");
            assert!(bad.contains("2 send counts over 3 ranks"), "{bad}");
        }
    }

    #[test]
    fn split_groups_by_color_in_key_order_and_their_collectives_stay_inside() {
        // Four ranks, two colors (even and odd ranks), keyed in reverse: rank 2 is rank 0 of the even group.
        let handles: Vec<_> = ThreadComm::group(4)
            .into_iter()
            .map(|mut world| {
                std::thread::spawn(move || {
                    let me = world.rank();
                    let mut group = world.split(me % 2, 10 - me).unwrap();
                    let mut sum = [0f32];
                    group.all_reduce_sum(&[me as f32], &mut sum).unwrap();
                    let mut gathered = [0f32; 2];
                    group.all_gather(&[me as f32], &mut gathered).unwrap();
                    // The world still works beside its groups.
                    let mut total = [0f32];
                    world.all_reduce_sum(&[1.0], &mut total).unwrap();
                    (me, group.rank(), group.size(), sum[0], gathered, total[0])
                })
            })
            .collect();
        for h in handles {
            let (me, rank, size, sum, gathered, total) = h.join().unwrap();
            assert_eq!(size, 2);
            assert_eq!(rank, usize::from(me < 2), "rank {me}: key 10 - rank orders the group in reverse");
            let expected: [f32; 2] = if me % 2 == 0 { [2.0, 0.0] } else { [3.0, 1.0] };
            assert_eq!(sum, expected[0] + expected[1]);
            assert_eq!(gathered, expected);
            assert_eq!(total, 4.0);
        }
    }
}
