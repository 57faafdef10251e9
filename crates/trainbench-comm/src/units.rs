//! The flat buffers the exchanges move: a [`Unit`] of whole trained tensors, padded to a multiple of the
//! workers; cut by size (all-reduce buckets, ZeRO-1/2, [`units_by_size`]) or by block (ZeRO-3, [`units_by_block`]).

use trainbench_graph::graph::Graph;
use trainbench_graph::params::is_tied;

use crate::layout::Layout;

/// One flat buffer of whole trained tensors, sharded over the workers: worker `r` owns elements
/// `r * block .. (r + 1) * block` of the buffer padded (with zeros) to `block * workers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// `root` (the tensors outside every block), a block's name scope (`layers.3`), or `bucket<i>`.
    pub name: String,
    /// The tensors of the unit ([`Layout`] indices), in order.
    pub tensors: Vec<usize>,
    /// Elements of those tensors.
    pub len: usize,
    /// Elements each worker owns.
    pub block: usize,
    /// For a block's unit: its index in [`Graph::blocks`].
    pub graph_block: Option<usize>,
}

impl Unit {
    fn new(name: String, tensors: Vec<usize>, layout: &Layout, workers: usize, graph_block: Option<usize>) -> Self {
        let len: usize = tensors.iter().map(|&i| layout.len_of(i)).sum();
        Unit { name, tensors, len, block: len.div_ceil(workers.max(1)), graph_block }
    }

    /// Elements of the padded buffer (`block` x workers).
    pub fn padded(&self, workers: usize) -> usize {
        self.block * workers
    }

    /// This unit's elements of a flat buffer in [`Layout`] order, packed into `out` (`len` long).
    pub fn pack(&self, layout: &Layout, flat: &[f32], out: &mut [f32]) {
        let mut at = 0;
        for &i in &self.tensors {
            let (o, n) = (layout.offsets[i], layout.len_of(i));
            out[at..at + n].copy_from_slice(&flat[o..o + n]);
            at += n;
        }
    }

    /// The inverse of [`Unit::pack`]: `packed` (`len` long) into this unit's places of `flat`.
    pub fn unpack(&self, layout: &Layout, packed: &[f32], flat: &mut [f32]) {
        let mut at = 0;
        for &i in &self.tensors {
            let (o, n) = (layout.offsets[i], layout.len_of(i));
            flat[o..o + n].copy_from_slice(&packed[at..at + n]);
            at += n;
        }
    }
}

/// ZeRO-1/2's units: consecutive tensors in layout order, each unit at most `bucket_bytes` of `f32` (a larger
/// tensor is a unit of its own).
pub fn units_by_size(layout: &Layout, bucket_bytes: u64, workers: usize) -> Vec<Unit> {
    let cap = (bucket_bytes / 4).max(1) as usize;
    let mut units = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut size = 0usize;
    for i in 0..layout.decls.len() {
        let n = layout.len_of(i);
        if !current.is_empty() && size + n > cap {
            let name = format!("bucket{}", units.len());
            units.push(Unit::new(name, std::mem::take(&mut current), layout, workers, None));
            size = 0;
        }
        current.push(i);
        size += n;
    }
    if !current.is_empty() {
        units.push(Unit::new(format!("bucket{}", units.len()), current, layout, workers, None));
    }
    units
}

/// A tied weight whose two nodes sit in different blocks, which ZeRO-3 cannot shard block by block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{node}` is tied to `{tied_to}` across a block boundary; ZeRO-3 shards each block's weights on its own")]
pub struct TiedAcrossBlocks {
    /// The node holding the tie.
    pub node: String,
    /// The node whose weight it shares.
    pub tied_to: String,
}

/// ZeRO-3's units, as FSDP wraps a model: one per recomputable block ([`Graph::blocks`]) with the tensors of
/// its nodes, then `root` with every other tensor (first in the list). A model without blocks is one unit.
/// Refused: a tied weight that would join two units (its tensor would be freed while the other one reads it).
pub fn units_by_block(graph: &Graph, layout: &Layout, workers: usize) -> Result<Vec<Unit>, TiedAcrossBlocks> {
    let mut owner: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for (b, block) in graph.blocks.iter().enumerate() {
        for slot in &mut owner[block.first..=block.last] {
            *slot = Some(b);
        }
    }
    for (id, node) in graph.nodes.iter().enumerate() {
        if let Some(to) = node.tied_to {
            let tied = trainbench_graph::params::tensors(node).iter().any(|d| is_tied(node, d));
            if tied && owner[id] != owner[to] {
                return Err(TiedAcrossBlocks { node: node.name.clone(), tied_to: graph.nodes[to].name.clone() });
            }
        }
    }
    let mut root = Vec::new();
    let mut blocks: Vec<Vec<usize>> = vec![Vec::new(); graph.blocks.len()];
    for (i, &node) in layout.nodes.iter().enumerate() {
        match owner[node] {
            Some(b) => blocks[b].push(i),
            None => root.push(i),
        }
    }
    let mut units = vec![Unit::new("root".into(), root, layout, workers, None)];
    for (b, tensors) in blocks.into_iter().enumerate() {
        if !tensors.is_empty() {
            units.push(Unit::new(graph.blocks[b].name.clone(), tensors, layout, workers, Some(b)));
        }
    }
    Ok(units)
}
