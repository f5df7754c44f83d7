"""`plan`: what a grade run does with each student, decided with no kernel and no file.

Every branch: an earlier result kept (unchanged, or the student sent nothing this time),
kept and recorded again (better known now, or never in the gradebook), recorded as it is
(nothing could be read, nothing sent), graded (new, changed, forced, not a notebook: its
worker says so); and no notebook is read until its job is taken, one at a time.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grading.job import RunSpec, grade_job
from autograder.grading.plan import Action, Decision, plan, result_key
from autograder.grading.results import Status, SubmissionResult
from autograder.intake.collect import Submission
from autograder.intake.records import Identity
from autograder.intake.spool import Spool

#: The run's spec: what every graded submission's job carries (no file is looked at).
SPEC = RunSpec(
    assignment="mini",
    notebook="mini",
    template=Path("/nonexistent/templates/mini"),
    scratch_root=Path("/nonexistent/scratch"),
    cell_timeout=10,
    notebook_timeout=60,
    sandbox=True,
)
TEMPLATE_HASH = "4bb79ca69cd2bcfc"
NB = nbformat.writes(new_notebook(cells=[new_code_cell("x = 1", id="c0")])).encode()
NOT_JSON = b"{this is not json"


def submission(student: str, data: bytes | None = NB, **fields) -> Submission:
    return Submission(student, f"{student}.ipynb", data, **fields)


def missing(student: str, **fields) -> Submission:
    """A roster's student who sent nothing, as the intake makes them."""
    return Submission(student, student, problem="no submission", missing=True, **fields)


def key(sub: Submission, template_hash: str = TEMPLATE_HASH) -> str:
    return result_key(sub, template_hash, SPEC.cell_timeout, SPEC.sandbox)


def earlier(sub: Submission, status: Status = Status.GRADED, **fields) -> SubmissionResult:
    """What an earlier run recorded for ``sub``'s student: graded from the same key."""
    fields = {"key": key(sub), "in_gradebook": True, **fields}
    return SubmissionResult(sub.student, "mini", status, score=3.0, max_score=4.0, **fields)


def decide(
    sub: Submission, before: SubmissionResult | None = None, *, force: bool = False
) -> Decision:
    """The one decision ``plan`` makes for a class of ``sub`` alone."""
    (decision,) = plan([sub], {sub.student: before}, SPEC, TEMPLATE_HASH, force=force).decisions
    return decision


# ---------------------------------------------------------------------------------------
# Kept
# ---------------------------------------------------------------------------------------


def test_an_unchanged_submission_keeps_its_result_and_is_not_recorded_again():
    sub = submission("alice")
    before = earlier(sub)

    decision = decide(sub, before)

    assert decision.action is Action.KEEP and decision.rerecord is False
    assert decision.result == before and decision.earlier is before
    assert decision.key == before.key


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
def test_a_student_this_download_lacks_keeps_the_grade_an_earlier_one_gave(force):
    sub = missing("alice")
    before = earlier(submission("alice"))  # graded from the earlier download's notebook
    assert before.key != key(sub)

    decision = decide(sub, before, force=force)

    assert decision.action is Action.KEEP and decision.result == before
    assert decision.rerecord is False


def test_a_student_better_known_now_is_recorded_again_and_the_earlier_result_is_unchanged():
    when = datetime(2026, 11, 30, 23, 1, 2, tzinfo=timezone.utc)
    sub = submission(
        "alice",
        identity=Identity("5531", "Jane", None, "jane@uni.edu", timestamp=when, late=True),
    )
    before = earlier(sub, identity=Identity("5531", last_name="Doe"))
    as_recorded = copy.deepcopy(before)

    decision = decide(sub, before)

    assert decision.action is Action.KEEP and decision.rerecord is True
    assert decision.result.identity == Identity(
        "5531", "Jane", "Doe", "jane@uni.edu", timestamp=when, late=True
    )
    assert decision.result.score == 3.0 and decision.result.key == before.key
    assert before == as_recorded  # plan changes nothing it is given


def test_a_result_that_never_reached_the_gradebook_is_recorded_again():
    sub = submission("alice")
    before = earlier(sub, in_gradebook=False)

    decision = decide(sub, before)

    assert decision.action is Action.KEEP and decision.rerecord is True
    assert decision.result == before


