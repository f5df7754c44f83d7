"""Time a sandboxed ``python -c pass`` from launch to exit, with and without the tether.

Usage: ``.venv/bin/python benchmarks/sandbox_start.py [--n 12]``.  Prints the median (and
range) of each, measured alternately so that the machine's load affects both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.sandbox import Limits, tether
from autograder.sandbox.launch import Launch


def launch_seconds(with_tether: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cwd").mkdir()
        launch = Launch(
            run_dir=Path(tmp) / "run",
            cwd=Path(tmp) / "cwd",
            limits=Limits(),
            command=[sys.executable, "-c", "pass"],
        )
        argv = launch.argv if with_tether else launch.argv[len(tether.command(os.getpid())) :]
        start = time.perf_counter()
        subprocess.run(argv, pass_fds=launch.pass_fds, cwd="/", env=launch.outer_env, check=True)
        elapsed = time.perf_counter() - start
        launch.close()
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12)
    n = parser.parse_args().n
    times: dict[str, list[float]] = {"with the tether": [], "bubblewrap alone": []}
    for _ in range(n):
        times["with the tether"].append(launch_seconds(True))
        times["bubblewrap alone"].append(launch_seconds(False))
    for name, xs in times.items():
        print(
            f"{name}: median {statistics.median(xs) * 1000:.0f} ms "
            f"({min(xs) * 1000:.0f}-{max(xs) * 1000:.0f} ms, {n} runs)"
        )
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
