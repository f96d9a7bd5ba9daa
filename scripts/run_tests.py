#!/usr/bin/env python3
"""Runs weir's test binaries side by side.

`cargo test` runs its binaries one after another; most of ours spend their time
waiting on a broker, a rollover or a child process, so running a few at once
takes far less wall time on the same cores. Given the executables `cargo test
--no-run --message-format=json` built (on standard input), this starts the
slowest first (by the times recorded at the last run), keeps `--jobs` running,
prints each binary's whole output when it ends (never interleaved), and closes
with a line per binary and the totals. Every binary runs even when one fails;
the exit status says whether all passed.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def executables(messages):
    """The test executables in cargo's JSON messages, with a name for each."""
    found = []
    for line in messages:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        target = message["target"]
        kind = target["kind"][0]
        name = target["name"] if kind == "test" else f"{target['name']} ({kind})"
        # cargo runs a test binary in its package's directory.
        found.append((name, message["executable"], str(Path(message["manifest_path"]).parent)))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3, help="binaries at once")
    parser.add_argument("--times", type=Path, required=True, help="where each binary's last time is kept")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a binary is killed as hung")
    args = parser.parse_args()

    binaries = executables(sys.stdin)
    if not binaries:
        print("run_tests: cargo built no test binaries", file=sys.stderr)
        return 1
    try:
        last = json.loads(args.times.read_text())
    except (OSError, ValueError):
        last = {}
    # Slowest first, so the longest binary never starts last; unknown ones count as slow.
    queue = sorted(binaries, key=lambda b: -last.get(b[0], 600.0))

    running = {}  # pid -> (name, process, log, started)
    results = []  # (name, seconds, passed, summary)
    began = time.monotonic()
    while queue or running:
        while queue and len(running) < args.jobs:
            name, path, cwd = queue.pop(0)
            log = tempfile.TemporaryFile()
            process = subprocess.Popen(
                [path], cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
            running[process.pid] = (name, process, log, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for name, process, _, started in running.values():
                if time.monotonic() - started > args.timeout and process.returncode is None:
                    print(f"run_tests: {name} still running after {args.timeout:.0f} s: killed", flush=True)
                    process.kill()
                    process.returncode = -9
            time.sleep(0.2)
            continue
        if pid not in running:
            continue
        name, process, log, started = running.pop(pid)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
        log.close()
        summary = re.findall(r"^test result: .*$", output, re.M)
        passed = process.returncode == 0 and bool(summary) and all(s.startswith("test result: ok.") for s in summary)
        print(f"\n===== {name} ({seconds:.0f} s, {'ok' if passed else 'FAILED'}) =====", flush=True)
        print(output, end="", flush=True)
        ended = summary[-1] if summary else f"no test result: it ended with status {process.returncode}"
        results.append((name, seconds, passed, ended))
        last[name] = round(seconds, 1)

    args.times.parent.mkdir(parents=True, exist_ok=True)
    args.times.write_text(json.dumps(last, indent=1, sort_keys=True) + "\n")

    print(f"\n===== {len(results)} test binaries, {args.jobs} at once, {time.monotonic() - began:.0f} s =====")
    totals = [0, 0, 0]
    for name, seconds, passed, summary in sorted(results, key=lambda r: -r[1]):
        print(f"{'ok    ' if passed else 'FAILED'} {seconds:7.1f} s  {name}: {summary}")
        counts = re.search(r"(\d+) passed; (\d+) failed; (\d+) ignored", summary)
        if counts:
            totals = [t + int(c) for t, c in zip(totals, counts.groups())]
    failed = [name for name, _, passed, _ in results if not passed]
    print(f"\nall tests: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    if failed:
        print(f"failing binaries: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
