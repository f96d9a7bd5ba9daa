#!/usr/bin/env bash
# The README's main job: `weir demo` on the embedded broker. A `clicks` topic,
# sample click events with a few malformed ones, the read-clicks publisher with
# a short rollover, and the table versions and dead letters it committed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh
# Building weir builds the example plugins too (host/build.rs) and embeds read-clicks.
cargo build --release -p weir
exec "$CARGO_TARGET_DIR/release/weir" demo "$@"
