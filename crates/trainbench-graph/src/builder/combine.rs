//! Builder methods that combine or reshape tensors without weights: element-wise sums and products of equal
//! shapes, concatenation, reshape, flatten, transpose, slice and mean.

use super::{GraphBuilder, ShapeError};
use crate::graph::{NodeId, Op, Shape};

impl GraphBuilder {
    pub(super) fn same_shapes(&self, name: &str, op: &'static str, xs: &[NodeId]) -> Result<Vec<usize>, ShapeError> {
        let first = self.shape(xs[0]).clone();
        for &x in &xs[1..] {
            if *self.shape(x) != first {
                return Err(self.err(
                    name,
                    op,
                    format!(
                        "inputs `{}` {} and `{}` {} have different shapes",
                        self.nodes[xs[0]].name,
                        first,
                        self.nodes[x].name,
                        self.shape(x)
                    ),
                ));
            }
        }
        Ok(first.0)
    }

    /// Element-wise sum (residual connection).
    pub fn add_nodes(&mut self, name: &str, xs: &[NodeId]) -> Result<NodeId, ShapeError> {
        if xs.len() < 2 {
            return Err(self.err(name, "add", "needs at least two inputs"));
        }
        let s = self.same_shapes(name, "add", xs)?;
        self.add(name, Op::Add, xs.to_vec(), s)
    }

    /// Element-wise product.
    pub fn mul(&mut self, name: &str, xs: &[NodeId]) -> Result<NodeId, ShapeError> {
        if xs.len() < 2 {
            return Err(self.err(name, "mul", "needs at least two inputs"));
        }
        let s = self.same_shapes(name, "mul", xs)?;
        self.add(name, Op::Mul, xs.to_vec(), s)
    }

    /// Concatenate along a per-sample axis; all other dimensions must agree.
    pub fn concat(&mut self, name: &str, xs: &[NodeId], axis: usize) -> Result<NodeId, ShapeError> {
        let Some(&first) = xs.first() else { return Err(self.err(name, "concat", "needs at least one input")) };
        let mut out = self.shape(first).0.clone();
        if axis >= out.len() {
            return Err(self.err(
                name,
                "concat",
                format!("axis {axis} is out of range for shape {}", self.shape(first)),
            ));
        }
        for &x in &xs[1..] {
            let s = &self.shape(x).0;
            let ok = s.len() == out.len() && s.iter().zip(&out).enumerate().all(|(i, (a, b))| i == axis || a == b);
            if !ok {
                return Err(self.err(
                    name,
                    "concat",
                    format!(
                        "input `{}` {} does not match `{}` {} outside axis {axis}",
                        self.nodes[x].name,
                        self.shape(x),
                        self.nodes[first].name,
                        self.shape(first)
                    ),
                ));
            }
            out[axis] += s[axis];
        }
        self.add(name, Op::Concat { axis }, xs.to_vec(), out)
    }

    /// Reshape to a per-sample shape with the same number of elements.
    pub fn reshape(&mut self, name: &str, x: NodeId, shape: &[usize]) -> Result<NodeId, ShapeError> {
        let from = self.shape(x).clone();
        let to = Shape(shape.to_vec());
        if from.numel() != to.numel() {
            return Err(self.err(
                name,
                "reshape",
                format!("cannot reshape {from} ({} elements) to {to} ({} elements)", from.numel(), to.numel()),
            ));
        }
        self.add(name, Op::Reshape { shape: shape.to_vec() }, vec![x], shape.to_vec())
    }

    /// Flatten the whole per-sample shape into one dimension.
    pub fn flatten(&mut self, name: &str, x: NodeId) -> Result<NodeId, ShapeError> {
        let n = self.shape(x).numel() as usize;
        self.reshape(name, x, &[n])
    }

    /// Swap two per-sample axes.
    pub fn transpose(&mut self, name: &str, x: NodeId, a: usize, b: usize) -> Result<NodeId, ShapeError> {
        let mut s = self.shape(x).0.clone();
        if a >= s.len() || b >= s.len() {
            return Err(self.err(name, "transpose", format!("axes {a} and {b} are out of range for {}", Shape(s))));
        }
        s.swap(a, b);
        self.add(name, Op::Transpose { a, b }, vec![x], s)
    }

    /// Keep `len` indices from `start` along `axis`.
    pub fn slice(
        &mut self,
        name: &str,
        x: NodeId,
        axis: usize,
        start: usize,
        len: usize,
    ) -> Result<NodeId, ShapeError> {
        let mut s = self.shape(x).0.clone();
        if axis >= s.len() || start + len > s[axis] || len == 0 {
            return Err(self.err(
                name,
                "slice",
                format!("range {start}..{} on axis {axis} is outside {}", start + len, Shape(s)),
            ));
        }
        s[axis] = len;
        self.add(name, Op::Slice { axis, start, len }, vec![x], s)
    }

    /// Mean over a per-sample axis (removed).
    pub fn mean(&mut self, name: &str, x: NodeId, axis: usize) -> Result<NodeId, ShapeError> {
        let mut s = self.shape(x).0.clone();
        if axis >= s.len() {
            return Err(self.err(name, "mean", format!("axis {axis} is out of range for {}", Shape(s))));
        }
        s.remove(axis);
        self.add(name, Op::Mean { axis }, vec![x], s)
    }
}
