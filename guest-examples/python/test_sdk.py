"""The Python SDK's Arrow IPC reader and writer, proven against pyarrow under
native CPython: pyarrow writes, weir reads; weir writes, pyarrow reads; every
type weir's decoders produce, with nulls, nesting and dictionaries.

    python3 guest-examples/python/test_sdk.py     (tests/python_sdk.rs runs it)
"""
import datetime
import decimal
import sys
import unittest
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
import weir  # noqa: E402
from weir import types as wt  # noqa: E402

UTC = datetime.timezone.utc


def every_type():
    """A pyarrow table with a column of every type weir's decoders produce (and a few more)."""
    n = 7
    ts = [datetime.datetime(2026, 12, 1, 8, i, 30, 250, tzinfo=UTC) if i % 3 else None for i in range(n)]
    columns = {
        "i8": pa.array([1, -2, None, 4, 5, -128, 127], pa.int8()),
        "i16": pa.array([1, -2, None, 4, 5, 6, 7], pa.int16()),
        "i32": pa.array([1, -2, None, 4, 5, 6, 2**31 - 1], pa.int32()),
        "i64": pa.array([1, -2, None, 4, 5, 6, -(2**63)], pa.int64()),
        "u16": pa.array([1, 2, 3, None, 5, 6, 65535], pa.uint16()),
        "u32": pa.array([1, 2, 3, None, 5, 6, 2**32 - 1], pa.uint32()),
        "u64": pa.array([1, 2, 3, None, 5, 6, 2**64 - 1], pa.uint64()),
        "f32": pa.array([1.5, None, -0.25, 3.0, 4.0, 5.0, 6.0], pa.float32()),
        "f64": pa.array([1.5, None, -0.25, 3e300, 4.0, float("inf"), 6.0], pa.float64()),
        "flag": pa.array([True, False, None, True, True, False, True]),
        "text": pa.array(["a", "", None, "ünïcødé", "x" * 100, "f", "g"]),
        "large_text": pa.array(["a", "b", None, "d", "e", "f", "g"], pa.large_string()),
        "blob": pa.array([b"\x00\x01", b"", None, b"z", b"q", b"r", b"s"]),
        "uuid": pa.array([bytes([i] * 16) if i != 2 else None for i in range(n)], pa.binary(16)),
        "day": pa.array([datetime.date(2026, 1, i + 1) if i != 3 else None for i in range(n)], pa.date32()),
        "at": pa.array(ts, pa.timestamp("us", tz="+00:00")),
        "at_ms": pa.array([t.replace(microsecond=0) if t else None for t in ts], pa.timestamp("ms")),
        "clock": pa.array([datetime.time(1, 2, 3, 4000) if i != 1 else None for i in range(n)], pa.time64("us")),
        "clock_ms": pa.array([datetime.time(23, 59, 59, 999000)] * n, pa.time32("ms")),
        "took": pa.array([datetime.timedelta(seconds=i, microseconds=7) if i != 5 else None for i in range(n)],
                         pa.duration("us")),
        "price": pa.array([decimal.Decimal("12.34"), decimal.Decimal("-0.01"), None, decimal.Decimal("0.00"),
                           decimal.Decimal("99999999.99"), decimal.Decimal("1"), decimal.Decimal("-5.5")],
                          pa.decimal128(10, 2)),
        "span": pa.array([pa.MonthDayNano([1, 2, 3]), None] + [pa.MonthDayNano([i, -i, i * 1000]) for i in range(5)],
                         pa.month_day_nano_interval()),
        "tags": pa.array([["a", "b"], [], None, ["c"], [None, "d"], ["e"] * 3, ["f"]], pa.list_(pa.string())),
        "pair": pa.array([[i, -i] if i != 2 else None for i in range(n)], pa.list_(pa.int32(), 2)),
        "point": pa.array([{"x": i, "y": f"p{i}"} if i != 4 else None for i in range(n)],
                          pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "attrs": pa.array([[("k", 1), ("j", None)], [], None, [("a", 3)], [("b", 4)], [("c", 5)], [("d", 6)]],
                          pa.map_(pa.string(), pa.int32())),
        "status": pa.array(["OK", "FAIL", None, "OK", "OK", "RETRY", "FAIL"]).dictionary_encode(),
        "nested": pa.array([[{"a": [1, 2], "b": {"c": True}}], None, [], [{"a": None, "b": None}],
                            [{"a": [], "b": {"c": False}}], [None], [{"a": [3], "b": {"c": None}}]],
                           pa.list_(pa.struct([("a", pa.list_(pa.int64())), ("b", pa.struct([("c", pa.bool_())]))]))),
        "nothing": pa.nulls(n),
    }
    schema = pa.schema([pa.field(k, v.type, nullable=(k != "clock_ms")) for k, v in columns.items()],
                       metadata={"source": "test"})
    return pa.Table.from_arrays(list(columns.values()), schema=schema)


def ipc(table, max_chunksize=None):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max_chunksize)
    return sink.getvalue().to_pybytes()


def from_ipc(data):
    return pa.ipc.open_stream(data).read_all()


