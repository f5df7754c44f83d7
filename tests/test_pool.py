"""`run_jobs` takes its jobs as workers come free: a class's notebooks are never all read
into memory at once (kernel-free: threads stand in for the worker processes)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder.grading.job import Job, RunSpec
from autograder.grading.pool import run_jobs
from autograder.grading.results import Status, SubmissionResult

WORKERS = 2


def job(student: str) -> Job:
    return RunSpec("mini", "mini", Path("/nonexistent/t"), Path("/nonexistent/s")).job(
        student, b"{}"
    )


def test_each_job_is_taken_only_when_a_worker_is_free_for_it():
    taken: list[str] = []

    def jobs():
        for i in range(40):
            taken.append(f"s{i:02d}")
            yield job(f"s{i:02d}")

    def graded(j: Job) -> SubmissionResult:
        return SubmissionResult(j.student, j.spec.assignment, Status.GRADED)

    finished, most_ahead = [], 0
    for done, result in run_jobs(
        jobs(), workers=WORKERS, hard_timeout=60, executor_factory=ThreadPoolExecutor, fn=graded
    ):
        finished.append(done.student)
        assert result.student == done.student
        most_ahead = max(most_ahead, len(taken) - len(finished))

    assert sorted(finished) == taken == [f"s{i:02d}" for i in range(40)]
    # at most: a finished batch not yet handed over, the jobs in flight, and one ahead
    assert most_ahead <= 2 * WORKERS + 1, most_ahead
