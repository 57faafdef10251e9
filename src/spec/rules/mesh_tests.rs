//! Unit tests of the mesh rules, through the validator: each bad combination is refused at its field with the
//! numbers and a fix, and good meshes validate.
#![allow(clippy::unwrap_used)]

use crate::spec::diagnostics::Diagnostic;
use crate::spec::overrides::Overrides;
use crate::spec::validate::SpecValidator;

/// A small Llama-shaped decoder: 4 layers, 8 query heads over 2 key/value heads, FFN 96, vocabulary 64.
const MODEL: &str = "[model]\nfamily = \"gpt\"\nlayers = 4\nd_model = 32\nheads = 8\nkv_heads = 2\nffn = 96\n\
    activation = \"swiglu\"\nnorm = \"rmsnorm\"\npositions = \"rotary\"\nvocab = 64\nseq_len = 16\n";

fn check(model: &str, topology: &str, batches: &str) -> (bool, Vec<Diagnostic>) {
    let text = format!(
        "version = 1\nname = \"m\"\n{model}[sweep]\nbatch_sizes = {batches}\n[topology]\nbackend = \"mock\"\n{topology}"
    );
    let checked = SpecValidator::new().unwrap().check_bytes("m.toml", text.as_bytes(), None, &Overrides::none());
    let errors = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
    (checked.spec.is_some(), errors)
}

fn refused(model: &str, topology: &str, batches: &str) -> Vec<(String, String, String)> {
    let (ok, errors) = check(model, topology, batches);
    assert!(!ok, "{topology} validated");
    errors.into_iter().map(|d| (d.path, d.message, d.hint.unwrap_or_default())).collect()
}

#[test]
fn good_meshes_validate() {
    for topology in [
        "devices_per_node = 8\nstrategy = \"zero-3\"\ntensor_parallel = 2\n",
        "devices_per_node = 2\ntensor_parallel = 2\nsequence_parallel = true\n",
        "devices_per_node = 4\nstrategy = \"all-reduce\"\npipeline_parallel = 2\nmicrobatches = 4\n",
        "devices_per_node = 2\npipeline_parallel = 2\npipeline_schedule = \"interleaved-1f1b\"\nvirtual_stages = 2\n",
        "devices_per_node = 4\ntensor_parallel = 2\npipeline_parallel = 2\npipeline_schedule = \"gpipe\"\n",
    ] {
        let (ok, errors) = check(MODEL, topology, "[8]");
        assert!(ok, "{topology}: {errors:?}");
    }
}

#[test]
fn degrees_that_do_not_divide_the_model_are_refused_with_a_fix() {
    // 3 divides neither 8 heads, 2 kv heads, 64 vocabulary; it divides FFN 96.
    let found = refused(MODEL, "devices_per_node = 3\ntensor_parallel = 3\n", "[3]");
    let (path, message, hint) = &found[0];
    assert_eq!(path, "topology.tensor_parallel");
    assert!(message.contains("8 query heads, 2 key/value heads, 64 vocabulary"), "{message}");
    assert!(!message.contains("FFN"), "{message}");
    assert!(hint.contains("`tensor_parallel = 1`"), "{hint}");
    // 4 divides 8 heads but not 2 kv heads: the fix is 2.
    let found = refused(MODEL, "devices_per_node = 4\ntensor_parallel = 4\n", "[4]");
    assert!(found[0].1.contains("2 key/value heads") && found[0].2.contains("`tensor_parallel = 2`"), "{found:?}");
    // The world size.
    let found = refused(MODEL, "devices_per_node = 6\ntensor_parallel = 4\n", "[6]");
    assert!(found[0].1.contains("does not divide the world size 6"), "{found:?}");
    // A family tensor parallelism does not split.
    let found = refused("[model]\nfamily = \"mlp\"\n", "devices_per_node = 2\ntensor_parallel = 2\n", "[2]");
    assert!(found[0].1.contains("a `mlp` model has none"), "{found:?}");
}

#[test]
fn pipelines_need_blocks_dividing_their_stages_and_micro_batches_dividing_the_batch() {
    let found = refused(MODEL, "devices_per_node = 8\npipeline_parallel = 8\n", "[8]");
    assert!(found[0].1.contains("8 stages = 8 chunks do not divide the model's 4 layers"), "{found:?}");
    assert!(found[0].2.contains("`pipeline_parallel = 4`"), "{found:?}");
    let found = refused("[model]\nfamily = \"mlp\"\n", "devices_per_node = 2\npipeline_parallel = 2\n", "[2]");
    assert!(found[0].1.contains("between its blocks") && found[0].1.contains("has none"), "{found:?}");
    // DP 2 x PP 2 with 4 micro-batches: batch 12 leaves 6 per rank.
    let found = refused(
        MODEL,
        "devices_per_node = 4\nstrategy = \"all-reduce\"\npipeline_parallel = 2\nmicrobatches = 4\n",
        "[12]",
    );
    assert!(
        found[0].1.contains("4 micro-batches do not divide batch size 12 over 2 data-parallel rank(s)"),
        "{found:?}"
    );
    assert!(found[0].2.contains("`microbatches = 3`"), "{found:?}");
}

