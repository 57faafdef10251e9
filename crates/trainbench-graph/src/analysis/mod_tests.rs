//! Tests of the analysis: hand-computed layers, reference parameter counts of the zoo, memory arithmetic.

use super::*;
use crate::builder::{ConvCfg, GraphBuilder};
use crate::graph::{Activation, Graph, InputKind, LossKind};
use crate::model::*;
use crate::training::{OptimizerSpec, Precision};
use crate::zoo;

fn small_cnn() -> Graph {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", &[3, 32, 32], InputKind::Dense).unwrap();
    let y = b.input("y", &[], InputKind::Labels { classes: 10 }).unwrap();
    let c = b.conv("conv", x, ConvCfg::square(16, 3, 1, 1).with_bias(true)).unwrap();
    let r = b.act("relu", c, Activation::Relu).unwrap();
    let f = b.flatten("flatten", r).unwrap();
    let l = b.linear("fc", f, 10, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[l, y]).unwrap();
    b.finish(1, "samples").unwrap()
}

#[test]
fn hand_computed_conv_and_linear() {
    let a = analyze(&small_cnn());
    let conv = &a.layers[2];
    assert_eq!(conv.parameters, 16 * 3 * 9 + 16);
    // 2 x (16 x 32 x 32 outputs) x (3 x 3 x 3 MACs each); first layer: weight gradient only.
    assert_eq!(conv.forward_flops, 2 * 16 * 32 * 32 * 27);
    assert_eq!(conv.backward_flops, conv.forward_flops);
    assert!(!a.layers[0].requires_grad && conv.requires_grad);
    let fc = &a.layers[5];
    assert_eq!(fc.parameters, 16 * 32 * 32 * 10 + 10);
    assert_eq!(fc.forward_flops, 2 * 16384 * 10);
    assert_eq!(fc.backward_flops, 2 * fc.forward_flops);
    assert_eq!(a.parameters, 448 + 163_850);
    assert_eq!(a.flops.forward_per_sample, 884_736 + 327_680);
    assert_eq!(a.flops.train_per_sample, 2 * 884_736 + 3 * 327_680);
    // Kept: the image (conv input), the ReLU output (also the linear's input through the flatten view),
    // the log-softmax of the loss.
    assert_eq!(a.activations.saved_elements_per_sample, 3072 + 16384 + 10);
    assert_eq!(a.layers[3].saved_elements, 16384);
    assert_eq!(a.layers[4].saved_elements, 0);
    // Conv backward: output gradient + im2col (3 x 9 x 1024); its input needs no gradient.
    assert_eq!(a.activations.workspace_elements_per_sample, 16384 + 27 * 1024);
    assert_eq!(a.activations.workspace_layer, "conv");
}

#[test]
fn memory_estimate_arithmetic() {
    let a = analyze(&small_cnn());
    let sgd = OptimizerSpec::default();
    let m = memory_estimate(&a, 2, Precision::Fp32, &sgd);
    let p = 448 + 163_850;
    assert_eq!((m.weights, m.gradients, m.optimizer_state), (4 * p, 4 * p, 4 * p));
    assert_eq!(m.activations, 2 * 19_466 * 4);
    assert_eq!(m.workspace, 2 * 44_032 * 4);
    assert_eq!(m.total, 12 * p + 2 * 19_466 * 4 + 2 * 44_032 * 4);
    let adam = OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    let m16 = memory_estimate(&a, 2, Precision::Bf16, &adam);
    assert_eq!(m16.weights, 6 * p);
    assert_eq!(m16.optimizer_state, 8 * p);
    // In bf16 the log-softmax (10 per sample) stays fp32 (autocast runs the loss in fp32): 2 bytes more each.
    assert_eq!(a.activations.saved_wide_elements_per_sample, 10);
    assert_eq!(m16.activations, 2 * 19_466 * 2 + 2 * 10 * 2);
}

