#!/usr/bin/env bash
# The README's main job: the read-clicks example publisher, run on the bundled
# sample clicks through `weir run-plugin`, and the table it produced.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh
# Building weir builds the example plugins too (host/build.rs).
cargo build --release -p weir
weir="$CARGO_TARGET_DIR/release/weir"
plugins="$CARGO_TARGET_DIR/guests/wasm32-wasip2/release"
out="${WEIR_DEMO_OUT:-$CARGO_TARGET_DIR/demo}"

echo "== read-clicks: the sample clicks, as table clicks"
"$weir" run-plugin "$plugins/read_clicks.wasm" \
    --input guest-examples/data/clicks.jsonl --schema guest-examples/data/clicks.json \
    --output-dir "$out/read-clicks"
echo
echo "== clicks-enrich: bounces dropped, section derived, ts renamed"
"$weir" run-plugin "$plugins/clicks_enrich.wasm" \
    --input guest-examples/data/clicks.jsonl --schema guest-examples/data/clicks.json \
    --output-dir "$out/clicks-enrich"
echo
echo "== the first rows of $out/clicks-enrich/clicks.parquet, read by pyarrow"
python3 - "$out/clicks-enrich/clicks.parquet" <<'PY'
import sys, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
for row in t.slice(0, 5).select(["event_id", "url", "section", "clicked_at", "duration_ms"]).to_pylist():
    print(" ", row)
print(f"  ... {t.num_rows} rows, {t.num_columns} columns")
PY
