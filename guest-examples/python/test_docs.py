"""Runs the Python examples of the SDK reference (`docs/sdk.md`, the blocks
marked ```python run) against the SDK here, so the reference cannot drift
from the code. Each block runs on its own, under any CPython."""
import re
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REFERENCE = HERE.parent.parent / "docs" / "sdk.md"


def examples():
    text = REFERENCE.read_text()
    for match in re.finditer(r"^```python run\n(.*?)^```$", text, re.S | re.M):
        line = text.count("\n", 0, match.start()) + 2
        yield line, match.group(1)


class ReferenceExamples(unittest.TestCase):
    def test_every_runnable_example_runs(self):
        found = list(examples())
        self.assertGreaterEqual(len(found), 5, "the reference's runnable examples")
        for line, code in found:
            with self.subTest(line=line):
                exec(compile(code, f"{REFERENCE}:{line}", "exec"), {"__name__": "example"})


if __name__ == "__main__":
    unittest.main()
