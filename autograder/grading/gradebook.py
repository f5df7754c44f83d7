"""The course's gradebook, held open, and waited for while another program locks it.

Both sides use it: the record stage writes the gradebook
(:mod:`autograder.record.store`), and every score that leaves the tool is read back from
it (:mod:`autograder.grading.gradebook_grades`).

A run keeps the gradebook open (:class:`OpenGradebook`): nbgrader's ``Gradebook`` makes a
database engine and checks every table when it opens, and an engine kept open compiles
each statement once.  nbgrader's methods commit as they go; inside
:meth:`OpenGradebook.transaction` those commits are held back, so that a batch costs one
commit (one ``fsync`` for SQLite).  An error closes the gradebook, so the next attempt
opens it anew.

A gradebook that another program (the formgrader) keeps locked is waited for, with a
bounded back-off (:func:`while_locked`); past the limit, or when the disk is full,
:class:`RecordError` stops the run.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TypeVar

from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning
from sqlalchemy.orm import scoped_session, sessionmaker
from traitlets.config import Config

from autograder.course import gradebook
from autograder.files import is_disk_full

T = TypeVar("T")


class RecordError(Exception):
    """The course could not be written: its gradebook stayed locked, or its disk is full.

    ``grade`` stops at the first one.  Everything recorded before is intact, and running
    the same command again finishes the batch, regrading nothing already graded.
    """


def warn(message: str) -> None:
    """The default ``notify``: a warning line on stderr."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stop_when_disk_full() -> Iterator[None]:
    """Turn a write that failed for lack of space into a :class:`RecordError` with the reason."""
    try:
        yield
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise RecordError(f"the disk is full: cannot write{where}: {exc.strerror}") from exc


class OpenGradebook:
    """The course's gradebook, opened at its first use and kept open until :meth:`close`.

    After an error, :meth:`discard` rolls back and closes it; the next :meth:`get` opens it
    anew, so a retry starts from a fresh connection.
    """

    def __init__(self, url: str, config: Config) -> None:
        self.url, self.config = url, config
        self._gradebook: Gradebook | None = None

    def get(self) -> Gradebook:
        """The open gradebook, opened now if it is not."""
        if self._gradebook is None:
            self._gradebook = gradebook(self.url, self.config)
        return self._gradebook

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Gradebook]:
        """The open gradebook, with the commits that nbgrader's methods make in it held back
        until the block ends, where they become one commit; an error rolls back them all.

        nbgrader's session is bound, for the block, to a connection whose transaction it
        joins in SQLAlchemy's ``rollback_only`` mode: its commits only flush.
        """
        gb = self.get()
        plain = gb.db
        with gb.engine.connect() as connection:
            outer = connection.begin()
            gb.db = scoped_session(
                sessionmaker(bind=connection, autoflush=True, join_transaction_mode="rollback_only")
            )
            try:
                yield gb
                gb.db.flush()
                outer.commit()
            except BaseException:
                with contextlib.suppress(Exception):  # the connection may be broken already
                    outer.rollback()
                raise
            finally:
                gb.db.remove()
                gb.db = plain

    def discard(self) -> None:
        """Roll back what is not committed, and close the gradebook."""
        if self._gradebook is not None:
            gb, self._gradebook = self._gradebook, None
            with contextlib.suppress(Exception):  # the connection may be broken already
                gb.db.rollback()
            with contextlib.suppress(Exception):
                gb.close()

    close = discard

    def __enter__(self) -> OpenGradebook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def while_locked(
    action: Callable[[], T],
    books: OpenGradebook,
    wait: float,
    notify: Callable[[str], None],
    verb: str = "read",
) -> T:
    """``action()``, run again with a growing pause while another program keeps the
    gradebook locked, for at most ``wait`` seconds; then :class:`RecordError`.

    After any error the gradebook is discarded, so that each attempt opens it anew.
    """
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own session warnings
    url = books.url
    started, pause = time.monotonic(), 0.5
    while True:
        try:
            return action()
        except Exception as exc:
            books.discard()
            if is_disk_full(exc):
                raise RecordError(f"the disk is full: cannot {verb} the gradebook {url}") from exc
            if not _locked(exc):
                raise
            waited = time.monotonic() - started
            if waited >= wait:
                raise RecordError(
                    f"the gradebook {url} stayed locked by another program for {waited:.0f} s "
                    f"(limit {wait:g} s, --gradebook-wait); close what holds it (the formgrader?)"
                ) from exc
            pause = min(2 * pause, 10.0, max(wait - waited, 0.1))
            notify(
                f"the gradebook is locked by another program (the formgrader?); waited "
                f"{waited:.0f} s, retrying in {pause:.0f} s (for at most {wait:g} s in all)"
            )
            time.sleep(pause)


def _locked(exc: BaseException) -> bool:
    """True when sqlite said the database is locked (nbgrader may wrap its error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if "database is locked" in str(seen) or "database table is locked" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