class ReadsWhatPyarrowWrites(unittest.TestCase):
    def test_every_type_reads_as_pyarrow_reads_it(self):
        table = every_type()
        schema, batches = weir.read_stream(ipc(table))
        self.assertEqual(len(batches), 1)
        self.assertEqual(schema.metadata, {"source": "test"})
        for ours, theirs in zip(schema.fields, table.schema):
            self.assertEqual(ours.name, theirs.name)
            self.assertEqual(str(ours.type), str(theirs.type), ours.name)
            self.assertEqual(ours.nullable, theirs.nullable, ours.name)
        batch = batches[0]
        for name in table.column_names:
            self.assertEqual(batch[name].to_pylist(), table[name].to_pylist(), name)
            self.assertEqual(batch[name].null_count, table[name].null_count, name)
        self.assertEqual(batch.to_pylist(), table.to_pylist())

    def test_a_frame_of_several_batches(self):
        table = every_type()
        schema, batches = weir.read_stream(ipc(table, max_chunksize=3))
        self.assertEqual([b.num_rows for b in batches], [3, 3, 1])
        rows = [r for b in batches for r in b.to_pylist()]
        self.assertEqual(rows, table.to_pylist())

    def test_an_empty_frame_has_a_schema_and_no_batches(self):
        schema, batches = weir.read_stream(ipc(every_type().slice(0, 0)))
        self.assertEqual(batches, [])
        self.assertEqual(len(schema), every_type().num_columns)

    def test_bytes_that_are_not_a_stream_are_an_error(self):
        with self.assertRaises(weir.IpcError):
            weir.read_stream(b"\xff\xff\xff\xff\x00\x10\x00\x00garbage")
        with self.assertRaises(weir.IpcError):
            weir.read_stream(b"")


