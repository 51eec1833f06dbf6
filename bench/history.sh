#!/usr/bin/env bash
# The change-point detector of `perflab history` on synthetic series, at
# its default penalty: how often 10 to 100 runs of pure noise (2% between
# runs) raise a change point, and how many runs after a 5% step (at 2%
# noise, after 20 steady runs) it takes to find it. Drives the ignored
# unit test that measures both (src/analyze/history/tests.rs), 1,000
# seeds each.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --lib analyze::history::tests::bench_false_alarms_and_delay -- --ignored --nocapture 2>/dev/null \
  | grep -E '^(false alarms|5% step|not found)'