/// A pre-norm decoder block: embedding (fp32 table) + positions -> residual; LN -> linear -> GELU -> linear,
/// added back; LN -> logits -> cross-entropy. Under autocast the residual stream is fp32 and the norms save it
/// as such, while every linear saves a half copy of its input (the norms' outputs, the GELU's) and the loss
/// keeps its log-softmax in fp32.
fn tiny_decoder() -> Graph {
    let (t, h, vocab) = (8, 16, 50);
    let mut b = GraphBuilder::new("decoder");
    let ids = b.input("ids", &[t], InputKind::Tokens { vocab }).unwrap();
    let labels = b.input("labels", &[t], InputKind::Labels { classes: vocab }).unwrap();
    let e = b.embedding("embed", ids, vocab, h).unwrap();
    let e = b.learned_positions("positions", e, t).unwrap();
    let n = b.layer_norm("ln1", e, 1e-5).unwrap();
    let u = b.linear("up", n, 4 * h, true).unwrap();
    let g = b.act("gelu", u, Activation::Gelu).unwrap();
    let d = b.linear("down", g, h, true).unwrap();
    let r = b.add_nodes("residual", &[e, d]).unwrap();
    let n = b.layer_norm("ln2", r, 1e-5).unwrap();
    let logits = b.linear("head", n, vocab, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels]).unwrap();
    b.finish(t as u64, "tokens").unwrap()
}

#[test]
fn a_half_precision_run_keeps_the_residual_stream_the_norms_inputs_and_the_log_softmax_in_fp32() {
    let a = analyze(&tiny_decoder());
    let layer = |name: &str| a.layers.iter().find(|l| l.name == name).unwrap();
    let (t, h, vocab) = (8u64, 16u64, 50u64);
    // The positions' output (the residual stream, fp32) is saved by ln1 as it is: fp32.
    assert_eq!((layer("positions").saved_elements, layer("positions").saved_wide_elements), (t * h, t * h));
    // ln1's output is saved by `up` as a half copy; its own mean and rstd per row are fp32. GELU's input and
    // output are half.
    assert_eq!((layer("ln1").saved_elements, layer("ln1").saved_wide_elements), (t * h + 2 * t, 2 * t));
    assert_eq!((layer("up").saved_elements, layer("up").saved_wide_elements), (t * 4 * h, 0));
    assert_eq!(layer("gelu").saved_wide_elements, 0);
    // The residual sum promotes to fp32 and ln2 saves it so.
    assert_eq!(layer("residual").saved_wide_elements, t * h);
    // ln2's output reaches the head as a half copy; the loss keeps its log-softmax in fp32.
    assert_eq!(layer("loss").saved_wide_elements, layer("loss").saved_elements);
    assert!(layer("loss").saved_elements >= t * vocab);
    let wide: u64 = a.layers.iter().map(|l| l.saved_wide_elements).sum();
    assert_eq!(a.activations.saved_wide_elements_per_sample, wide);
    // fp32 prices every kept element at 4 bytes, as before; bf16 at 2, and 4 for the fp32 ones.
    let sgd = OptimizerSpec::default();
    let saved = a.activations.saved_elements_per_sample;
    let other = a.activations.saved_other_bytes_per_sample;
    assert_eq!(memory_estimate(&a, 3, Precision::Fp32, &sgd).activations, 3 * (4 * saved + other));
    assert_eq!(memory_estimate(&a, 3, Precision::Bf16, &sgd).activations, 3 * (2 * saved + 2 * wide + other));
    assert_eq!(memory_estimate(&a, 3, Precision::Fp16, &sgd).activations, 3 * (2 * saved + 2 * wide + other));
}

/// A convolutional network runs in half precision from its first convolution on: only the loss's log-softmax
/// stays fp32 (the image is saved by the first convolution as a half copy).
#[test]
fn a_convolutional_network_keeps_only_its_loss_in_fp32() {
    let a = analyze(&zoo::build(&resnet(18)).unwrap());
    let loss: u64 = a.layers.iter().filter(|l| l.op == "loss").map(|l| l.saved_elements).sum();
    assert_eq!(a.activations.saved_wide_elements_per_sample, loss);
}

fn params(m: ModelSpec) -> u64 {
    analyze(&zoo::build(&m).unwrap()).parameters
}

