//! Pipeline schedules: each pipeline rank's ordered list of forward and backward passes over (micro-batch,
//! chunk) ([`stage_actions`]: GPipe, 1F1B, interleaved 1F1B), and the point-to-point messages those passes
//! exchange, ordered so that blocking sends cannot deadlock ([`stage_steps`]).
//!
//! Chunks are numbered in model order, `0..p x v`; chunk `c` runs on pipeline rank `c mod p` (layers dealt
//! round-robin, as `trainbench_graph::stages::cut_stages` numbers them). A forward pass of chunk `c > 0`
//! receives its input activations from chunk `c - 1`; a backward pass of chunk `c < p v - 1` receives the
//! gradient of its outputs from chunk `c + 1`.
//!
//! Messages: a send is posted without waiting for its receive ([`crate::Communicator::post_send`]) and all
//! of a step's sends are waited for at its end, so a rank only ever blocks in a receive, for data a pass of
//! another rank produces. Whether a pipeline can deadlock is then decided by the order of the passes alone; a
//! unit test runs every schedule's steps to their end under exactly these semantics.

use crate::mesh::PipelineSchedule;

/// Which pass an action runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pass {
    /// The forward pass (the last chunk computes the loss).
    Forward,
    /// The backward pass (gradients accumulate into the chunk's parameters).
    Backward,
}

/// One pass of one micro-batch through one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Action {
    /// Forward or backward.
    pub pass: Pass,
    /// Micro-batch, `0..m`.
    pub micro: usize,
    /// Chunk in model order, `0..p x v` (on rank `chunk mod p`).
    pub chunk: usize,
}

/// What a pipeline message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Carried {
    /// The activations chunk `chunk` takes as input (sent by chunk `chunk - 1`).
    Activation,
    /// The gradient of chunk `chunk`'s outputs (sent by chunk `chunk + 1`).
    Gradient,
}

/// One message between pipeline ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Message {
    /// The other pipeline rank (the receiver of a send, the sender of a receive).
    pub peer: usize,
    /// What it carries.
    pub carried: Carried,
    /// Micro-batch.
    pub micro: usize,
    /// The chunk the message is for (its receiver).
    pub chunk: usize,
}

impl Message {
    /// A tag that tells this message from every other of a step: `(chunk x m + micro) x 2 + kind`.
    pub fn tag(&self, microbatches: usize) -> u16 {
        let kind = match self.carried {
            Carried::Activation => 0,
            Carried::Gradient => 1,
        };
        u16::try_from((self.chunk * microbatches + self.micro) * 2 + kind).unwrap_or(u16::MAX)
    }
}

/// One step of a rank's pipeline: a pass, or a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Run a pass (its input has been received).
    Compute(Action),
    /// Post a send (it does not wait for the receive; the step's end waits for every send it posted).
    Send(Message),
    /// Receive (blocks until the message is there).
    Recv(Message),
}

/// A schedule that cannot be laid out as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// No stages, no micro-batches, a stage outside the pipeline, or no virtual stages.
    #[error(
        "a pipeline of {stages} stage(s) x {virtual_stages} virtual stage(s) with {microbatches} micro-batch(es) has no stage {stage}"
    )]
    Shape {
        /// Stages.
        stages: usize,
        /// Virtual stages per rank.
        virtual_stages: usize,
        /// Micro-batches.
        microbatches: usize,
        /// The stage asked about.
        stage: usize,
    },
    /// Interleaved 1F1B deals micro-batches to the ranks in groups of `p`.
    #[error("interleaved 1F1B over {stages} stages needs a multiple of {stages} micro-batches, found {microbatches}")]
    Interleaving {
        /// Stages.
        stages: usize,
        /// Micro-batches.
        microbatches: usize,
    },
    /// A replay found every rank waiting for a pass no rank can run (a schedule out of dependency order).
    #[error("the {schedule} schedule over {stages} stages stalls: every rank waits for a pass no rank can run")]
    Stalled {
        /// The schedule.
        schedule: &'static str,
        /// Stages.
        stages: usize,
    },
    /// Virtual stages above 1 are read by interleaved 1F1B only.
    #[error("{virtual_stages} virtual stages are only run by the interleaved-1f1b schedule, not {schedule}")]
    Virtual {
        /// The schedule.
        schedule: &'static str,
        /// Virtual stages asked for.
        virtual_stages: usize,
    },
}

