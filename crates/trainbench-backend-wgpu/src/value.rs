//! Dynamically ranked activations on top of burn's statically ranked tensors.
//!
//! Every activation is held as a rank-6 tensor whose leading dimensions are 1, together with its logical shape
//! (batch first). Operations reshape to the rank they need; a per-sample axis `a` of a value with logical rank
//! `r` (batch included) is physical dimension `6 - r + 1 + a`.

use burn::tensor::{Int, Tensor};

/// Physical rank every value is held at.
pub const RANK: usize = 6;

/// Why a value could not be taken at the rank an operation needs (an internal inconsistency).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("internal shape error: {0}")]
pub struct ValueError(pub String);

/// Pad a logical shape with leading ones to rank 6.
pub fn pad(shape: &[usize]) -> [usize; RANK] {
    let mut out = [1; RANK];
    let off = RANK - shape.len();
    out[off..].copy_from_slice(shape);
    out
}

fn fixed<const D: usize>(shape: &[usize]) -> Result<[usize; D], ValueError> {
    shape.try_into().map_err(|_| ValueError(format!("expected a rank-{D} value, got shape {shape:?}")))
}

/// A float activation.
#[derive(Clone)]
pub struct Act {
    /// The data at rank 6.
    pub t: Tensor<RANK>,
    /// Logical shape, batch first.
    pub shape: Vec<usize>,
}

impl Act {
    /// Wrap a tensor of any rank; its dims are its logical shape.
    pub fn lift<const D: usize>(t: Tensor<D>) -> Self {
        let shape = t.dims().to_vec();
        Self { t: t.reshape(pad(&shape)), shape }
    }

    /// Wrap a tensor, reshaping it to `shape` (same number of elements).
    pub fn with_shape<const D: usize>(t: Tensor<D>, shape: Vec<usize>) -> Self {
        Self { t: t.reshape(pad(&shape)), shape }
    }

    /// The value at its logical rank `D`.
    pub fn get<const D: usize>(&self) -> Result<Tensor<D>, ValueError> {
        Ok(self.t.clone().reshape(fixed::<D>(&self.shape)?))
    }

    /// The value reshaped to `dims` (same number of elements).
    pub fn view<const D: usize>(&self, dims: [usize; D]) -> Tensor<D> {
        self.t.clone().reshape(dims)
    }

    /// Physical dimension of per-sample axis `axis`.
    pub fn axis(&self, axis: usize) -> usize {
        RANK - self.shape.len() + 1 + axis
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// An integer activation (token ids, labels).
#[derive(Clone)]
pub struct IntAct {
    /// The data at rank 6.
    pub t: Tensor<RANK, Int>,
    /// Logical shape, batch first.
    pub shape: Vec<usize>,
}

impl IntAct {
    /// The ids reshaped to `dims` (same number of elements).
    pub fn view<const D: usize>(&self, dims: [usize; D]) -> Tensor<D, Int> {
        self.t.clone().reshape(dims)
    }
}

/// A value flowing along a graph edge.
#[derive(Clone)]
pub enum Value {
    /// Real-valued.
    F(Act),
    /// Integer-valued.
    I(IntAct),
}

impl Value {
    /// The float activation, or an error naming what was expected.
    pub fn float(&self, what: &str) -> Result<&Act, ValueError> {
        match self {
            Value::F(a) => Ok(a),
            Value::I(_) => Err(ValueError(format!("{what} expects real values but got integer ids"))),
        }
    }

    /// The integer activation, or an error naming what was expected.
    pub fn int(&self, what: &str) -> Result<&IntAct, ValueError> {
        match self {
            Value::I(a) => Ok(a),
            Value::F(_) => Err(ValueError(format!("{what} expects integer ids but got real values"))),
        }
    }
}
