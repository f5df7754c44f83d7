"""Which tests share a pytest-xdist worker, so that nothing expensive is built twice.

With ``-n N --dist loadgroup`` every worker process has its own session, so a session or
module fixture is built once per worker that needs it.  Each test is put in a group:

* tests that read one of the session gradings of :data:`SHARED_GRADINGS` (every lesson's
  samples, graded once) share the ``lessons`` group;
* tests of a module that has module- or class-scoped fixtures share their module's group
  (``test_grade.py``'s graded class, ``test_tamper.py``'s corpus, a module's server);
* every other test is a group of its own, and goes to whichever worker is free.

Without xdist the groups are only markers, and nothing changes.
"""

from __future__ import annotations

import pytest

#: Session fixtures that grade many notebooks: built once, on one worker.
SHARED_GRADINGS = frozenset({"lesson_course", "releases", "graded_lessons", "graded_e7_2_fresh"})


def group_of(item: pytest.Item) -> str | None:
    """The xdist group of ``item`` (``None``: a group of its own)."""
    names = set(getattr(item, "fixturenames", ()))
    if names & SHARED_GRADINGS:
        return "lessons"
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        if any(d.scope in ("module", "class", "package") for d in defs):
            return item.module.__name__ if getattr(item, "module", None) else item.path.name
    return None


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
