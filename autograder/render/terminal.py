"""Progress while grading (a bar on a terminal, plain lines in logs) and the summary table."""

from __future__ import annotations

import sys
from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autograder.grading.results import GradeResult

#: Ignored files listed one per line in the summary; the rest are counted.
MAX_IGNORED_LINES = 40


class ProgressPrinter:
    """Callable ``(student, n, total, workers)``; a rich bar when stderr is a terminal."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.console = Console(file=self.stream)
        self.bar: Progress | None = None
        self.task = None

    def __enter__(self):
        if self.console.is_terminal:
            self.bar = Progress(
                TextColumn("grading"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[workers]} workers"),
                TextColumn("{task.description}"),
                console=self.console,
                transient=True,
            )
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False

    def __call__(self, student: str, n: int, total: int, workers: int = 0) -> None:
        if self.bar is None:
            print(
                f"[{n}/{total}] graded {student} ({workers} workers)", file=self.stream, flush=True
            )
            return
        if self.task is None:
            self.task = self.bar.add_task(student, total=total, workers=workers)
        self.bar.update(self.task, completed=n, description=student, workers=workers)


def print_summary(result: GradeResult, console: Console | None = None) -> None:
    """Print the score table of every student graded so far, then where the files are."""
    console = console or Console(soft_wrap=True)
    table = Table(title=f"{result.assignment}: {len(result.results)} submission(s)")
    for name, justify in (
        ("student", "left"),
        ("score", "right"),
        ("status", "left"),
        ("notes", "left"),
    ):
        table.add_column(name, justify=justify)
    for student in sorted(result.results):
        r = result.results[student]
        notes = r.reason
        if r.flags:
            notes = (notes + "; " if notes else "") + "flags: " + "; ".join(r.flags)
        table.add_row(student, f"{r.score:g}/{r.max_score:g}", r.status.value, notes[:120])
    console.print(table)
    where = "the course's own submitted/ (in place)" if result.in_place else "the download"
    console.print(f"layout: {result.layout}, read from {where}")
    for line in result.warnings:
        console.print(f"warning: {line}")
    if result.ignored:
        console.print(f"ignored ({len(result.ignored)} file(s), not graded):")
        for line in result.ignored[:MAX_IGNORED_LINES]:
            console.print(f"  {line}")
        if len(result.ignored) > MAX_IGNORED_LINES:
            console.print(f"  ... and {len(result.ignored) - MAX_IGNORED_LINES} more")
    now, reused = len(result.graded_now), len(result.reused)
    console.print(f"graded now: {now}; unchanged since an earlier run: {reused}")
    if now:
        console.print(f"graded on: {result.engine}, {result.workers} worker(s)")
        for line in kernel_lines([result.results[s].kernel for s in result.graded_now]):
            console.print(line)
    for line in review_lines(result):
        console.print(line)
    if result.swept:
        console.print(
            f"killed {result.swept} process(es) that a grader killed earlier had left running"
        )
    console.print(f"grades: {result.reports / 'grades.csv'}")
    console.print(f"cells:  {result.reports / 'cells.csv'}")


def review_lines(result: GradeResult) -> list[str]:
    """Who sent new work over a grader's manual scores, and who waits for grading by hand."""
    lines = []
    if result.to_review:
        lines.append(
            "new work over a grader's scores (kept, and waiting for review in the formgrader):"
        )
        for student, cells in sorted(result.to_review.items()):
            lines.append(f"  {student}: {', '.join(cells)}")
    waiting = sorted(s for s, r in result.results.items() if r.waiting)
    if waiting:
        lines.append(
            f"waiting for grading by hand: {len(waiting)} student(s) "
            "(review them in the formgrader; the report lists the cells)"
        )
    return lines


def kernel_lines(starts: list[str]) -> list[str]:
    """How the kernels of the submissions graded now started, one line per way."""
    counts = Counter(start for start in starts if start)
    lines = []
    forked = counts.pop("forked", 0)
    if forked:
        lines.append(f"kernels: {forked} forked from a warm parent")
    for start, n in counts.most_common():
        why = start.partition(":")[2].strip() or "--no-fork"
        lines.append(f"kernels: {n} started fresh ({why})")
    return lines