class WatchedSpool(Spool):
    """The collector's spool, saying which notebooks were read back, and when."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    def read(self, offset: int, size: int) -> bytes:
        self.reads.append(offset)
        return super().read(offset, size)


def test_no_notebook_is_read_until_its_job_is_taken_one_at_a_time():
    spool = WatchedSpool()
    kept = submission("alice", spool.put(NOT_JSON))  # unchanged since it was graded
    new = [submission(name, spool.put(NB.replace(b"x = 1", name.encode()))) for name in "bcd"]

    decided = plan([kept, *new], {"alice": earlier(kept)}, SPEC, TEMPLATE_HASH)

    assert [d.action for d in decided.decisions] == [Action.KEEP] + [Action.GRADE] * 3
    assert spool.reads == [] and kept.problem is None
    jobs = decided.jobs
    first = next(jobs)
    assert (first.student, first.data) == ("b", NB.replace(b"x = 1", b"b"))
    assert len(spool.reads) == 1  # the others wait in the spool
    assert [(j.student, j.data) for j in jobs] == [(s.student, s.data) for s in new[1:]]
    assert len(spool.reads) == 3 + 2  # two jobs, and the two reads of the line above


# ---------------------------------------------------------------------------------------
# Graded
# ---------------------------------------------------------------------------------------


def test_a_new_submission_is_graded_by_a_copy_of_the_runs_job():
    sub = submission("alice")

    decision = decide(sub)

    assert decision.action is Action.GRADE and decision.result is None
    (job,) = plan([sub], {}, SPEC, TEMPLATE_HASH).jobs
    assert (job.student, job.data) == ("alice", NB)  # as sent: its worker parses it
    assert job.spec == SPEC
    assert decision.key == key(sub) and decision.earlier is None


def test_force_grades_an_unchanged_submission_again():
    sub = submission("alice")
    before = earlier(sub)

    decision = decide(sub, before, force=True)

    assert decision.action is Action.GRADE and decision.earlier is before


@pytest.mark.parametrize("change", ["notebook", "template"])
def test_a_changed_key_grades_the_submission_again(change):
    sub = submission("alice")
    if change == "notebook":  # the student sent a new notebook
        before = earlier(submission("alice", NB.replace(b"x = 1", b"x = 2")))
    else:  # the assignment's source changed since
        before = earlier(sub, key=key(sub, template_hash="0" * 16))

    decision = decide(sub, before)

    assert decision.action is Action.GRADE and decision.key != before.key


# ---------------------------------------------------------------------------------------
# Recorded as it is
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "problem", ["the notebook file is empty", "is not a regular file", "file is larger than 64 MiB"]
)
def test_a_file_that_could_not_be_read_is_recorded_invalid_with_its_reason(problem):
    sub = submission("alice", None, problem=problem)

    decision = decide(sub)

    assert decision.action is Action.RECORD
    result = decision.result
    assert (result.student, result.assignment, result.status) == ("alice", "mini", Status.INVALID)
    assert result.reason == problem
    assert sub.problem == problem  # the submission itself is not changed


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (NOT_JSON, "not a valid Jupyter notebook: "),
        (b"\x89PNG\r\n\x1a\n", "the file is not UTF-8 text (not a notebook)"),
        (b'{"nbformat": 4, "metadata": {}}', "not a valid Jupyter notebook: "),
    ],
)
def test_a_file_that_is_not_a_notebook_goes_to_a_worker_which_says_invalid_at_once(data, reason):
    before = earlier(submission("alice"))

    decision = decide(submission("alice", data), before)
    (job,) = plan([decision.sub], {}, SPEC, TEMPLATE_HASH).jobs
    result = grade_job(job)  # no scratch folder: SPEC's scratch root does not exist

    assert decision.action is Action.GRADE and decision.earlier is before
    assert (result.student, result.assignment, result.status) == ("alice", "mini", Status.INVALID)
    assert result.reason.startswith(reason) and result.cells == []


def test_a_student_who_sent_nothing_and_has_no_earlier_result_is_recorded_missing():
    decision = decide(missing("carol", identity=Identity("600", "Rita", "Roe")))

    assert decision.action is Action.RECORD
    assert (decision.result.status, decision.result.reason) == (Status.MISSING, "no submission")


def test_a_student_still_missing_keeps_that_result_unless_forced():
    sub = missing("carol")
    before = earlier(sub, Status.MISSING)

    assert decide(sub, before).action is Action.KEEP
    assert decide(sub, before, force=True).action is Action.RECORD


# ---------------------------------------------------------------------------------------
# The whole class
# ---------------------------------------------------------------------------------------


def test_one_decision_per_student_in_the_class_order_and_the_jobs_in_that_order():
    subs = [submission("alice"), missing("bob"), submission("carol", NOT_JSON), submission("dan")]
    recorded = {"alice": earlier(subs[0]), "bob": None}

    decided = plan(subs, recorded, SPEC, TEMPLATE_HASH)

    assert [(d.student, d.action) for d in decided.decisions] == [
        ("alice", Action.KEEP),
        ("bob", Action.RECORD),
        ("carol", Action.GRADE),  # not a notebook: its worker says so
        ("dan", Action.GRADE),
    ]
    assert [job.student for job in decided.jobs] == ["carol", "dan"]
    assert [d.student for d in decided.of(Action.RECORD)] == ["bob"]
    assert all(s.flags == [] and s.ignored == [] for s in subs)


# ---------------------------------------------------------------------------------------
# What is recorded for each decision
# ---------------------------------------------------------------------------------------


def test_a_graded_result_is_recorded_with_the_runs_key_the_student_and_the_intakes_flags_first():
    when = datetime(2026, 11, 30, 23, 1, 2, tzinfo=timezone.utc)
    sub = submission(
        "alice", flags=["other-name: graded a.ipynb"], identity=Identity("5531", timestamp=when)
    )
    decision = decide(sub)
    graded = SubmissionResult("alice", "mini", Status.GRADED, score=4.0, flags=["killed"])
    as_returned = copy.deepcopy(graded)

    result = decision.recorded(graded)

    assert result.key == key(sub) and result.identity == Identity("5531", timestamp=when)
    assert result.flags == ["other-name: graded a.ipynb", "killed"]
    assert result.score == 4.0
    assert graded == as_returned  # the worker's result is not changed


def test_an_unreadable_submission_is_recorded_with_its_flags_and_the_runs_key():
    flags = ["kept: submitted/alice/mini/mini.ipynb ..."]
    sub = submission("alice", None, problem="is not a regular file", flags=flags)
    decision = decide(sub)

    result = decision.recorded()

    assert (result.status, result.key, result.flags) == (Status.INVALID, key(sub), sub.flags)
    assert decision.result.key == "" and decision.result.flags == []  # the plan's is unchanged


def test_a_kept_result_is_recorded_as_kept_with_its_own_key():
    sub = missing("alice", identity=Identity("5531", "Jane"))
    before = earlier(submission("alice"))

    result = decide(sub, before).recorded()

    assert result.key == before.key != key(sub)
    assert result.identity == Identity("5531", "Jane") and result.flags == before.flags
