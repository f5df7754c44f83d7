"""What one ``grade`` run does with each student: keep the earlier result, record, or grade.

:func:`plan` decides for the whole class at once, from the submissions as collected,
the results earlier runs recorded, and the run's spec.  It is pure: it reads no file,
writes none, starts no kernel and changes nothing it is given.  It does not parse a
notebook either: the worker that grades one parses it (an unreadable one is graded
``invalid`` there, see :func:`~autograder.grading.job.grade_job`), so that this cost is
spread over the workers instead of falling on the one process that records.
``grade`` carries out each :class:`Decision`, and :meth:`Decision.recorded` is the
result it records for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from autograder.grading.job import Job, RunSpec
from autograder.grading.results import Status, SubmissionResult
from autograder.grading.students import identified
from autograder.intake.collect import Submission


class Action(str, Enum):
    """What a run does with one student's submission."""

    KEEP = "keep"  #: the earlier result stands (recorded again when ``rerecord``)
    RECORD = "record"  #: recorded as it is, without a worker: nothing could be read, or sent
    GRADE = "grade"  #: graded by a worker

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    """What a run does with one student's submission, with what it needs to do it."""

    action: Action
    sub: Submission
    key: str  #: what a result of this run is graded from (the earlier one's may differ)
    earlier: SubmissionResult | None = None  #: what an earlier run recorded for the student
    #: ``KEEP``: the earlier result, saying who the student is as known now; ``RECORD``:
    #: the result to record (``invalid`` or ``missing``, with the reason)
    result: SubmissionResult | None = None
    #: ``KEEP``: record it again (its student is better known now, or an earlier run could
    #: not put it in the gradebook)
    rerecord: bool = False

    @property
    def student(self) -> str:
        return self.sub.student

    def recorded(self, graded: SubmissionResult | None = None) -> SubmissionResult:
        """The result to record: the kept one, or ``graded`` (the worker's; ``RECORD``: this
        decision's) with this run's key, who the student is and the submission's flags first,
        marked ``new_work`` unless the earlier result was graded from the same notebook (and
        is in the gradebook).

        Neither ``graded`` nor this decision's result is changed.
        """
        if self.action is Action.KEEP:
            assert self.result is not None
            return self.result
        fresh = graded if graded is not None else self.result
        assert fresh is not None, "a graded decision is recorded with the worker's result"
        flags = [*self.sub.flags, *fresh.flags]
        earlier = self.earlier
        same = (
            earlier is not None
            and not earlier.new_work
            and _notebook(earlier.key) == _notebook(self.key)
        )
        result = replace(fresh, key=self.key, flags=flags, new_work=not same)
        return identified(result, self.sub)


def _notebook(key: str) -> str:
    """The hash of the notebook a result's key says it was graded from."""
    return key.split(":", 1)[0]


@dataclass(frozen=True)
class Plan:
    """One decision per student, in the class's order."""

    decisions: tuple[Decision, ...]
    spec: RunSpec  #: how the run grades: each graded submission's job carries it

    def of(self, action: Action) -> list[Decision]:
        """The decisions to ``action``, in order."""
        return [d for d in self.decisions if d.action is action]

    @property
    def jobs(self) -> Iterator[Job]:
        """The workers' jobs, in order, each notebook read as its job is taken: a class's
        notebooks are never all in memory at once."""
        for decision in self.of(Action.GRADE):
            yield self.spec.job(decision.student, decision.sub.data or b"")


def plan(
    submissions: Sequence[Submission],
    earlier: Mapping[str, SubmissionResult | None],
    spec: RunSpec,
    template_hash: str,
    *,
    force: bool = False,
) -> Plan:
    """Decide, for each submission, whether its earlier result is kept, or it is recorded
    as it is, or graded.

    Parameters
    ----------
    submissions : the class, as collected
    earlier : each student's result that an earlier run recorded (None, or absent: none)
    spec : how the run grades; a graded submission's job carries it
    template_hash : the hash of the grading template (of the assignment's source)
    force : grade again what an earlier run graded from the same key

    Returns
    -------
    Plan
        One decision per submission, in their order.

    Notes
    -----
    A submission's key (:func:`result_key`) is what its
    result is graded from: its bytes, the template and the run's limits.  The earlier
    result is kept when the student sent nothing this time (a later download without
    them) or when it was graded from the same key (unless ``force``).  Of what is not
    kept, a file that could not be read, or a student who sent nothing, is recorded as
    it is (``invalid``, ``missing``); the rest is graded.
    """
    decisions = []
    for sub in submissions:
        key = result_key(sub, template_hash, spec.cell_timeout, spec.sandbox)
        decisions.append(_decide(sub, earlier.get(sub.student), key, spec.assignment, force))
    return Plan(tuple(decisions), spec)


def _decide(
    sub: Submission, earlier: SubmissionResult | None, key: str, assignment: str, force: bool
) -> Decision:
    """One student's decision (see :func:`plan`)."""
    if earlier is not None and (
        (sub.missing and earlier.status is not Status.MISSING) or (not force and earlier.key == key)
    ):
        kept = identified(earlier, sub)
        again = kept != earlier or not earlier.in_gradebook
        return Decision(Action.KEEP, sub, key, earlier, kept, rerecord=again)
    if sub.problem or sub.content is None:
        status = Status.MISSING if sub.missing else Status.INVALID
        result = SubmissionResult(sub.student, assignment, status, sub.problem or "unreadable")
        return Decision(Action.RECORD, sub, key, earlier, result)
    return Decision(Action.GRADE, sub, key, earlier)


def result_key(sub: Submission, template_hash: str, timeout: float, sandbox: bool) -> str:
    """What a recorded result was graded from; a different key means grade it again."""
    return f"{sub.sha256}:{template_hash}:{timeout:g}:{int(sandbox)}"
