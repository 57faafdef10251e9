//! DLRM-DCNv2 (Wang et al. 2021) as MLPerf Training's reference runs it: the dense features through the
//! bottom MLP (Linear + ReLU), each categorical feature's multi-hot ids through a sum-pooled embedding bag,
//! the bottom output and the 26 pooled embeddings concatenated into `x_0`, a low-rank cross network
//! (`x_{l+1} = x_0 * up_l(down_l(x_l)) + x_l`, `down` without bias, `up` with), then the top MLP (ReLU
//! between layers) to one click logit, trained with binary cross-entropy.

use crate::builder::GraphBuilder;
use crate::graph::{Activation, BagMode, Graph, InputKind, LossKind};
use crate::model::DlrmSpec;

use super::common::{ZooError, at_least};

fn widths(field: &str, v: &[usize]) -> Result<(), ZooError> {
    if v.is_empty() {
        return Err(ZooError::field(field, format!("`{field}` needs at least one width"), None));
    }
    if let Some(i) = v.iter().position(|&w| w == 0) {
        return Err(ZooError { path: vec![field.into(), i.to_string()], message: "a width is 0".into(), hint: None });
    }
    Ok(())
}

/// Build DLRM-DCNv2 with its binary cross-entropy loss.
pub(crate) fn build(s: &DlrmSpec) -> Result<Graph, ZooError> {
    let (rows, bags) = (s.rows(), s.bags());
    if rows.len() != bags.len() {
        let field = if s.table_rows.is_some() { "table_rows" } else { "bag_sizes" };
        return Err(ZooError::field(
            field,
            format!("{} tables but {} bag sizes", rows.len(), bags.len()),
            Some("give table_rows and bag_sizes one entry per categorical feature"),
        ));
    }
    for (field, v) in [("table_rows", &rows), ("bag_sizes", &bags)] {
        widths(field, v)?;
    }
    if let (Some(_), Some(cap)) = (&s.table_rows, s.max_table_rows) {
        return Err(ZooError::field(
            "max_table_rows",
            format!("max_table_rows = {cap} caps MLPerf's row counts, but table_rows gives every table's rows"),
            Some("remove one of the two"),
        ));
    }
    if let Some(cap) = s.max_table_rows {
        at_least("max_table_rows", cap, 1)?;
    }
    at_least("embedding_dim", s.embedding_dim, 1)?;
    at_least("dense_features", s.dense_features, 1)?;
    at_least("cross_rank", s.cross_rank, 1)?;
    widths("bottom_mlp", &s.bottom_mlp)?;
    widths("top_mlp", &s.top_mlp)?;
    if s.bottom_mlp.last() != Some(&s.embedding_dim) {
        return Err(ZooError::field(
            "bottom_mlp",
            format!("the bottom MLP ends at {:?} but embedding_dim = {}", s.bottom_mlp.last(), s.embedding_dim),
            Some("make the bottom MLP's last width equal embedding_dim"),
        ));
    }
    if s.top_mlp.last() != Some(&1) {
        return Err(ZooError::field("top_mlp", "the top MLP must end at width 1 (the click logit)", None));
    }
    let mut b = GraphBuilder::new("dlrm");
    let dense = b.input("dense_features", &[s.dense_features], InputKind::Dense)?;
    let mut sparse = Vec::with_capacity(rows.len());
    for (i, (&r, &bag)) in rows.iter().zip(&bags).enumerate() {
        sparse.push(b.input(&format!("sparse_{i}"), &[bag], InputKind::Tokens { vocab: r })?);
    }
    let target = b.input("target", &[1], InputKind::Dense)?;
    let mut x = dense;
    for (i, &w) in s.bottom_mlp.iter().enumerate() {
        x = b.linear(&format!("bottom_mlp.{i}"), x, w, true)?;
        x = b.act(&format!("bottom_mlp.{i}.relu"), x, Activation::Relu)?;
    }
    let mut features = vec![x];
    for (i, (&ids, &r)) in sparse.iter().zip(&rows).enumerate() {
        features.push(b.embedding_bag(&format!("embedding_bags.t{i}"), ids, r, s.embedding_dim, BagMode::Sum)?);
    }
    let x0 = b.concat("interaction", &features, 0)?;
    let width = b.shape(x0).0[0];
    let mut x = x0;
    for l in 0..s.cross_layers {
        b.push(format!("crossnet.{l}"));
        let down = b.linear("down", x, s.cross_rank, false)?;
        let up = b.linear("up", down, width, true)?;
        let cross = b.mul("cross", &[x0, up])?;
        x = b.add_nodes("residual", &[cross, x])?;
        b.pop();
    }
    for (i, &w) in s.top_mlp.iter().enumerate() {
        x = b.linear(&format!("top_mlp.{i}"), x, w, true)?;
        if i + 1 < s.top_mlp.len() {
            x = b.act(&format!("top_mlp.{i}.relu"), x, Activation::Relu)?;
        }
    }
    b.loss("loss", LossKind::BceWithLogits, &[x, target])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::model::MLPERF_TABLE_ROWS;

    #[test]
    fn the_default_caps_mlperfs_tables() {
        let s: DlrmSpec = serde_json::from_str("{}").unwrap();
        let g = build(&s).unwrap();
        let rows: usize = MLPERF_TABLE_ROWS.iter().map(|&r| r.min(100_000)).sum();
        // Tables, bottom MLP 13-512-256-128, cross 3 x (3456 x 512 + 512 x 3456 + 3456), top MLP to 1.
        let bottom = 13 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128;
        let cross = 3 * (3456 * 512 + 512 * 3456 + 3456);
        let top = 3456 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 256 + 256 + 256 + 1;
        assert_eq!(analyze(&g).parameters, (rows * 128 + bottom + cross + top) as u64);
        let e = build(&DlrmSpec { bottom_mlp: vec![512, 64], ..s.clone() }).unwrap_err();
        assert_eq!(e.path, ["bottom_mlp"]);
        // A cap beside explicit rows would be ignored: refused, even at the default value.
        let rows = Some(vec![10; 26]);
        let e = build(&DlrmSpec { table_rows: rows, max_table_rows: Some(100_000), ..s }).unwrap_err();
        assert_eq!(e.path, ["max_table_rows"]);
    }
}
