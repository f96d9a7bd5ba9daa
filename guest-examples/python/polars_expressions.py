"""What Polars makes of fixtures/frame-expressions/expressions.py (or, given
`group-by` after the paths, of fixtures/frame-group-by/aggregations.py; given
`shape`, of fixtures/frame-shape/shape.py) over
the Arrow IPC stream in argv[1], written as an Arrow IPC stream to argv[2]:
the answers weir.frame's are held to (tests/kernels.rs)."""
import sys
from pathlib import Path

import polars as pl

fixtures = Path(__file__).parent / "fixtures"
sys.path[:0] = [str(fixtures / d) for d in ("frame-expressions", "frame-group-by", "frame-shape")]
from aggregations import KEYS, aggregations  # noqa: E402
from expressions import expressions  # noqa: E402
from shape import shape  # noqa: E402

frame = pl.read_ipc_stream(sys.argv[1])
if sys.argv[3:] == ["group-by"]:
    answer = frame.group_by(KEYS, maintain_order=True).agg(aggregations(pl)).sort(KEYS)
elif sys.argv[3:] == ["shape"]:
    answer = shape(pl, frame, lambda f, subset: f.unique(subset, keep="first", maintain_order=True))
else:
    answer = frame.select(**expressions(pl))
answer.write_ipc_stream(sys.argv[2], compat_level=pl.CompatLevel.oldest())