class PyarrowReadsWhatWeirWrites(unittest.TestCase):
    def test_every_type_round_trips(self):
        table = every_type()
        schema, batches = weir.read_stream(ipc(table))
        # Re-encoded from the arrays, not the bytes they came in: take every row.
        batch = batches[0].take(range(table.num_rows))
        back = from_ipc(weir.write_stream(schema, [batch]))
        self.assertTrue(back.schema.equals(table.schema, check_metadata=True), f"{back.schema}\n{table.schema}")
        self.assertTrue(back.equals(table))

    def test_filter_and_take_match_pyarrow(self):
        table = every_type()
        _, (batch,) = weir.read_stream(ipc(table))
        mask = [True, False, True, True, False, False, True]
        ours = from_ipc(batch.filter(mask).to_ipc())
        self.assertTrue(ours.equals(table.filter(pa.array(mask))))
        order = [6, 0, 0, 3, 2]
        ours = from_ipc(batch.take(order).to_ipc())
        self.assertTrue(ours.equals(table.take(pa.array(order))))

    def test_take_refuses_rows_out_of_range(self):
        _, (batch,) = weir.read_stream(ipc(every_type()))
        with self.assertRaisesRegex(IndexError, "index 7 is out of range for an array of 7 values"):
            batch.take([0, 7])
        with self.assertRaisesRegex(IndexError, "index -1 is out of range"):
            batch["text"].take([-1])
        with self.assertRaisesRegex(ValueError, "the mask has 8 values, but the array has 7"):
            batch["i64"].filter([True] * 8)

    def test_columns_built_from_python_lists(self):
        ts = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        cases = [
            ([1, None, 3], wt.int64(), pa.int64()),
            ([1, 2, None], wt.uint8(), pa.uint8()),
            ([0.5, None], wt.float32(), pa.float32()),
            ([True, None, False], wt.bool_(), pa.bool_()),
            (["x", None, "ÿ"], wt.string(), pa.string()),
            ([b"\x00", None], wt.large_binary(), pa.large_binary()),
            ([ts, None], wt.timestamp("us", "+00:00"), pa.timestamp("us", tz="+00:00")),
            ([datetime.date(2000, 2, 29), None], wt.date32(), pa.date32()),
            ([datetime.timedelta(days=1, microseconds=3), None], wt.duration("us"), pa.duration("us")),
            ([decimal.Decimal("-1.25"), None], wt.decimal128(5, 2), pa.decimal128(5, 2)),
            ([[1, 2], None, []], wt.list_(wt.int32()), pa.list_(pa.int32())),
            ([{"a": 1, "b": "x"}, None], wt.struct([("a", wt.int64()), ("b", wt.string())]),
             pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ([[("k", 1)], None, []], wt.map_(wt.string(), wt.int64()), pa.map_(pa.string(), pa.int64())),
            ([{"k": 1}], wt.map_(wt.string(), wt.int64()), pa.map_(pa.string(), pa.int64())),
            (["a", "b", "a", None], wt.dictionary(wt.int32(), wt.string()), pa.dictionary(pa.int32(), pa.string())),
            ([None, None], wt.null(), pa.null()),
        ]
        for values, ours, theirs in cases:
            batch = weir.RecordBatch.from_pydict({"v": weir.Array.from_pylist(values, ours)})
            back = from_ipc(batch.to_ipc())
            self.assertEqual(str(back.schema.field("v").type), str(theirs))
            expected = pa.array(values, theirs) if ours.kind != "dictionary" else pa.array(values).dictionary_encode()
            self.assertEqual(back["v"].to_pylist(), expected.to_pylist(), str(ours))

    def test_types_are_inferred_as_pyarrow_infers_them(self):
        values = {"n": [1, None], "x": [1.5, 2.0], "s": ["a", None], "b": [True, False], "d": [datetime.date(2026, 1, 1), None],
                  "l": [[1], [2, 3]], "st": [{"a": 1}, {"a": None}]}
        batch = weir.RecordBatch.from_pydict(values)
        back = from_ipc(batch.to_ipc())
        for name, column in values.items():
            self.assertEqual(str(back.schema.field(name).type), str(pa.array(column).type), name)
            self.assertEqual(back[name].to_pylist(), column)

    def test_rename_select_and_set_column(self):
        table = pa.table({"ts": [1, 2, 3], "url": ["/a/b", "/", "/c"], "x": [1.0, 2.0, 3.0]})
        _, (batch,) = weir.read_stream(ipc(table))
        out = batch.rename({"ts": "clicked_at"}).set_column("section", ["a", "home", "c"], after="url").drop(["x"])
        back = from_ipc(out.to_ipc())
        self.assertEqual(back.column_names, ["clicked_at", "url", "section"])
        self.assertEqual(back["section"].to_pylist(), ["a", "home", "c"])
        with self.assertRaises(KeyError):
            batch.rename({"nope": "x"})
        with self.assertRaises(ValueError):
            batch.set_column("y", [1])

    def test_a_batch_written_unchanged_is_the_frame_it_came_in(self):
        data = ipc(every_type())
        schema, batches = weir.read_stream(data)
        self.assertTrue(weir.write_stream(schema, batches) == data)
        plain = ipc(pa.table({"a": [1, 2, 3]}))
        schema, batches = weir.read_stream(plain)
        self.assertIs(weir.write_stream(schema, batches), plain)
        several = ipc(every_type(), max_chunksize=2)
        schema, batches = weir.read_stream(several)
        self.assertTrue(from_ipc(weir.write_stream(schema, batches)).equals(every_type()))


class FrameExpressionsAreBuiltAsTheKernelsTakeThem(unittest.TestCase):
    """weir.frame's expressions, built outside a component: their node lists
    (operands before their users), as the kernels evaluate them."""

    def test_operators_make_nodes_operands_first(self):
        from weir.frame import col
        e = (col("d") >= 100) & ~col("u").is_null()
        self.assertEqual(e._nodes, [("column", "d"), ("literal", 100), ("binary", "ge", 0, 1), ("column", "u"),
                                    ("unary", "is-null", 3), ("unary", "not", 4), ("binary", "and", 2, 5)])
        self.assertEqual(e.name, "d")
        self.assertEqual((1 - col("x"))._nodes, [("literal", 1), ("column", "x"), ("binary", "sub", 0, 1)])

    def test_when_chains_nest_and_take_the_first_values_name(self):
        from weir.frame import col, when
        e = when(col("a") > 1).then(col("b")).when(col("c")).then("x").otherwise(None)
        self.assertEqual(e.name, "b")
        self.assertEqual(e._nodes[-1], ("call", "when", [2, 3, len(e._nodes) - 2]))
        self.assertEqual(e._nodes[-2][:2], ("call", "when"))
        # Without otherwise, a null literal.
        self.assertEqual(when(col("a")).then(1)._nodes[-2:], [("literal", None), ("call", "when", [0, 1, 2])])

    def test_functions_take_their_arguments_as_literals(self):
        from weir.frame import col
        e = col("url").str.extract(r"^/*([^/?#]*)", 1)
        self.assertEqual(e._nodes, [("column", "url"), ("literal", r"^/*([^/?#]*)"), ("literal", 1),
                                    ("call", "str.extract", [0, 1, 2])])
        self.assertEqual(col("ts").dt.truncate("1h")._nodes[-1], ("call", "dt.truncate", [0, 1]))
        parts = col("path").str.split("/").list.get(-1, null_on_oob=True)
        self.assertEqual(parts._nodes[-3:], [("literal", -1), ("literal", True), ("call", "list.get", [2, 3, 4])])
        self.assertEqual(parts.name, "path")
        # A record's field is named after the field, as in Polars.
        self.assertEqual((col("user").struct.field("id") + 1).name, "id")

    def test_misuse_is_said_where_it_is_written(self):
        from weir.frame import col, lit
        with self.assertRaisesRegex(TypeError, "combine conditions with & and |"):
            bool(col("a") > 1)
        with self.assertRaisesRegex(ValueError, "fits in 64 bits"):
            lit(1 << 70)
        with self.assertRaisesRegex(ValueError, "a literal is None, a bool, an int, a float or a str"):
            lit([1])
        with self.assertRaisesRegex(RuntimeError, "inside a component"):
            from weir.frame import _wit
            _wit(col("a"))


if __name__ == "__main__":
    unittest.main(verbosity=1)
