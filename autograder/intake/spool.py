"""Where a collected class's notebooks wait to be graded: in a file with no name, not in memory.

A class of 10,000 notebooks of 80 KB is 800 MB.  The collector puts each notebook it
admits into the run's :class:`Spool` as it reads it, and keeps a :class:`Spooled`
handle instead of the bytes: where they are, how many, and their SHA-256.  They are
read back when they are needed (their job is sent to a worker, they are copied to
``submitted/``), so the grader's memory does not grow with the class.

The spool is an unlinked temporary file (``tempfile.TemporaryFile``): nothing else can
open it, nothing is left behind however the grader stops, and what a student's file
becomes after it was read does not change what is graded.  ``grade`` puts it in the
course folder, whose disk holds the gradebook anyway, rather than in ``/tmp``, which is
memory on systems that mount it as ``tmpfs``.  When the spool cannot be written (a full
disk), the bytes stay in memory, as they would without it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path


class Spool:
    """One collection's notebooks, one after another in an unlinked temporary file.

    The file is closed when the spool is closed or no longer referenced (every
    :class:`Spooled` handle refers to its spool).
    """

    def __init__(self, folder: Path | None = None) -> None:
        """A new, empty spool in ``folder`` (default, or when it refuses: the temporary
        folder)."""
        try:
            self._file = tempfile.TemporaryFile(prefix=".specdec-spool-", dir=folder)
        except OSError:
            self._file = tempfile.TemporaryFile(prefix=".specdec-spool-")
        self._end = 0
        self._lock = threading.Lock()  # put() from the collector, read() from anywhere
        self._closer = weakref.finalize(self, self._file.close)

    def put(self, data: bytes) -> Spooled | bytes:
        """Keep ``data`` in the spool and return its handle; ``data`` itself if the spool
        cannot take it (its disk is full)."""
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            offset = self._end
            try:
                written = os.pwrite(self._file.fileno(), data, offset)
                while written < len(data):
                    written += os.pwrite(self._file.fileno(), data[written:], offset + written)
            except OSError:
                return data
            self._end = offset + len(data)
        return Spooled(self, offset, len(data), digest)

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset``."""
        parts, done = [], 0
        while done < size:
            chunk = os.pread(self._file.fileno(), size - done, offset + done)
            if not chunk:
                raise OSError(f"the spool ends {size - done} bytes early")
            parts.append(chunk)
            done += len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        self._closer()


@dataclass(frozen=True)
class Spooled:
    """A notebook's bytes, kept in a :class:`Spool`; equal to another when their bytes are."""

    spool: Spool = field(repr=False, compare=False)
    offset: int = field(repr=False, compare=False)
    size: int
    sha256: str

    def read(self) -> bytes:
        return self.spool.read(self.offset, self.size)


Content = bytes | Spooled


def content_size(content: Content | None) -> int:
    """How many bytes (0 for None)."""
    return content.size if isinstance(content, Spooled) else len(content or b"")


class HoldsContent:
    """What holds a file's ``content`` (its bytes, a spooled handle, or None): the bytes,
    and their SHA-256 without reading them again."""

    content: Content | None

    @property
    def data(self) -> bytes | None:
        """The bytes (read from the spool each time, when spooled); None if not read."""
        content = self.content
        return content.read() if isinstance(content, Spooled) else content

    @property
    def sha256(self) -> str:
        """The SHA-256 of the bytes (of nothing, for None)."""
        content = self.content
        if isinstance(content, Spooled):
            return content.sha256
        return hashlib.sha256(content or b"").hexdigest()
