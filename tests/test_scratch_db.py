"""A job's scratch gradebook skips SQLite's disk syncs; the course's gradebook does not."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine

from autograder.grading.job import grade_job
from autograder.grading.scratch_db import scratch_url


def _synchronous(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("PRAGMA synchronous")).scalar_one()
    finally:
        engine.dispose()


def test_the_scratch_url_turns_syncs_off_on_its_engine_only(tmp_path):
    """Resolved through the installed entry point: a missing one fails ``create_engine``."""
    path = tmp_path / "a folder with spaces" / "gradebook.db"
    path.parent.mkdir()
    assert _synchronous(scratch_url(path)) == 0  # OFF
    assert _synchronous(f"sqlite:///{path}") == 2  # FULL, SQLite's default: the same file
    assert path.is_file()  # the URL names the file itself, not the file plus the query


@pytest.mark.kernel
def test_a_job_writes_its_scratch_gradebook_without_syncs(jobs, spares):
    """Every connection nbgrader opens on the job's gradebook, about ten engines, is unsynced."""
    seen: list[tuple[str, int]] = []

    def record(conn):
        if conn.engine.dialect.name == "sqlite":
            raw = conn.connection.driver_connection  # outside SQLAlchemy's transaction
            sync = raw.execute("PRAGMA synchronous").fetchone()[0]
            seen.append((conn.engine.url.database, sync))

    event.listen(Engine, "engine_connect", record)
    try:
        result = grade_job(jobs("alice"), spares)
    finally:
        event.remove(Engine, "engine_connect", record)
    assert result.score == 4, result.reason
    assert len(seen) >= 5, seen
    assert {db.rsplit("/", 1)[-1] for db, _ in seen} == {"gradebook.db"}
    assert {sync for _, sync in seen} == {0}, seen
