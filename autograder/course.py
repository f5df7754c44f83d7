"""The nbgrader course directory: where it is, its configuration, its assignments.

Also the one place that opens nbgrader on a course: :func:`nbgrader_api` and
:func:`gradebook`, for the course itself or a job's scratch copy of it.  nbgrader and
traitlets are imported by the functions that use them, so that what only needs
:class:`UsageError` or :func:`find_course` (the command's argument parsing) does without.

Both first make nbgrader read its schema's version in this process
(:func:`read_schema_version_here`): to stamp a gradebook it creates, nbgrader otherwise runs
the ``alembic heads`` command, a new Python of about 1.6 CPU-seconds, every time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

CONFIG_FILE = "nbgrader_config.py"


class UsageError(Exception):
    """An instructor's error (unknown assignment, no submissions, unreadable course).

    The CLI prints the message and exits with status 2; nothing is graded.
    """


def find_course(course: Path | str | None = None) -> Path:
    """Return the course root: ``course`` if given, else the current directory.

    The root must hold ``nbgrader_config.py`` and a ``source/`` folder.
    """
    root = Path(course) if course is not None else Path.cwd()
    root = root.resolve()
    if not (root / CONFIG_FILE).is_file():
        hint = "" if course is not None else " (run from the course root or pass --course DIR)"
        raise UsageError(f"{root} is not an nbgrader course: no {CONFIG_FILE}{hint}")
    if not (root / "source").is_dir():
        raise UsageError(f"{root} has no source/ folder of assignments")
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        raise UsageError(f"course directory {root} is not readable and writable")
    return root


def load_config(course: Path) -> Config:
    """Load the course's ``nbgrader_config.py`` as a traitlets ``Config``."""
    from traitlets.config.loader import PyFileConfigLoader

    try:
        config = PyFileConfigLoader(CONFIG_FILE, path=str(course)).load_config()
    except Exception as exc:  # a syntax error in the instructor's config file
        raise UsageError(f"cannot read {course / CONFIG_FILE}: {exc}") from exc
    config.CourseDirectory.root = str(course)
    return config


def db_url(course: Path, config: Config) -> str:
    """The gradebook URL: ``CourseDirectory.db_url`` if configured, else ``gradebook.db``."""
    url = config.CourseDirectory.get("db_url")
    return str(url) if url else f"sqlite:///{course / 'gradebook.db'}"


def schema_version() -> str:
    """The version nbgrader stamps on a new gradebook: the head of its alembic scripts.

    The revision that ``alembic heads`` prints first, which nbgrader's own
    ``get_alembic_version`` reads from that command's output.
    """
    import nbgrader.api
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(Path(nbgrader.api.__file__).parent / "alembic"))
    return scripts.get_revisions("heads")[0].revision


def read_schema_version_here() -> None:
    """Have nbgrader read its schema's version with :func:`schema_version` (no command)."""
    import nbgrader.api

    nbgrader.api.get_alembic_version = schema_version


def nbgrader_api(config: Config) -> NbGraderAPI:
    """nbgrader's Python API on the course that ``config`` describes."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    read_schema_version_here()
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def gradebook(url: str, config: Config) -> Gradebook:
    """The gradebook at ``url`` for the configured course id (use it as a context manager)."""
    from nbgrader.api import Gradebook

    read_schema_version_here()
    return Gradebook(url, str(config.CourseDirectory.get("course_id", "")))


def assignments(course: Path) -> list[str]:
    """Names of the assignments in ``source/``, sorted."""
    return sorted(
        p.name for p in (course / "source").iterdir() if p.is_dir() and not p.name.startswith(".")
    )


def notebooks(course: Path, assignment: str) -> list[str]:
    """Names (without ``.ipynb``) of the assignment's source notebooks, sorted."""
    folder = course / "source" / assignment
    if not folder.is_dir():
        known = ", ".join(assignments(course)) or "none"
        raise UsageError(f"unknown assignment {assignment!r} (known: {known})")
    names = sorted(p.stem for p in folder.glob("*.ipynb"))
    if not names:
        raise UsageError(f"assignment {assignment!r} has no notebooks in {folder}")
    return names


def scratch_dir(course: Path) -> Path:
    """The course's ignored scratch folder (templates, generated checks)."""
    path = course / ".scratch"
    path.mkdir(exist_ok=True)
    return path
