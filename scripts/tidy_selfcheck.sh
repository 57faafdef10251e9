#!/usr/bin/env bash
# Shows that the tidy test (tests/it/tidy/) passes on this checkout, then breaks each of its rules once, in place,
# and shows that the rule's test fails; every break is undone with git before the next (the tree must be clean). Needs a built `it` test binary (any features):
#   scripts/tidy_selfcheck.sh [PATH/TO/it-BINARY]     (default: the newest target/debug/deps/it-* or the CI one's)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export TIDY_ROOT="$ROOT"
bin="${1:-$(ls -t "${CARGO_TARGET_DIR:-target}"/debug/deps/it-* "$HOME"/.cache/trainbench-ci/target/debug/deps/it-* 2>/dev/null | grep -v '\.d$' | head -n 1)}"
[ -x "$bin" ] || { echo "no it test binary found (cargo test --test it --no-run first)" >&2; exit 2; }
if ! git diff --quiet; then echo "the tree has uncommitted changes; commit or stash them first" >&2; exit 2; fi
restore() { git checkout -q -- . && git clean -qfd -- src/tidy_probe.rs 2>/dev/null; }
trap restore EXIT

run_rule() { "$bin" --quiet "$1" >/tmp/tidy_selfcheck.out 2>&1; }
check() {
    local name=$1 filter=$2
    if run_rule "$filter"; then
        echo "NOT CAUGHT  $name"
        failures=$((failures + 1))
    else
        echo "caught      $name: $(grep -m1 -E 'panicked|^  [a-z]' /tmp/tidy_selfcheck.out | cut -c1-110)"
    fi
    restore
}
failures=0
probe=src/stats/rank.rs

run_rule tidy:: && echo "untouched tree: every tidy rule passes" || { echo "the untouched tree fails the tidy test:"; cat /tmp/tidy_selfcheck.out; exit 1; }

for _ in $(seq 600); do echo "// padding" >>"$probe"; done
check "a file of 600 lines or more" tidy::file_shape::every_rust_file_is_under_600_lines

sed -i '1i\\' "$probe"
check "a file without a //! first line" tidy::file_shape::every_rust_file_opens_with_a_module_doc_line

echo 'pub use super::describe::mean as _circle_probe;' >>"$probe"
echo 'pub use super::rank::mann_whitney as _circle_probe;' >>src/stats/describe.rs
check "an import circle (stats/rank.rs <-> stats/describe.rs)" tidy::import_circles

echo 'use trainbench_backend_tch as _;' >>"$probe"
check "the library naming a backend crate" tidy::linking::only_the_engine_binary_names_a_training_crate

echo 'const _FEATURE_PROBE: bool = cfg!(feature = "tch");' >>"$probe"
check "a cargo feature asked outside the registry" tidy::linking::only_the_registry_asks_a_cargo_feature

sed -i 's/^\[dependencies\]$/[dependencies]\ntrainbench-contract.workspace = true/' crates/trainbench-graph/Cargo.toml
check "the graph crate depending on the contract" tidy::linking::crates_depend_only_downwards

cat >>"$probe" <<'RS'
fn _op_probe(op: &trainbench_graph::graph::Op) -> u8 {
    match op {
        trainbench_graph::graph::Op::Input { .. } => 0,
        _ => 1,
    }
}
RS
check "a catch-all arm in a match on Op" tidy::op_matches

echo 'pub fn _string_error_probe() -> Result<(), String> { Ok(()) }' >>"$probe"
check "a public function returning Result<_, String>" tidy::signatures::no_public_function_returns_a_string_error

[ "$failures" -eq 0 ] && echo "every rule caught its break" || { echo "$failures rule(s) did not catch their break"; exit 1; }
