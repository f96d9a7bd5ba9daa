#!/usr/bin/env bash
# The whole benchmark in one run: weir end to end beside librdkafka's raw
# consume rate, the Python path and the frameworks users would pick instead
# (pathway, quixstreams), latency and peak memory, on the embedded
# broker and on Tansu. `scripts/bench.sh --quick` for a short run;
# `--output json` for the figures as JSON; `--broker embedded|tansu`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh >&2
# The peers the benchmark races, in a virtualenv of their own (their pins are not the tests').
peers="$HOME/.cache/weir/bench-peers"
if ! "$peers/bin/python" -c 'import pathway, quixstreams' 2>/dev/null; then
    python3 -m venv "$peers"
    "$peers/bin/pip" install --quiet --disable-pip-version-check -r scripts/bench-peers.txt >&2
fi
export WEIR_BENCH_PEERS_PYTHON="$peers/bin/python"
exec cargo bench -p weir --bench stream -- "$@"
