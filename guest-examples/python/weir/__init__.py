"""Write a weir publisher as an ordinary Python function over Arrow record batches.

    import weir

    @weir.publisher
    def publish(slots):
        for batch in slots[0]:                      # one RecordBatch at a time
            weir.write("clicks", batch.filter(...))

`slots` holds one `Slot` per source (a stream publisher has one); iterating a
slot reads its frames one at a time and yields their record batches. Output
goes out with `weir.write(table, batches)` as it is made, or is returned as
{table: batch or list of batches}. Raise ValueError for input the publisher
cannot handle (the batch fails the same way on every retry); any other
exception fails the batch and weir retries it. print() goes to the plugin's log.

Everything but `publisher`, `write` and `log` also runs outside a component,
under any CPython, which is how it is tested against pyarrow.
"""
import sys
import traceback
import weakref

from . import types
from .array import Array
from .batch import RecordBatch, infer_type
from .ipc import IpcError, read_stream, write_stream
from .types import DataType, Field, Schema

__all__ = ["publisher", "write", "tables", "log", "Slot", "Array", "RecordBatch", "Schema", "Field", "DataType", "types",
           "read_stream", "write_stream", "infer_type", "IpcError"]


class Slot:
    """The frames one source contributed to the batch, read one at a time."""

    def __init__(self, frames):
        self._frames = frames
        self.frame_count = frames.count()
        # The source these frames came from: a Kafka source's topic ("" when
        # the run declares none).
        self.source = frames.source()

    def bytes(self):
        """Each frame as it came, an Arrow IPC stream (what `weir.frame.frames` reads)."""
        while (frame := self._frames.next()) is not None:
            yield frame

    def frames(self):
        """Each frame's (schema, [RecordBatch]), as it is read."""
        for frame in self.bytes():
            yield read_stream(frame)

    def __iter__(self):
        for _, batches in self.frames():
            yield from batches


# The component's imports, bound by `publisher` while componentize-py builds the
# component: modules first imported later, at run time, are not in it.
_imports = None


def write(table, batches):
    """Appends `batches` (a RecordBatch or several, of one schema, or a
    `weir.frame.Frame`) to output table `table`."""
    if hasattr(batches, "write_to"):
        batches.write_to(table)
        return
    batches = [batches] if isinstance(batches, RecordBatch) else list(batches)
    if batches:
        _imports.output.write(table, write_stream(batches[0].schema, batches))


def tables():
    """The output tables this run's publisher declares, in order: a stream
    publisher's one table, named after its topic. A publisher that writes
    `weir.tables()[0]` serves any topic unchanged:

        for batch in slots[0]:
            weir.write(weir.tables()[0], batch)

    Raises RuntimeError when the run declares none (a local `weir run-plugin`
    without `--declaration`)."""
    declared = _imports.output.tables()
    if not declared:
        raise RuntimeError(_NO_TABLES)
    return list(declared)


# Why `tables()` raises, the same words in every SDK.
_NO_TABLES = ("this run declares no output tables: give `weir run-plugin` the publisher's declaration "
              "(--declaration publisher.toml), or write to a table by name")


def log(message, level="info"):
    """One line in the plugin's log: level is trace, debug, info, warn or error."""
    _imports.host.log(getattr(_imports.host.Level, level.upper()), str(message))


class _Anything:
    pass


def _warm_up():
    """Does now, while componentize-py builds the component, one-off work a
    call would otherwise repeat: each call starts a fresh instance from the
    memory snapshot taken after this. The bindings tie every resource handle
    the host passes (a slot's frames) to a `weakref.finalize`, and the first
    finalizer an interpreter makes imports and registers `atexit`. Measured
    by perf samples in the guest over 1,000 calls of the 1k-row passthrough,
    three pairs: 2.00 / 2.30 / 1.96 ms a call before, 1.72 / 1.81 / 1.90 after."""
    weakref.finalize(_Anything(), int)


def _authors_traceback():
    """The traceback, with the project's paths as the author knows them
    (componentize-py mounts the project at /0)."""
    return traceback.format_exc().replace('File "/0/', 'File "')


def _where(error):
    """` (at app.py:14, in publish)`: the innermost frame of the author's own
    code (not the SDK's), or nothing."""
    sdk = __file__.rsplit("/", 1)[0] + "/"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(sdk)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at {frame.filename.removeprefix('/0/')}:{frame.lineno}, in {frame.name})"


def publisher(fn):
    """Makes `fn(slots)` the component's publish function. It is called once per
    batch; it may write its output with `write` and/or return it as a dict."""
    global _imports
    import types as stdlib_types

    import wit_world
    from componentize_py_types import Err
    from wit_world.imports import host, output
    from wit_world.imports.types import PublishError_Failed, PublishError_InvalidInput

    _imports = stdlib_types.SimpleNamespace(host=host, output=output)
    _warm_up()

    class WitWorld(wit_world.WitWorld):
        def publish(self, slots):
            try:
                returned = fn([Slot(s) for s in slots])
                for table, batches in (returned or {}).items():
                    write(table, batches)
            except ValueError as e:
                raise Err(PublishError_InvalidInput(f"{e}"))
            except Exception as e:
                sys.stderr.write(_authors_traceback())
                raise Err(PublishError_Failed(f"{type(e).__name__}: {e}{_where(e)}"))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()

    # componentize-py looks for the world's class in the app module.
    fn.__globals__["WitWorld"] = WitWorld
    return fn
