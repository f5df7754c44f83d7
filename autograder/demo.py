"""``specdec-course demo``: the whole instructor workflow on the sample submissions.

In the ignored scratch course ``.demo/`` it releases every lesson (with the
self-check), grades the sample submissions kept in ``tests/files/<assignment>/``
(the reference, the blank release, correct variants and common mistakes), writes
feedback pages and the instructor report, and prints the scores and where to look.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console

from autograder.course import assignments
from autograder.grade import grade
from autograder.release import release
from autograder.render.terminal import ProgressPrinter, print_summary
from autograder.report import report
from autograder.sandbox import sandbox_problem
from specdec_reference import (
    expected_tokens,
    overall_acceptance,
    ridge_batch,
    specs,
    speed_estimate,
    speedup,
    step_time,
    verify_cost_ratio,
)


def demo(
    *, repo: Path | str | None = None, workers: int | None = None, console: Console | None = None
) -> int:
    """Run the demo; return the exit code (0 when everything ran)."""
    console = console or Console(soft_wrap=True)
    repo = Path(repo).resolve() if repo else Path(__file__).resolve().parents[1]
    course = repo / ".demo"
    if course.exists():
        shutil.rmtree(course)
    course.mkdir()
    shutil.copy2(repo / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(repo / "source", course / "source")
    sandbox = _sandbox_ok(console)
    _worked_example(console)

    opened = []
    for assignment in assignments(course):
        console.rule(f"[bold]{assignment}")
        for r in release(assignment, course=course, sandbox=sandbox):
            for nb, (score, total) in r.source_scores.items():
                blank = r.release_scores.get(nb, (0.0, total))[0]
                console.print(
                    f"released {nb}.ipynb: source scores {score:g}/{total:g}, "
                    f"blank release {blank:g}/{total:g}"
                )
        samples = repo / "tests" / "files" / assignment / "submissions"
        if not samples.is_dir():
            console.print(f"(no sample submissions in {samples})")
            continue
        with ProgressPrinter() as progress:
            result = grade(
                assignment,
                submissions=samples,
                course=course,
                workers=workers,
                sandbox=sandbox,
                progress=progress,
            )
        print_summary(result, console)
        page = report(assignment, course=course)
        pages = sorted((course / "feedback").glob(f"*/{assignment}/*.html"))
        # a page with failures to read shows more than the blank or the reference one
        mistakes = [p for p in pages if p.parts[-3].startswith("mistake-")]
        example = (mistakes or pages or [None])[0]
        opened += [page] + ([example] if example else [])
    if opened:
        console.rule("open these")
        for path in opened:
            console.print(f"file://{path}")
    return 0


def _sandbox_ok(console: Console) -> bool:
    problem = sandbox_problem()
    if problem:
        console.print(
            f"[yellow]sandbox unavailable ({problem}); the demo grades the repository's "
            "own sample submissions without it[/]"
        )
    return problem is None


def _worked_example(console: Console) -> None:
    """The chapter's worked example, computed by the reference implementation."""
    e_n = expected_tokens(0.8, 4)
    rate = speed_estimate(0.8, 4, 0.012, 0.001)
    console.rule("[bold]chapter E7 worked example (specdec_reference)")
    model, gpu = specs.LLAMA2_7B, specs.A100_SXM_80GB
    seconds, bound = step_time(model, gpu, 1, 0)
    console.print(
        f"{model['name']} at batch 1 on an {gpu['name']}: {seconds * 1e3:.2f} ms per token "
        f"({bound}-bound); ridge batch {ridge_batch(model, gpu)}; verifying 4 drafted tokens "
        f"costs {verify_cost_ratio(model, gpu, 4):.2f} steps"
    )
    console.print(
        f"sum of min(p, q) for p=[0.5, 0.3, 0.2], q=[0.25, 0.5, 0.25]: "
        f"{overall_acceptance([0.5, 0.3, 0.2], [0.25, 0.5, 0.25]):.2f}"
    )
    console.print(f"E[N] at a=0.8, k=4: {e_n:.4f} tokens per target pass")
    console.print(
        f"throughput: {rate:.1f} tokens/s vs 100 tokens/s target-only: "
        f"{speedup(0.8, 4, 0.012, 0.001, 0.010):.3f}x"
    )
