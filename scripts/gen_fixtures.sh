#!/usr/bin/env bash
# Regenerates the result fixtures (tests/fixtures/results/, from the specs in tests/fixtures/specs/ on the mock
# backend, collectors off: a simulated run is too short for the CPU sampler, whose figures would come and go) and
# their golden shapes (golden/shapes/). Run it after a change of the result format, then review
# `git diff golden/shapes` and rerun the tests (the Markdown report snapshot may need INSTA_UPDATE=always).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --quiet
TB=target/debug/trainbench
rm -rf tests/fixtures/results golden/shapes
"$TB" run tests/fixtures/specs/*.toml --backend mock --no-collectors --quiet --out tests/fixtures/results > /dev/null
"$TB" check --update --golden golden/shapes tests/fixtures/results