#[test]
fn a_given_cut_lets_blocks_that_do_not_divide_the_stages_be_pipelined_and_is_checked() {
    // 4 layers over 3 stages: refused balanced, with the cut to give in the hint; accepted given.
    let found = refused(MODEL, "devices_per_node = 3\npipeline_parallel = 3\n", "[6]");
    assert!(found[0].1.contains("3 stages = 3 chunks do not divide the model's 4 layers"), "{found:?}");
    assert!(found[0].2.contains("`pipeline_layers = [2, 1, 1]`"), "{found:?}");
    let (ok, errors) =
        check(MODEL, "devices_per_node = 3\npipeline_parallel = 3\npipeline_layers = [1, 2, 1]\n", "[6]");
    assert!(ok, "{errors:?}");
    // Interleaved: one count per chunk (2 stages x 2 virtual stages).
    let interleaved = "devices_per_node = 2\npipeline_parallel = 2\npipeline_schedule = \"interleaved-1f1b\"\n\
        virtual_stages = 2\n";
    let (ok, errors) = check(MODEL, &format!("{interleaved}pipeline_layers = [1, 1, 1, 1]\n"), "[8]");
    assert!(ok, "{errors:?}");
    for (given, says) in [
        ("[2, 2]", "gives 2 chunk(s), and 2 stages x 2 virtual stages make 4"),
        ("[1, 1, 2, 0]", "leaves a chunk without blocks"),
        ("[1, 1, 1, 2]", "holds 5 blocks, and the model has 4"),
    ] {
        let found = refused(MODEL, &format!("{interleaved}pipeline_layers = {given}\n"), "[8]");
        assert_eq!(found[0].0, "topology.pipeline_layers", "{found:?}");
        assert!(found[0].1.contains(says), "{given}: {found:?}");
        assert!(found[0].2.contains("`pipeline_layers = [1, 1, 1, 1]`"), "{found:?}");
    }
    // Nothing reads a cut without a pipeline.
    let found = refused(MODEL, "devices_per_node = 2\nstrategy = \"all-reduce\"\npipeline_layers = [2, 2]\n", "[8]");
    assert_eq!(found[0].0, "topology.pipeline_layers");
}

#[test]
fn pipeline_and_sequence_knobs_are_refused_where_nothing_reads_them() {
    let found = refused(MODEL, "devices_per_node = 2\nstrategy = \"all-reduce\"\nmicrobatches = 4\n", "[8]");
    assert_eq!(found[0].0, "topology.microbatches");
    let found = refused(MODEL, "sequence_parallel = true\n", "[8]");
    assert_eq!(found[0].0, "topology.sequence_parallel");
    let found = refused(MODEL, "devices_per_node = 2\npipeline_parallel = 2\nvirtual_stages = 2\n", "[8]");
    assert!(found[0].1.contains("only read by the `interleaved-1f1b` schedule"), "{found:?}");
    let found = refused(
        MODEL,
        "devices_per_node = 2\npipeline_parallel = 2\npipeline_schedule = \"interleaved-1f1b\"\n",
        "[8]",
    );
    assert!(found[0].1.contains("at least 2 virtual stages"), "{found:?}");
    // The strategy runs along the data dimension: 4 ranks as TP 2 leave 2 replicas for `single` to refuse.
    let found = refused(MODEL, "devices_per_node = 4\ntensor_parallel = 2\n", "[8]");
    assert!(found[0].1.contains("strategy `single`"), "{found:?}");
}

/// A tiny ViT: 16x16 images in 4x4 patches, 4 heads, MLP 64, 10 classes.
const VIT: &str = "[model]\nfamily = \"vit\"\nimage_size = 16\npatch_size = 4\nlayers = 2\nhidden = 32\nheads = 4\n\
    mlp_dim = 64\nclasses = 10\n";

#[test]
fn a_vit_needs_classes_and_with_sequence_parallelism_positions_the_tensor_group_divides() {
    let (ok, errors) = check(VIT, "devices_per_node = 2\ntensor_parallel = 2\n", "[4]");
    assert!(ok, "{errors:?}");
    let found = refused(VIT, "devices_per_node = 4\ntensor_parallel = 4\n", "[4]");
    let (path, message, hint) = &found[0];
    assert_eq!(path, "model.classes", "{found:?}");
    assert!(message.contains("`tensor_parallel = 4` splits the classifier's 10 classes"), "{message}");
    assert!(hint.contains("`classes = 12`") && hint.contains("`tensor_parallel = 2`"), "{hint}");
    let found = refused(VIT, "devices_per_node = 2\ntensor_parallel = 2\nsequence_parallel = true\n", "[4]");
    let (path, message, hint) = &found[0];
    assert_eq!(path, "topology.sequence_parallel", "{found:?}");
    assert!(message.contains("its 16 patches and the class token (17 positions)"), "{message}");
    assert!(hint.contains("remove `sequence_parallel`") && hint.contains("12 and 4"), "{hint}");
    let twelve = VIT.replace("image_size = 16", "image_size = 12");
    let (ok, errors) = check(&twelve, "devices_per_node = 2\ntensor_parallel = 2\nsequence_parallel = true\n", "[4]");
    assert!(ok, "9 patches + 1 split over 2: {errors:?}");
}
