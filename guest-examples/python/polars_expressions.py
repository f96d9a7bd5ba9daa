"""What Polars makes of fixtures/frame-expressions/expressions.py over the
Arrow IPC stream in argv[1], written as an Arrow IPC stream to argv[2]: the
answers weir.frame's are held to (tests/kernels.rs)."""
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "frame-expressions"))
from expressions import expressions  # noqa: E402

frame = pl.read_ipc_stream(sys.argv[1])
frame.select(**expressions(pl)).write_ipc_stream(sys.argv[2], compat_level=pl.CompatLevel.oldest())
