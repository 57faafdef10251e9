#!/usr/bin/env bash
# False alarms and power of the history statistics (`src/stats/changepoint.rs`, `src/stats/gate.rs`) on seeded
# synthetic data, no hardware involved: `history detect`'s change points over TRIALS stationary series (30 and
# 100 points, 2% noise) and over a 3% step in 2% noise (detection rate, share within one point of the truth,
# mean index error), and the gate over TRIALS A/A pairs (10 baseline runs against 3 candidate runs at 1%, 3% and
# 10% run-to-run noise) and real slowdowns. The same seed prints the same figures on any machine.
#
# Usage: scripts/history_false_alarms.sh [TRIALS] [SEED]     (defaults 1000 and 1)
# PROFILE=dev runs the unoptimised build (slower to run, quicker to build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo run --quiet --profile "${PROFILE:-release}" --example history_false_alarms -- "${1:-1000}" "${2:-1}"
