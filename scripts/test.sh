#!/usr/bin/env bash
# Every test of weir: unit, integration, hostile plugins, CLI. The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --release --workspace "$@" 2>&1 | tee "$log"
# One closing line over every test binary.
awk '/^test result:/ { p += $4; f += $6; s += $8 } END { printf "\nall tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
