"""A job's scratch gradebook: its URL, and the SQLAlchemy plugin that makes it skip disk syncs.

nbgrader's ``SaveAutoGrades`` commits the scratch gradebook once per graded cell (66 times
for an E7.2 notebook) and SQLite waits for the disk at every commit.  The
scratch gradebook is thrown away after the job, and a job that a crash interrupts is graded
again, so nothing needs it to survive one: its URL names :class:`NoDiskSync`, which turns
SQLite's syncs off (``PRAGMA synchronous = OFF``) on that engine's connections only.

nbgrader makes the engines itself (``Gradebook(db_url)``, about ten per job), so the setting
travels in the URL (``?plugin=``), which SQLAlchemy resolves through this package's
``sqlalchemy.plugins`` entry point.  The course's own gradebook never gets it.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import URL, CreateEnginePlugin, Engine

#: The entry point name (``pyproject.toml``, ``[project.entry-points."sqlalchemy.plugins"]``).
PLUGIN = "specdec_scratch_gradebook"


def scratch_url(path: Path) -> str:
    """The SQLAlchemy URL of the scratch gradebook at ``path``, with :class:`NoDiskSync`."""
    return f"sqlite:///{path}?plugin={PLUGIN}"


class NoDiskSync(CreateEnginePlugin):
    """Every connection of the engine runs ``PRAGMA synchronous = OFF`` first (SQLite only)."""

    def update_url(self, url: URL) -> URL:
        return url  # it takes no arguments of its own: SQLAlchemy has removed ``plugin``

    def engine_created(self, engine: Engine) -> None:
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _no_disk_sync)


def _no_disk_sync(dbapi_connection, connection_record) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous = OFF")
    finally:
        cursor.close()
