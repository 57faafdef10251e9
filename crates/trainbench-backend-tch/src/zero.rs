//! ZeRO in the tch backend: the trained tensors grouped as the exchange's units ([`ZeroParams`]), and stage 3's
//! hooks around each recomputed block ([`Zero3Hooks`]): the block's weights all-gathered into its tensors
//! before it runs (forward, and its replay in the backward pass) and freed after; its gradients
//! reduce-scattered and dropped once its replay's backward is done. The rest of the model (the `root` unit)
//! stays gathered from one step's end to the next. With `topology.overlap` ([`with_zero3_hooks`]) the
//! collectives run on a communication thread: the next block's gather while the current block computes, each
//! block's reduce-scatter while the blocks below it are replayed.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_comm::{GradientExchange, Sharded, Unit, UnitQueue, with_unit_queue};

use crate::checkpoint::BlockWeights;
use crate::clock::Clock;
use crate::events::Phase;

/// A failed sharded collective as a tch error.
pub(crate) fn comm_error(e: impl std::fmt::Display) -> TchError {
    TchError::Kind(format!("sharded exchange: {e}"))
}

/// The trained tensors of a sharded run, by unit.
pub struct ZeroParams {
    /// Per unit: handles of its tensors (sharing storage with the model's), in the unit's order.
    units: Vec<Vec<Tensor>>,
    /// Per unit: each tensor's shape.
    shapes: Vec<Vec<Vec<i64>>>,
    /// Per unit: its length in elements.
    lens: Vec<usize>,
    /// Per graph block: the unit holding its weights.
    block_unit: Vec<Option<usize>>,
    device: Device,
    kind: Kind,
}

impl ZeroParams {
    /// `params` (the exchange's layout order) grouped as `units`; `blocks` graph blocks.
    pub fn new(units: &[Unit], params: &[Tensor], blocks: usize, device: Device) -> Self {
        let mut block_unit = vec![None; blocks];
        for (u, unit) in units.iter().enumerate() {
            if let Some(b) = unit.graph_block.filter(|&b| b < blocks) {
                block_unit[b] = Some(u);
            }
        }
        let handles: Vec<Vec<Tensor>> =
            units.iter().map(|u| u.tensors.iter().map(|&i| params[i].shallow_clone()).collect()).collect();
        let shapes = handles.iter().map(|ts| ts.iter().map(Tensor::size).collect()).collect();
        let kind = params.first().map_or(Kind::Float, Tensor::kind);
        ZeroParams { units: handles, shapes, lens: units.iter().map(|u| u.len).collect(), block_unit, device, kind }
    }

    /// Units.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Units that hold no block's weights (stage 3 keeps them gathered from one step's end to the next).
    pub fn root_units(&self) -> Vec<usize> {
        (0..self.units.len()).filter(|u| !self.block_unit.contains(&Some(*u))).collect()
    }

    /// The unit holding block `b`'s weights.
    pub fn unit_of_block(&self, b: usize) -> Option<usize> {
        self.block_unit.get(b).copied().flatten()
    }

    /// Elements of unit `u`.
    pub fn unit_len(&self, u: usize) -> usize {
        self.lens[u]
    }

    /// Free unit `u`'s weights (their tensors keep their identity, with no elements).
    pub fn free(&self, u: usize) -> Result<(), TchError> {
        let empty = Tensor::f_empty([0], (self.kind, self.device))?;
        tch::no_grad(|| {
            for p in &self.units[u] {
                p.shallow_clone().set_data(&empty);
            }
        });
        Ok(())
    }

    /// Unit `u`'s weights from `values` (the unit's elements in order), into fresh storage of its tensors.
    pub fn fill(&self, u: usize, values: &[f32]) -> Result<(), TchError> {
        let mut at = 0;
        for (p, shape) in self.units[u].iter().zip(&self.shapes[u]) {
            let n = shape.iter().product::<i64>() as usize;
            let t = Tensor::f_from_slice(&values[at..at + n])?
                .f_view(shape.as_slice())?
                .f_to_device(self.device)?
                .f_to_kind(self.kind)?;
            tch::no_grad(|| p.shallow_clone().set_data(&t));
            at += n;
        }
        Ok(())
    }

    /// Unit `u`'s weights from `values` (the unit's elements in order), into the tensors' existing storage
    /// (stages 1 and 2, whose tensors are never freed).
    pub fn write(&self, u: usize, values: &[f32]) -> Result<(), TchError> {
        let mut at = 0;
        for p in &self.units[u] {
            let n = p.numel();
            crate::dist::write_into(p, &values[at..at + n])?;
            at += n;
        }
        Ok(())
    }

    /// Unit `u`'s gradients, flat (zeros where a tensor got none), into `out`.
    pub fn grads(&self, u: usize, out: &mut Vec<f32>) -> Result<(), TchError> {
        out.resize(self.lens[u], 0.0);
        crate::dist::stage_grads(self.units[u].iter(), out)
    }

    /// Drop unit `u`'s gradients.
    pub fn drop_grads(&self, u: usize) -> Result<(), TchError> {
        crate::fused::grads_to_none(&self.units[u])
    }

    /// Bytes of the gradients held now, over every unit.
    pub fn grad_bytes(&self) -> u64 {
        crate::lower::grad_bytes(self.units.iter().flatten())
    }
}

/// What a sharded run keeps beside the exchange: its tensors by unit, scratch, and the most gradient bytes it
/// held at once.
pub struct ZeroState {
    /// The tensors by unit.
    pub params: ZeroParams,
    /// Scratch for one unit.
    pub buf: Vec<f32>,
    /// Buffers the communication thread of an overlapped stage 3 reuses from step to step.
    pub spare: Vec<Vec<f32>>,
    /// The most gradient bytes held at once so far.
    pub grads_peak: u64,
}

