"""How ``--dist loadfile`` shares the suite among xdist workers (a pytest plugin).

xdist's own ``loadfile`` gives each file to one worker, in collection order.  This plugin
changes two things:

* **The files that read the graded lessons are one unit.**  ``graded_lessons`` and
  ``releases`` are session fixtures: a worker builds them the first time one of its tests
  asks, so the files that ask must share a worker, or each worker would grade every lesson
  again.  A test elsewhere that asks for them fails at collection, naming this list.
* **The longest units go first.**  A worker takes the next unit when it is nearly done, so
  a long unit handed out last would run alone at the end.

* **A file of per-lesson checks is one unit per lesson** (:data:`BY_LESSON`): its tests
  share no fixture, and each lesson's take as long as a lesson's own file.

It only orders and groups; every test still runs once, with its own file's fixtures.
"""

from __future__ import annotations

import re

import pytest

#: The session fixtures that grade or release every lesson.
GRADED_ONCE = frozenset({"graded_lessons", "releases"})

#: The files whose tests ask for them: one unit.
GRADED_LESSONS_FILES = frozenset(
    {
        "tests/test_lessons.py",
        "tests/test_e7_2_kernel.py",
        "tests/test_e7_3_kernel.py",
        "tests/test_forked_kernels.py",
        "tests/test_report.py",
    }
)

#: The name of that unit.
GRADED_LESSONS = "graded lessons"

#: Files without module fixtures whose tests are one unit per lesson (the first part of a
#: test's parameters, ``[e7_4-...]``), so that the lessons' checks run side by side.
BY_LESSON = frozenset({"tests/test_lesson_contracts.py"})

#: The units that take longest, longest first; the others follow in collection order.
LONGEST_FIRST = (
    GRADED_LESSONS,
    "tests/test_browser.py",
    "tests/test_handout_browser.py",
    "tests/test_grade.py",
    "tests/test_tamper.py",
    "tests/test_sandbox.py",
    "tests/test_cluster.py",
    "tests/test_faults.py",
    "tests/test_jupyterhub.py",
)


def file_of(nodeid: str) -> str:
    """The file of a test, relative to the root (``tests/test_grade.py``)."""
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The unit a test runs in: its file, its file's lesson (:data:`BY_LESSON`), or
    :data:`GRADED_LESSONS`."""
    path = file_of(nodeid)
    if path in GRADED_LESSONS_FILES:
        return GRADED_LESSONS
    lesson = re.search(r"\[(e\d+_\d+)\b", nodeid) if path in BY_LESSON else None
    return f"{path}[{lesson.group(1)}]" if lesson else path


def pytest_collection_modifyitems(config, items) -> None:
    """A test outside :data:`GRADED_LESSONS_FILES` may not ask for the graded lessons."""
    strays = sorted(
        {
            file_of(item.nodeid)
            for item in items
            if GRADED_ONCE & set(getattr(item, "fixturenames", ()))
            and unit_of(item.nodeid) != GRADED_LESSONS
        }
    )
    if strays:
        raise pytest.UsageError(
            f"{', '.join(strays)} ask for {' or '.join(sorted(GRADED_ONCE))}: add them to "
            "GRADED_LESSONS_FILES in tests/support/scheduling.py, or each xdist worker "
            "grades every lesson again"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``: files as units, the graded lessons' files as one, longest first."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}

    class LongestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            first = min(self.workqueue, key=lambda unit: rank.get(unit, len(rank)))
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return LongestFirst(config, log)
