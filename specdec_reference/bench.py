"""Time the loop and the vectorized ``empirical_acceptance`` against each other.

Run ``python -m specdec_reference.bench`` (``--max-exponent 5`` for a quick run).
For each size it checks that both paths return the same number, then prints the
best-of-N wall time of each and their ratio.  The loop is timed once at 10^5 and
above (at 10^6 it takes tens of seconds); the vectorized path is timed as the best
of several runs.  This is a benchmark, not a test: no threshold is asserted.
"""

import argparse
import platform
import time

import numpy as np

from .sampling import empirical_acceptance

P = [0.5, 0.3, 0.2]  # the lesson's table
Q = [0.25, 0.5, 0.25]


def timed(func, repeats: int) -> tuple[float, float]:
    """Call ``func`` ``repeats`` times; return its value and the best wall time (s)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        value = func()
        best = min(best, time.perf_counter() - start)
    return value, best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-exponent", type=int, default=6, help="largest size is 10^N")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    print(f"empirical_acceptance(p={P}, q={Q}, trials, seed={args.seed})")
    print(f"numpy {np.__version__}, Python {platform.python_version()}, {platform.machine()}")
    print(f"{'trials':>9}  {'loop (s)':>10}  {'vectorized (s)':>14}  {'ratio':>8}  value")
    for exponent in range(3, args.max_exponent + 1):
        trials = 10**exponent
        loop_value, loop = timed(
            lambda n=trials: empirical_acceptance(P, Q, n, args.seed, vectorized=False),
            repeats=3 if exponent < 5 else 1,
        )
        fast_value, fast = timed(
            lambda n=trials: empirical_acceptance(P, Q, n, args.seed, vectorized=True),
            repeats=7,
        )
        if loop_value != fast_value:
            raise SystemExit(f"paths disagree at {trials}: {loop_value} != {fast_value}")
        print(f"{trials:>9,}  {loop:>10.4f}  {fast:>14.6f}  {loop / fast:>7.0f}x  {fast_value}")


if __name__ == "__main__":
    main()
