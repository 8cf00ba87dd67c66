#!/usr/bin/env python3
"""Whole-process wall time of several `xlens` builds on one small profile, run interleaved.

    scripts/bench_interleaved.py RUNS PROFILE BIN [BIN ...]

Each round runs every build once (`BIN scan PROFILE --json --quiet`), in turn forward and
backward, so that the VM's drift (tens of percent within minutes) hits every build alike; then
prints each build's median and quartiles in milliseconds. Meant for captures that scan in
milliseconds, where `scripts/bench_ab.sh` (seconds, rounded to 10 ms) cannot tell builds apart.
The time includes starting the process (about 2 ms here), as a user's run does.
"""
import statistics
import subprocess
import sys
import time


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs, profile, builds = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    times = {b: [] for b in builds}
    for i in range(runs):
        for b in builds if i % 2 == 0 else builds[::-1]:
            start = time.perf_counter()
            subprocess.run([b, "scan", profile, "--json", "--quiet"], stdout=subprocess.DEVNULL, check=True)
            times[b].append(time.perf_counter() - start)
    print("| build | median (ms) | q1 (ms) | q3 (ms) |")
    print("|---|---:|---:|---:|")
    for b in builds:
        q1, _, q3 = statistics.quantiles(times[b], n=4)
        print(f"| {b} | {statistics.median(times[b]) * 1e3:.2f} | {q1 * 1e3:.2f} | {q3 * 1e3:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
