"""What Polars makes of fixtures/frame-expressions/expressions.py (or, given
`group-by` after the paths, of fixtures/frame-group-by/aggregations.py) over
the Arrow IPC stream in argv[1], written as an Arrow IPC stream to argv[2]:
the answers weir.frame's are held to (tests/kernels.rs)."""
import sys
from pathlib import Path

import polars as pl

fixtures = Path(__file__).parent / "fixtures"
sys.path[:0] = [str(fixtures / "frame-expressions"), str(fixtures / "frame-group-by")]
from aggregations import KEYS, aggregations  # noqa: E402
from expressions import expressions  # noqa: E402

frame = pl.read_ipc_stream(sys.argv[1])
if sys.argv[3:] == ["group-by"]:
    answer = frame.group_by(KEYS, maintain_order=True).agg(aggregations(pl)).sort(KEYS)
else:
    answer = frame.select(**expressions(pl))
answer.write_ipc_stream(sys.argv[2], compat_level=pl.CompatLevel.oldest())
