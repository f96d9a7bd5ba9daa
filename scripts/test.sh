#!/usr/bin/env bash
# Every test of weir: unit, integration, hostile plugins, CLI. The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh
cargo test --release --workspace "$@"