impl ZeroState {
    /// After the last step, stage 3's units gathered from `s` into the model (to report the whole model's
    /// weights; not counted in the steps' traffic); stages 1 and 2 hold them gathered already.
    pub fn gather_all(&mut self, s: &mut dyn Sharded) -> Result<(), TchError> {
        if s.stage() != 3 {
            return Ok(());
        }
        for u in 0..self.params.len() {
            self.buf.resize(self.params.unit_len(u), 0.0);
            s.gather_final(u, &mut self.buf).map_err(comm_error)?;
            self.params.fill(u, &self.buf)?;
        }
        Ok(())
    }
}

/// How stage 3's hooks reach the exchange.
enum Collectives<'x> {
    /// Each collective called where it is needed, on this thread.
    Direct(&'x mut dyn Sharded),
    /// Through the communication thread: gathers asked for ahead, reduce-scatters handed over.
    Queued(&'x mut UnitQueue),
}

/// Stage 3 around each recomputed block: gather before, free after the forward, reduce-scatter after the
/// backward; the time the step waits for its collectives is the communication phase's, the rest `phase`'s.
pub struct Zero3Hooks<'x> {
    collectives: Collectives<'x>,
    state: &'x mut ZeroState,
    clock: &'x mut Clock,
    phase: Phase,
}

/// Run `body` with stage 3's hooks when `exchange` is stage 3 (`None` for any other run), interrupting `phase`
/// on `clock`. With `overlap` the hooks' collectives run on a communication thread for the duration of
/// `body` (which must not reach the exchange otherwise); every collective asked is done when this returns.
pub fn with_zero3_hooks<R>(
    exchange: &mut Option<&mut dyn GradientExchange>,
    state: &mut Option<ZeroState>,
    clock: &mut Clock,
    phase: Phase,
    overlap: bool,
    body: impl FnOnce(Option<&mut (dyn BlockWeights + '_)>) -> Result<R, TchError>,
) -> Result<R, TchError> {
    let sharded = exchange.as_deref_mut().and_then(|x| x.sharded()).filter(|s| s.stage() == 3);
    let (Some(sharded), Some(state)) = (sharded, state.as_mut()) else { return body(None) };
    if !overlap {
        let mut hooks = Zero3Hooks { collectives: Collectives::Direct(sharded), state, clock, phase };
        return body(Some(&mut hooks));
    }
    let mut spare = std::mem::take(&mut state.spare);
    let (value, ran) = with_unit_queue(sharded, &mut spare, |queue| {
        let mut hooks = Zero3Hooks { collectives: Collectives::Queued(queue), state: &mut *state, clock, phase };
        body(Some(&mut hooks))
    });
    state.spare = spare;
    // A failed collective explains a failed body (it waited for it), not the other way round.
    ran.map_err(comm_error)?;
    value
}

impl Zero3Hooks<'_> {
    /// Gather unit `u`'s weights into its tensors (waiting for a prefetched gather to arrive).
    fn gather(&mut self, u: usize) -> Result<(), TchError> {
        self.clock.lap(self.phase)?;
        let s = &mut *self.state;
        match &mut self.collectives {
            Collectives::Direct(sharded) => {
                s.buf.resize(s.params.unit_len(u), 0.0);
                sharded.gather(u, &mut s.buf).map_err(comm_error)?;
                s.params.fill(u, &s.buf)?;
            }
            Collectives::Queued(queue) => {
                let values = queue.take(u).map_err(comm_error)?;
                let filled = s.params.fill(u, &values);
                queue.recycle(values);
                filled?;
            }
        }
        self.clock.lap(Phase::Comm)
    }

    /// Reduce-scatter unit `u`'s gradients (on the communication thread: handed over) and drop them.
    fn reduce(&mut self, u: usize) -> Result<(), TchError> {
        self.clock.lap(self.phase)?;
        let s = &mut *self.state;
        s.grads_peak = s.grads_peak.max(s.params.grad_bytes());
        match &mut self.collectives {
            Collectives::Direct(sharded) => {
                s.params.grads(u, &mut s.buf)?;
                sharded.reduce(u, &s.buf).map_err(comm_error)?;
            }
            Collectives::Queued(queue) => {
                let mut grads = queue.gradient_buffer(u);
                s.params.grads(u, &mut grads)?;
                queue.reduce(u, grads).map_err(comm_error)?;
            }
        }
        s.params.drop_grads(u)?;
        self.clock.lap(Phase::Comm)
    }
}

impl BlockWeights for Zero3Hooks<'_> {
    fn before(&mut self, block: usize) -> Result<(), TchError> {
        match self.state.params.unit_of_block(block) {
            Some(u) => self.gather(u),
            None => Ok(()),
        }
    }

    fn after_forward(&mut self, block: usize) -> Result<(), TchError> {
        match self.state.params.unit_of_block(block) {
            Some(u) => self.state.params.free(u),
            None => Ok(()),
        }
    }

    fn after_backward(&mut self, block: usize) -> Result<(), TchError> {
        match self.state.params.unit_of_block(block) {
            Some(u) => {
                self.reduce(u)?;
                self.state.params.free(u)
            }
            None => Ok(()),
        }
    }

    fn prefetch(&mut self, block: usize) -> Result<(), TchError> {
        match (&mut self.collectives, self.state.params.unit_of_block(block)) {
            (Collectives::Queued(queue), Some(u)) => queue.prefetch(u).map_err(comm_error),
            _ => Ok(()),
        }
    }
}
