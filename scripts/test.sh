#!/usr/bin/env bash
# Every test of weir: unit, integration, hostile plugins, CLI. The README's test command.
#   scripts/test.sh              every test binary, a few at once (WEIR_TEST_JOBS, 3)
#   scripts/test.sh ARGS...      `cargo test --release --workspace ARGS...`, as cargo runs it
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh
if [ $# -gt 0 ]; then
    exec cargo test --release --workspace "$@"
fi
# Built once, then run side by side: most binaries wait on brokers and rollovers, not on the cores.
built="$(mktemp)"
trap 'rm -f "$built"' EXIT
cargo test --release --workspace --no-run --message-format=json-render-diagnostics > "$built"
python3 scripts/run_tests.py --jobs "${WEIR_TEST_JOBS:-3}" \
    --times "${CARGO_TARGET_DIR:-target}/weir-test-times.json" < "$built"
