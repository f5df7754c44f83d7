"""Progress while grading (a bar on a terminal, plain lines in logs) and the summary table."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autograder.grading.results import GradeResult


class ProgressPrinter:
    """Callable ``(student, n, total)``; a rich progress bar when stderr is a terminal."""

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

    def __call__(self, student: str, n: int, total: int) -> None:
        if self.bar is None:
            print(f"[{n}/{total}] graded {student}", file=self.stream, flush=True)
            return
        if self.task is None:
            self.task = self.bar.add_task(student, total=total)
        self.bar.update(self.task, completed=n, description=student)


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
    now, reused = len(result.graded_now), len(result.reused)
    console.print(f"graded now: {now}; unchanged since an earlier run: {reused}")
    if result.swept:
        console.print(
            f"killed {result.swept} process(es) that a grader killed earlier had left running"
        )
    console.print(f"grades: {result.reports / 'grades.csv'}")
    console.print(f"cells:  {result.reports / 'cells.csv'}")