fn resnet(depth: u32) -> ModelSpec {
    ModelSpec::Resnet(ResnetSpec { depth, width: 64, classes: 1000, image_size: 224, stem: ResnetStem::Imagenet })
}

#[test]
fn resnet_parameters_match_torchvision() {
    assert_eq!(params(resnet(18)), 11_689_512);
    assert_eq!(params(resnet(34)), 21_797_672);
    assert_eq!(params(resnet(50)), 25_557_032);
    assert_eq!(params(resnet(101)), 44_549_160);
    assert_eq!(params(resnet(152)), 60_192_808);
}

#[test]
fn resnet50_flops_match_flop_counter() {
    // torch.utils.flop_counter on torchvision's resnet50, batch 1, 224x224 (scripts/check_zoo.py).
    let a = analyze(&zoo::build(&resnet(50)).unwrap());
    assert_eq!(a.flops.forward_per_sample, 8_178_368_512);
    // Forward + `loss.backward()`: the stem convolution computes no input gradient.
    assert_eq!(a.flops.train_per_sample, 24_299_077_632);
    assert_eq!(a.by_kind["conv2d"].layers, 53);
}

#[test]
fn inception_parameters_match_torchvision() {
    let s = InceptionSpec { classes: 1000, aux_logits: true, image_size: 299 };
    assert_eq!(params(ModelSpec::InceptionV3(s.clone())), 27_161_264);
    assert_eq!(params(ModelSpec::InceptionV3(InceptionSpec { aux_logits: false, ..s })), 23_834_568);
}

#[test]
fn bert_base_matches_bert_for_pretraining() {
    let s = BertSpec { vocab: 30_522, layers: 12, hidden: 768, heads: 12, ffn: 3072, seq_len: 128, max_positions: 512 };
    assert_eq!(params(ModelSpec::Bert(s)), 110_106_428);
}

#[test]
fn shared_embeddings_count_once() {
    let s = TransformerSpec {
        vocab: 37_000,
        encoder_layers: 6,
        decoder_layers: 6,
        d_model: 512,
        heads: 8,
        ffn: 2048,
        seq_len: 64,
        dropout: 0.1,
        shared_embeddings: true,
    };
    let shared = params(ModelSpec::Transformer(s.clone()));
    let separate = params(ModelSpec::Transformer(TransformerSpec { shared_embeddings: false, ..s }));
    assert_eq!(separate - shared, 2 * 37_000 * 512);
    assert_eq!(shared, 63_084_544);
}

#[test]
fn backward_of_data_fed_rnn_skips_the_input_gradient() {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", &[10, 8], InputKind::Dense).unwrap();
    let r = b.rnn("gru", x, crate::graph::RnnCell::Gru, 16, 2, true).unwrap();
    let t = b.input("t", &[10, 32], InputKind::Dense).unwrap();
    b.loss("loss", LossKind::Mse, &[r, t]).unwrap();
    let a = analyze(&b.finish(1, "samples").unwrap());
    let l = &a.layers[1];
    // Layer 0: 2 directions x 10 steps x 2 x 48 x (8 + 16); layer 1 reads 32 wide.
    let (l0, l1) = (2 * 10 * 2 * 48 * (8 + 16), 2 * 10 * 2 * 48 * (32 + 16));
    assert_eq!(l.forward_flops, l0 + l1);
    // No gradient for the data input of layer 0, nor for the zero initial state of each layer and direction;
    // torch.utils.flop_counter records 393,216 for forward + backward of this nn.GRU.
    assert_eq!(l.backward_flops, 2 * (l0 + l1) - 2 * 10 * 2 * 48 * 8 - 2 * 2 * 2 * 48 * 16);
    assert_eq!(l.forward_flops + l.backward_flops, 393_216);
    assert_eq!(l.parameters, 2 * (3 * 16 * (8 + 16) + 6 * 16) + 2 * (3 * 16 * (32 + 16) + 6 * 16));
}

#[test]
fn analysis_is_deterministic() {
    let g = zoo::build(&resnet(18)).unwrap();
    assert_eq!(analyze(&g), analyze(&g));
}