/// The passes pipeline rank `stage` of `stages` runs in one step, in order: every (micro-batch, local chunk)
/// forward once and backward once.
///
/// - GPipe: every forward (micro-batches in order), then every backward (in order).
/// - 1F1B: `p - s - 1` forwards, then one forward and one backward alternately, then the remaining backwards;
///   at most `p - s` micro-batches' activations held.
/// - Interleaved 1F1B (`v` chunks per rank, `m` a multiple of `p`): the virtual micro-batch `k` of the rank is
///   chunk `(k / p) mod v` (reversed for backward) of micro-batch `(k / (p v)) p + k mod p`; `(p - s - 1) x 2 +
///   (v - 1) p` forwards first, then alternating, then the remaining backwards.
pub fn stage_actions(
    schedule: PipelineSchedule,
    stages: usize,
    stage: usize,
    microbatches: usize,
    virtual_stages: usize,
) -> Result<Vec<Action>, ScheduleError> {
    let (p, s, m, v) = (stages, stage, microbatches, virtual_stages);
    if p == 0 || m == 0 || v == 0 || s >= p {
        return Err(ScheduleError::Shape { stages: p, virtual_stages: v, microbatches: m, stage: s });
    }
    let act = |pass, micro, local: usize| Action { pass, micro, chunk: local * p + s };
    let plain = |schedule: PipelineSchedule| -> Result<(), ScheduleError> {
        if v > 1 {
            return Err(ScheduleError::Virtual { schedule: schedule.name(), virtual_stages: v });
        }
        Ok(())
    };
    Ok(match schedule {
        PipelineSchedule::Gpipe => {
            plain(schedule)?;
            (0..m).map(|i| act(Pass::Forward, i, 0)).chain((0..m).map(|i| act(Pass::Backward, i, 0))).collect()
        }
        PipelineSchedule::OneFOneB => {
            plain(schedule)?;
            let warmup = (p - s - 1).min(m);
            let mut out: Vec<Action> = (0..warmup).map(|i| act(Pass::Forward, i, 0)).collect();
            for i in 0..m - warmup {
                out.push(act(Pass::Forward, warmup + i, 0));
                out.push(act(Pass::Backward, i, 0));
            }
            out.extend((m - warmup..m).map(|i| act(Pass::Backward, i, 0)));
            out
        }
        PipelineSchedule::Interleaved1F1B => {
            if m % p != 0 {
                return Err(ScheduleError::Interleaving { stages: p, microbatches: m });
            }
            let total = m * v;
            let micro = |k: usize| (k / (p * v)) * p + k % p;
            let forward = |k: usize| act(Pass::Forward, micro(k), (k / p) % v);
            let backward = |k: usize| act(Pass::Backward, micro(k), v - 1 - (k / p) % v);
            let warmup = ((p - s - 1) * 2 + (v - 1) * p).min(total);
            let mut out: Vec<Action> = (0..warmup).map(forward).collect();
            for i in 0..total - warmup {
                out.push(forward(warmup + i));
                out.push(backward(i));
            }
            out.extend((total - warmup..total).map(backward));
            out
        }
    })
}

/// The steps of a rank running `actions` in a pipeline of `stages` ranks and `chunks` chunks: each pass
/// preceded by the receive it needs and followed by the send it makes.
pub fn stage_steps(actions: &[Action], stages: usize, chunks: usize) -> Vec<Step> {
    let mut out = Vec::with_capacity(actions.len() * 3);
    for a in actions {
        let message = |peer: usize, carried, chunk| Message { peer: peer % stages, carried, micro: a.micro, chunk };
        match a.pass {
            Pass::Forward if a.chunk > 0 => out.push(Step::Recv(message(a.chunk - 1, Carried::Activation, a.chunk))),
            Pass::Backward if a.chunk + 1 < chunks => {
                out.push(Step::Recv(message(a.chunk + 1, Carried::Gradient, a.chunk)));
            }
            Pass::Forward | Pass::Backward => {}
        }
        out.push(Step::Compute(*a));
        match a.pass {
            Pass::Forward if a.chunk + 1 < chunks => {
                out.push(Step::Send(message(a.chunk + 1, Carried::Activation, a.chunk + 1)));
            }
            Pass::Backward if a.chunk > 0 => out.push(Step::Send(message(a.chunk - 1, Carried::Gradient, a.chunk - 1))),
            Pass::Forward | Pass::Backward => {}
        }
    }
    out
}

