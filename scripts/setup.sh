#!/usr/bin/env bash
# Installs what weir's build and tests need. Idempotent, and quick when done.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
    echo "cargo is missing: install Rust (rustup) first" >&2
    exit 1
fi

# Plugins are built for WASI 0.2.
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi

# rdkafka vendors librdkafka and builds it with these.
missing=()
for tool in cc c++ make; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq build-essential
fi

# An independent reader of the parquet weir writes, for the tests.
if ! python3 -c 'import pyarrow' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
fi
