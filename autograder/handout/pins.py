"""What a learner installs: this package's own dependencies, pinned to the installed versions.

A learner's environment is the one ``make`` builds in ``.venv-learner`` and the browser
tests serve the lab from: ``pip install`` of this package without its extras.  The kit
hands out the same set without the package itself: every distribution that its
dependencies (not its ``[test]``, ``[dask]`` or ``[postgres]`` extras) require, and theirs,
each pinned to the version installed in the running environment.  Nothing is typed by
hand, so the pins follow ``pyproject.toml`` and whatever ``make`` installed.

Requirements are followed as pip follows them: extras (``jsonschema[format-nongpl]``)
bring their own requirements, and environment markers are evaluated for Linux, macOS and
Windows in turn.  A distribution needed on some of them only is pinned with a
``sys_platform`` marker.  One needed only on a platform other than this one (``pywinpty``
on Windows, say) is not installed here, so it has no version to pin: pip chooses it there,
as its parent requires.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from autograder.course import UsageError

#: The distribution whose dependencies a learner installs.
PROJECT = "specdec-course"

#: ``sys_platform`` and the markers that go with it, for each platform learners use.
PLATFORMS = {
    "linux": {"sys_platform": "linux", "os_name": "posix", "platform_system": "Linux"},
    "darwin": {"sys_platform": "darwin", "os_name": "posix", "platform_system": "Darwin"},
    "win32": {"sys_platform": "win32", "os_name": "nt", "platform_system": "Windows"},
}


@dataclass(frozen=True)
class Pin:
    """One pinned distribution: its name, its installed version, the platforms needing it."""

    name: str  #: canonical (PEP 503) name
    version: str
    platforms: frozenset[str]  #: keys of :data:`PLATFORMS`

    @property
    def line(self) -> str:
        """The requirement line: ``name==version``, with a marker unless every platform needs it."""
        text = f"{self.name}=={self.version}"
        if self.platforms == frozenset(PLATFORMS):
            return text
        absent = sorted(set(PLATFORMS) - self.platforms)
        if len(absent) == 1:
            return f'{text}; sys_platform != "{absent[0]}"'
        return text + "; " + " or ".join(f'sys_platform == "{p}"' for p in sorted(self.platforms))


@dataclass(frozen=True)
class Pins:
    """What a learner installs, and the Python it was tested with."""

    pins: tuple[Pin, ...]  #: sorted by name
    python: str  #: ``major.minor`` of the running interpreter

    @property
    def lines(self) -> list[str]:
        return [pin.line for pin in self.pins]


def learner_pins(project: str = PROJECT) -> Pins:
    """The pins of everything ``project`` requires, without its extras, as installed here.

    Raises :class:`~autograder.course.UsageError` when ``project`` is not installed in the
    running environment (its requirements are read from its installed metadata).
    """
    try:
        roots = _requirements(metadata.distribution(project))
    except metadata.PackageNotFoundError:
        raise UsageError(
            f"{project} is not installed in the environment of {sys.executable}: "
            "run `make`, or `pip install -e .` in the course, to hand out its pinned "
            "dependencies"
        ) from None
    needed: dict[str, set[str]] = {}
    for name in PLATFORMS:
        for dist in _closure(roots, _environment(name)):
            needed.setdefault(dist, set()).add(name)
    pins = tuple(
        Pin(dist, metadata.distribution(dist).version, frozenset(platforms))
        for dist, platforms in sorted(needed.items())
    )
    return Pins(pins, ".".join(platform.python_version_tuple()[:2]))


def _environment(name: str) -> dict[str, str]:
    """The marker environment of this Python on platform ``name``."""
    return {**default_environment(), **PLATFORMS[name]}


def _requirements(dist: metadata.Distribution) -> list[Requirement]:
    """``dist``'s requirements, extras' included (their marker says ``extra == ...``)."""
    return [Requirement(text) for text in dist.requires or ()]


def _installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def _closure(roots: list[Requirement], environment: dict[str, str]) -> set[str]:
    """The canonical names of the installed distributions ``roots`` need on ``environment``.

    A requirement whose marker is false there is left out; one that is not installed here
    (another platform's) ends its branch.
    """
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(req, "") for req in roots]  # (requirement, the extra its parent was asked for)
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**environment, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        dist = _installed(name)
        if dist is None:
            continue
        found.add(name)
        for sub in _requirements(dist):
            todo += [(sub, "")] + [(sub, e) for e in req.extras]
    return found