/// Micro-batches (chunk micro-batches when interleaved) whose activations a rank running `actions` holds at
/// its peak: forwards run minus backwards run, at their largest.
pub fn peak_in_flight(actions: &[Action]) -> usize {
    let (mut now, mut peak) = (0usize, 0usize);
    for a in actions {
        match a.pass {
            Pass::Forward => {
                now += 1;
                peak = peak.max(now);
            }
            Pass::Backward => now = now.saturating_sub(1),
        }
    }
    peak
}

/// A pipeline step replayed in time ([`replay`]): how long each rank computed, and when the last pass ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// Seconds each pipeline rank spends in its passes, by rank.
    pub busy_s: Vec<f64>,
    /// Seconds from the step's start to the end of its last pass.
    pub makespan_s: f64,
}

impl Replay {
    /// Each rank's share of the step spent waiting: `1 - busy / makespan` (a rank that finishes early waits for
    /// the step's end, as the runtime's end-of-step agreement makes it).
    pub fn idle_shares(&self) -> Vec<f64> {
        let span = self.makespan_s;
        self.busy_s.iter().map(|b| if span > 0.0 { (1.0 - b / span).max(0.0) } else { 0.0 }).collect()
    }

    /// The bubble as a run measures it: the mean over ranks of their idle shares.
    pub fn bubble(&self) -> f64 {
        let shares = self.idle_shares();
        if shares.is_empty() { 0.0 } else { shares.iter().sum::<f64>() / shares.len() as f64 }
    }
}

/// One step of `schedule` over `stages` ranks, `microbatches` micro-batches and `virtual_stages` chunks per
/// rank, replayed in time: the pass `pass` of chunk `c` lasts `cost(c, pass)` seconds, a message between two
/// ranks arrives `hop_s` seconds after the pass that sends it ends, and each rank runs its passes in its
/// schedule's order, each as soon as the rank is free and its input is there. With equal chunks and instant
/// messages the bubble is the formula's, `(p - 1) / (v m + p - 1)`; unequal chunks (a head heavier than a
/// block) and slow links add to it.
pub fn replay(
    schedule: PipelineSchedule,
    (stages, microbatches, virtual_stages): (usize, usize, usize),
    cost: &dyn Fn(usize, Pass) -> f64,
    hop_s: f64,
) -> Result<Replay, ScheduleError> {
    let p = stages;
    let orders: Vec<Vec<Action>> =
        (0..p).map(|s| stage_actions(schedule, p, s, microbatches, virtual_stages)).collect::<Result<_, _>>()?;
    let chunks = p * virtual_stages;
    let mut ended: std::collections::HashMap<Action, f64> = std::collections::HashMap::new();
    let (mut next, mut free, mut busy) = (vec![0usize; p], vec![0.0f64; p], vec![0.0f64; p]);
    // The time the input of `a` is there (`None`: the pass that makes it has not run yet).
    let ready = |a: &Action, ended: &std::collections::HashMap<Action, f64>| -> Option<f64> {
        let from = match a.pass {
            Pass::Forward if a.chunk > 0 => Action { chunk: a.chunk - 1, ..*a },
            Pass::Backward if a.chunk + 1 < chunks => Action { chunk: a.chunk + 1, ..*a },
            Pass::Forward => return Some(0.0),
            Pass::Backward => return ended.get(&Action { pass: Pass::Forward, ..*a }).copied(),
        };
        let hop = if from.chunk % p == a.chunk % p { 0.0 } else { hop_s };
        ended.get(&from).map(|t| t + hop)
    };
    let total: usize = orders.iter().map(Vec::len).sum();
    while ended.len() < total {
        let mut progress = false;
        for s in 0..p {
            while let Some(a) = orders[s].get(next[s]) {
                let Some(at) = ready(a, &ended) else { break };
                let seconds = cost(a.chunk, a.pass).max(0.0);
                free[s] = free[s].max(at) + seconds;
                busy[s] += seconds;
                ended.insert(*a, free[s]);
                next[s] += 1;
                progress = true;
            }
        }
        if !progress {
            return Err(ScheduleError::Stalled { schedule: schedule.name(), stages: p });
        }
    }
    Ok(Replay { busy_s: busy, makespan_s: free.iter().copied().fold(0.0, f64::max) })
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
