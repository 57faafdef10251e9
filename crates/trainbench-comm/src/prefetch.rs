//! ZeRO-3's collectives beside the computation: while the backend computes one block, a communication thread
//! all-gathers the weights of the block it will need next (prefetch) and reduce-scatters the gradients of the
//! block whose backward pass just ended. The thread runs the collectives in the order the backend asks for
//! them, which is the same on every worker (the blocks' order in the forward pass, then its reverse), so the
//! workers' collectives match whatever each one's timing.

use std::sync::mpsc::{Receiver, Sender, channel};

use crate::communicator::CommError;
use crate::exchange::Sharded;
use crate::overlap::{ComputeWaits, Sendable};

/// A collective asked of the communication thread.
enum Job {
    /// All-gather a unit's weights into the buffer.
    Gather { unit: usize, out: Vec<f32> },
    /// Reduce-scatter a unit's gradients (the buffer's values) into the worker's shard.
    Reduce { unit: usize, grads: Vec<f32> },
}

/// What the communication thread hands back.
enum Done {
    /// A unit's gathered weights.
    Gathered { unit: usize, values: Vec<f32> },
    /// A reduced unit's buffer, for reuse.
    Reduced(Vec<f32>),
}

/// The backend's side of [`with_unit_queue`]: asks for gathers ahead of need, takes them when the block runs,
/// and hands over gradients to reduce-scatter.
pub struct UnitQueue {
    jobs: Option<Sender<Job>>,
    done: Receiver<Result<Done, CommError>>,
    /// Per unit: a gather asked for and not taken yet.
    asked: Vec<bool>,
    /// Per unit: a gather that arrived before it was taken.
    arrived: Vec<Option<Vec<f32>>>,
    /// Buffers to reuse (lent by the caller of [`with_unit_queue`], returned when it ends).
    spare: Vec<Vec<f32>>,
    /// Elements of each unit.
    lens: Vec<usize>,
    engine: String,
}

impl UnitQueue {
    fn gone(&self, what: &str) -> CommError {
        CommError { engine: self.engine.clone(), message: format!("the communication thread has gone ({what})") }
    }

    fn buffer(&mut self, len: usize) -> Vec<f32> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.resize(len, 0.0);
        b
    }

    fn send(&mut self, job: Job) -> Result<(), CommError> {
        let sent = self.jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok());
        if sent { Ok(()) } else { Err(self.drain_error("asking for a collective")) }
    }

    /// The thread's own error if it sent one, else that it has gone.
    fn drain_error(&mut self, what: &str) -> CommError {
        while let Ok(done) = self.done.try_recv() {
            if let Err(e) = done {
                return e;
            }
        }
        self.gone(what)
    }

    /// Start gathering unit `unit`'s weights, unless that is already under way or done.
    pub fn prefetch(&mut self, unit: usize) -> Result<(), CommError> {
        if self.asked[unit] {
            return Ok(());
        }
        self.asked[unit] = true;
        let out = self.buffer(self.lens[unit]);
        self.send(Job::Gather { unit, out })
    }

    /// Unit `unit`'s gathered weights (`Unit::len` values), waiting for them (asked for now if they were not
    /// prefetched). Give the buffer back with [`UnitQueue::recycle`] once read.
    pub fn take(&mut self, unit: usize) -> Result<Vec<f32>, CommError> {
        self.prefetch(unit)?;
        let _waits = ComputeWaits::start();
        loop {
            if let Some(values) = self.arrived[unit].take() {
                self.asked[unit] = false;
                return Ok(values);
            }
            match self.done.recv() {
                Ok(Ok(Done::Gathered { unit: u, values })) => self.arrived[u] = Some(values),
                Ok(Ok(Done::Reduced(buf))) => self.spare.push(buf),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(self.gone("waiting for a gather")),
            }
        }
    }

    /// A buffer of unit `unit`'s length for its gradients; hand it to [`UnitQueue::reduce`].
    pub fn gradient_buffer(&mut self, unit: usize) -> Vec<f32> {
        self.buffer(self.lens[unit])
    }

    /// Reduce-scatter unit `unit`'s gradients `grads` (this worker's mean over its batch) on the thread.
    pub fn reduce(&mut self, unit: usize, grads: Vec<f32>) -> Result<(), CommError> {
        self.send(Job::Reduce { unit, grads })
    }

    /// Hand a buffer back for reuse.
    pub fn recycle(&mut self, buf: Vec<f32>) {
        self.spare.push(buf);
    }
}

/// Run `body` on this thread while a communication thread runs, in the order asked, the gathers and
/// reduce-scatters `body` asks of its [`UnitQueue`]. Everything asked is run before this returns, even if
/// `body` failed (every worker issues the same collectives). `spare` lends buffers and gets them back, to
/// keep from one step to the next. Returns `body`'s value and the first collective that failed, if any. The
/// seconds inside the collectives are counted by the exchange ([`crate::ExchangeStats::busy_s`]).
pub fn with_unit_queue<R>(
    sharded: &mut dyn Sharded,
    spare: &mut Vec<Vec<f32>>,
    body: impl FnOnce(&mut UnitQueue) -> R,
) -> (R, Result<(), CommError>) {
    let lens: Vec<usize> = sharded.units().iter().map(|u| u.len).collect();
    let engine = sharded.engine_name();
    let (jobs_tx, jobs_rx) = channel::<Job>();
    let (done_tx, done_rx) = channel::<Result<Done, CommError>>();
    let mut queue = UnitQueue {
        jobs: Some(jobs_tx),
        done: done_rx,
        asked: vec![false; lens.len()],
        arrived: (0..lens.len()).map(|_| None).collect(),
        spare: std::mem::take(spare),
        lens,
        engine,
    };
    let mut s = Sendable(sharded);
    std::thread::scope(|scope| {
        let thread = scope.spawn(move || run_jobs(&mut s, jobs_rx, done_tx));
        let value = body(&mut queue);
        queue.jobs = None;
        let _waits = ComputeWaits::start();
        let ran = thread.join().unwrap_or_else(|_| Err(queue.gone("it panicked")));
        // The thread has ended: what is left in the channel are buffers to keep (gathers never taken, too).
        while let Ok(done) = queue.done.try_recv() {
            match done {
                Ok(Done::Gathered { values, .. }) | Ok(Done::Reduced(values)) => queue.spare.push(values),
                Err(_) => {}
            }
        }
        queue.spare.extend(queue.arrived.iter_mut().filter_map(Option::take));
        *spare = std::mem::take(&mut queue.spare);
        (value, ran)
    })
}

/// The communication thread: every job in order; on a failure it tells the backend and stops.
fn run_jobs(
    s: &mut Sendable<'_, dyn Sharded + '_>,
    jobs: Receiver<Job>,
    done: Sender<Result<Done, CommError>>,
) -> Result<(), CommError> {
    for job in jobs {
        let ran = match job {
            Job::Gather { unit, mut out } => s.0.gather(unit, &mut out).map(|()| Done::Gathered { unit, values: out }),
            Job::Reduce { unit, grads } => s.0.reduce(unit, &grads).map(|()| Done::Reduced(grads)),
        };
        match ran {
            Ok(d) => {
                let _ = done.send(Ok(d));
            }
            Err(e) => {
                let _ = done.send(Err(e.clone()));
                return Err(e);
            }
        }
    }
    Ok(())
}
