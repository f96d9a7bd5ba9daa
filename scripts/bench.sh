#!/usr/bin/env bash
# The whole benchmark in one run: weir end to end beside librdkafka's raw
# consume rate and the Python path, latency and peak memory, on the embedded
# broker and on Tansu. `scripts/bench.sh --quick` for a short run;
# `--output json` for the figures as JSON; `--broker embedded|tansu`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/setup.sh >&2
exec cargo bench -p weir --bench stream -- "$@"
