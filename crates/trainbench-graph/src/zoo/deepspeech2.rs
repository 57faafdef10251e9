//! Deep Speech 2 (Amodei et al.) as deepspeech.pytorch lays it out: two 2-D convolutions over the
//! spectrogram (41x11/2x2 and 21x11/2x1, 32 channels, batch norm, clipped ReLU 0..20), a stack of
//! bidirectional GRUs (PyTorch `nn.GRU` semantics: directions concatenated, so layers after the first read
//! 2 x hidden), a linear layer to characters and CTC. Sequence-wise batch norm between GRU layers is left
//! out. The input is `[1, freq_bins, frames]`; the convolutions' output `[32, F', T']` is flattened and
//! transposed to `[T', 32 F']` for the GRUs.

use crate::builder::{ConvCfg, GraphBuilder};
use crate::graph::{Activation, Graph, InputKind, LossKind, RnnCell};
use crate::model::DeepSpeech2Spec;

use super::common::{ZooError, at_least};

/// Build Deep Speech 2 with its CTC loss.
pub(crate) fn build(s: &DeepSpeech2Spec) -> Result<Graph, ZooError> {
    at_least("frames", s.frames, 11)?;
    at_least("freq_bins", s.freq_bins, 21)?;
    at_least("rnn_layers", s.rnn_layers, 1)?;
    at_least("rnn_hidden", s.rnn_hidden, 1)?;
    at_least("characters", s.characters, 2)?;
    at_least("label_len", s.label_len, 1)?;
    let mut b = GraphBuilder::new("deepspeech2");
    let x = b.input("spectrogram", &[1, s.freq_bins, s.frames], InputKind::Dense)?;
    let labels = b.input("transcript", &[s.label_len], InputKind::Labels { classes: s.characters })?;
    b.push("conv");
    let mut y = b.conv("0", x, ConvCfg::rect(32, [41, 11], [2, 2], [20, 5]).with_bias(true))?;
    y = b.batch_norm("1", y)?;
    y = b.act("2", y, Activation::HardTanh20)?;
    y = b.conv("3", y, ConvCfg::rect(32, [21, 11], [2, 1], [10, 5]).with_bias(true))?;
    y = b.batch_norm("4", y)?;
    y = b.act("5", y, Activation::HardTanh20)?;
    b.pop();
    let sh = b.shape(y).0.clone();
    let (c, f, t) = (sh[0], sh[1], sh[2]);
    if s.label_len > t {
        return Err(ZooError::field(
            "label_len",
            format!("label_len = {} is longer than the {t} output frames the convolutions leave", s.label_len),
            Some("CTC needs at least one output frame per label: shorten label_len or add frames"),
        ));
    }
    y = b.reshape("flatten", y, &[c * f, t])?;
    y = b.transpose("transpose", y, 0, 1)?;
    y = b.rnn("rnns", y, RnnCell::Gru, s.rnn_hidden, s.rnn_layers, true)?;
    let logits = b.linear("fc", y, s.characters, true)?;
    b.loss("loss", LossKind::Ctc, &[logits, labels])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes() {
        let s = DeepSpeech2Spec {
            frames: 200,
            freq_bins: 161,
            rnn_layers: 7,
            rnn_hidden: 1760,
            characters: 29,
            label_len: 40,
        };
        let g = build(&s).unwrap();
        assert_eq!(shape(&g, "conv.5"), [32, 41, 100]);
        assert_eq!(shape(&g, "transpose"), [100, 1312]);
        assert_eq!(shape(&g, "rnns"), [100, 3520]);
        let e = build(&DeepSpeech2Spec { label_len: 101, ..s }).unwrap_err();
        assert_eq!(e.path, ["label_len"]);
    }
}
