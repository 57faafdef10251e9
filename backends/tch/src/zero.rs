//! ZeRO in the tch backend: the trained tensors grouped as the exchange's units ([`ZeroParams`]), and stage 3's
//! hooks around each recomputed block ([`Zero3Hooks`]): the block's weights all-gathered into its tensors
//! before it runs (forward, and its replay in the backward pass) and freed after; its gradients
//! reduce-scattered and dropped once its replay's backward is done. The rest of the model (the `root` unit)
//! stays gathered from one step's end to the next.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_comm::{Sharded, Unit};

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
    /// The most gradient bytes held at once so far.
    pub grads_peak: u64,
}

/// Stage 3 around each recomputed block: gather before, free after the forward, reduce-scatter after the
/// backward; the time its collectives take is the communication phase's, the rest `phase`'s.
pub struct Zero3Hooks<'x> {
    /// The exchange's unit-by-unit calls.
    pub sharded: &'x mut dyn Sharded,
    /// The tensors, scratch and peak.
    pub state: &'x mut ZeroState,
    /// The step's clock.
    pub clock: &'x mut Clock,
    /// The phase the hooks interrupt (forward or backward).
    pub phase: Phase,
}

impl<'x> Zero3Hooks<'x> {
    /// The hooks of a stage-3 run (`None` for any other run), interrupting `phase` on `clock`.
    pub fn of(
        exchange: &'x mut Option<&mut dyn trainbench_comm::GradientExchange>,
        state: &'x mut Option<ZeroState>,
        clock: &'x mut Clock,
        phase: Phase,
    ) -> Option<Self> {
        let sharded = exchange.as_deref_mut()?.sharded().filter(|s| s.stage() == 3)?;
        Some(Zero3Hooks { sharded, state: state.as_mut()?, clock, phase })
    }

    /// Gather unit `u`'s weights into its tensors.
    pub fn gather(&mut self, u: usize) -> Result<(), TchError> {
        self.clock.lap(self.phase)?;
        let s = &mut *self.state;
        s.buf.resize(s.params.unit_len(u), 0.0);
        self.sharded.gather(u, &mut s.buf).map_err(comm_error)?;
        s.params.fill(u, &s.buf)?;
        self.clock.lap(Phase::Comm)
    }

    /// Reduce-scatter unit `u`'s gradients and drop them.
    pub fn reduce(&mut self, u: usize) -> Result<(), TchError> {
        self.clock.lap(self.phase)?;
        let s = &mut *self.state;
        s.grads_peak = s.grads_peak.max(s.params.grad_bytes());
        s.params.grads(u, &mut s.buf)?;
        self.sharded.reduce(u, &s.buf).map_err(comm_error)?;
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
}
