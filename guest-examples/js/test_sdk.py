"""The TypeScript/JavaScript SDK's buffer-level helpers (take, filter,
withColumn with utf8, numbers, strings), run natively under Node on frames
pyarrow writes, and held against pyarrow's own take and filter: every type
apache-arrow reads, with nulls, nesting and dictionaries.

    python3 guest-examples/js/test_sdk.py     (tests/languages.rs runs it;
                                               scripts/setup.sh installs the npm packages)
"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "python"))
from test_sdk import every_type  # noqa: E402

# What apache-arrow 21 does not read (it has no large lists, no 16-byte intervals).
UNREAD = {"span"}

BUNDLE = """
import { rolldown } from 'rolldown';
const bundle = await rolldown({
  input: process.argv[1],
  platform: 'node',
  resolve: { alias: { weir: process.argv[2], 'weir:publisher/host@0.2.1': process.argv[3], 'weir:publisher/output@0.2.1': process.argv[3] } },
  logLevel: 'warn',
});
await bundle.write({ file: process.argv[4], format: 'esm' });
"""


def ipc(table):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read(path):
    return pa.ipc.open_stream(path.read_bytes()).read_all()


class HelpersMatchPyarrow(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        table = every_type()
        table = table.select([n for n in table.column_names if n not in UNREAD])
        # All ASCII: strings() then slices one decoded text, where "text" is decoded a value at a time.
        cls.table = table.append_column("ascii", pa.array(["/docs", None, "", "x" * 50, "a?b", "q", "z"]))
        cls.dir = Path(tempfile.mkdtemp())
        cls.rows = [6, 0, 0, 3, 2, 5, 1]
        cls.mask = [True, False, True, True, False, False, True]
        (cls.dir / "in.arrows").write_bytes(ipc(cls.table))
        spec = {"rows": cls.rows, "mask": cls.mask, "numbers": ["i8", "i32", "i64", "u32", "f32", "f64"], "strings": ["text", "ascii"]}
        (cls.dir / "spec.json").write_text(json.dumps(spec))
        script = cls.dir / "select.mjs"
        bundle = ["node", "--input-type=module", "-e", BUNDLE, "--", str(HERE / "test/select.ts"),
                  str(HERE / "weir/index.ts"), str(HERE / "test/host-imports.js"), str(script)]
        subprocess.run(bundle, cwd=HERE, check=True)
        subprocess.run(["node", str(script), str(cls.dir / "in.arrows"), str(cls.dir / "spec.json"), str(cls.dir)], check=True)

    def assert_equal_tables(self, ours, theirs):
        for name in theirs.column_names:
            self.assertEqual(ours[name].to_pylist(), theirs[name].to_pylist(), name)
            self.assertEqual(str(ours.schema.field(name).type), str(theirs.schema.field(name).type), name)

    def test_take(self):
        self.assert_equal_tables(read(self.dir / "take.arrows"), self.table.take(pa.array(self.rows)))

    def test_filter(self):
        self.assert_equal_tables(read(self.dir / "filter.arrows"), self.table.filter(pa.array(self.mask)))

    def test_with_column(self):
        ours = read(self.dir / "with.arrows")
        names = self.table.column_names
        self.assertEqual(ours.column_names, names[: names.index("text") + 1] + ["upper"] + names[names.index("text") + 1 :])
        self.assertEqual(ours["upper"].to_pylist(), [t.upper() if t is not None else None for t in self.table["text"].to_pylist()])

    def test_a_column_of_several_pieces_is_joined(self):
        ours = read(self.dir / "joined.arrows")
        self.assertEqual(ours.column_names[-1], "again")
        self.assertEqual(ours["again"].to_pylist(), self.table["text"].to_pylist())

    def test_numbers_and_strings(self):
        values = json.loads((self.dir / "values.json").read_text())
        # As doubles: numbers() is documented to round integers beyond 2^53 (i64 holds -2^63);
        # infinities come as strings, which JSON has no number for.
        as_float = lambda values: [None if v is None else float(v) for v in values]  # noqa: E731
        for name, got in values["numbers"].items():
            self.assertEqual(as_float(got), as_float(self.table[name].to_pylist()), name)
        for name in ("text", "ascii"):
            self.assertEqual(values["strings"][name], self.table[name].to_pylist(), name)

    def test_utf8_encodes_each_value_alone(self):
        # Lone surrogates, which joined would make one pair: each is its own replacement character.
        self.assertEqual(read(self.dir / "surrogates.arrows")["s"].to_pylist(), ["a\ufffd", "\ufffdb", None, "é"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
