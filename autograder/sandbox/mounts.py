"""What the sandbox shows a kernel from the host: the paths it binds, and where they come from.

The Python installation (:func:`python_mounts`), the files next to the notebook
(:func:`visible_entries`), copies of the reference package and of matplotlib's font cache,
and the host folder for mount points when the grader is root (:func:`scratch_root`).
"""

from __future__ import annotations

import compileall
import functools
import importlib.util
import os
import shutil
import stat
import sys
from pathlib import Path

import psutil


def scratch_root() -> str:
    """``/tmp/specdec-sandbox``: mount points reachable by the sandbox's unprivileged user.

    Directories left by a grader process that died (named after its pid) are removed.
    Falls back to ``/tmp`` if the folder is not a plain directory of ours.
    """
    root = "/tmp/specdec-sandbox"
    try:
        os.mkdir(root, 0o755)
    except FileExistsError:
        pass
    except OSError:
        return "/tmp"
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return "/tmp"  # a symlink or someone else's folder: do not use (or clean) it
    os.chmod(root, 0o755)
    for entry in os.scandir(root):
        owner = entry.name.split("-")[0]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            shutil.rmtree(entry.path, ignore_errors=True)
    return root


def visible_entries(cwd: Path) -> list[Path]:
    """What a sandboxed kernel sees, read-only, next to its notebook in ``cwd``.

    Not the notebooks (they hold the hidden tests), dotfiles, symlinks or special files.
    """
    return [
        entry
        for entry in sorted(Path(cwd).iterdir())
        if entry.suffix != ".ipynb"
        and not entry.name.startswith(".")
        and not entry.is_symlink()
        and (entry.is_file() or entry.is_dir())
    ]


def python_mounts() -> list[tuple[str, str]]:
    """(host source, path in the sandbox) for the Python installation a kernel runs on.

    Each prefix (base installation, virtualenv) is bound at its real path and, when it is
    reached through a symlink, at the path Python reports too (a kernel started as
    ``<venv>/bin/python`` looks for its libraries there).  The directory of the real
    interpreter is added when it lies outside every prefix.  Paths under ``/usr``, which
    the sandbox shows whole, are left out.
    """
    wanted: dict[str, str] = {}
    prefixes = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix}
    for path in sorted(prefixes):
        real = os.path.realpath(path)
        for dest in dict.fromkeys([real, os.path.abspath(path)]):
            if not _under(dest, "/usr"):
                wanted[dest] = real
    interpreter = os.path.dirname(os.path.realpath(sys.executable))
    if not any(_under(interpreter, dest) for dest in [*wanted, "/usr"]):
        wanted[interpreter] = interpreter
    # Parents before children: a bind inside a bound tree must come after it.
    return [(wanted[dest], dest) for dest in sorted(wanted, key=lambda d: (d.count("/"), d))]


def _under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or inside it (as written: no symlink is resolved)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def copy_package(name: str, dest_root: Path) -> Path:
    """Copy the importable package ``name``, with its modules compiled to bytecode.

    The copy is read-only inside the sandbox, where a kernel cannot write the bytecode
    cache, so it is compiled here (against the copy's sources, whose times ``copytree``
    keeps), once per copy: a warm parent's, which all its forked kernels import from, or a
    fresh kernel's own (there it costs the grader about what it saves the kernel).
    """
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the package {name!r} to put in the sandbox")
    source = Path(list(spec.submodule_search_locations)[0])
    dest = dest_root / name
    if not dest.exists():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("*.so.tmp", ".*"))
        compileall.compile_dir(str(dest), quiet=2)
    for path in [dest, *dest.rglob("*")]:
        mode = 0o755 if path.is_dir() else 0o644
        os.chmod(path, mode)
    return dest


@functools.cache
def matplotlib_font_cache() -> Path | None:
    """The grader's matplotlib font cache, copied into each sandbox (no kernel builds its own)."""
    # Imported here, deliberately: matplotlib is heavy, only this needs it, and importing
    # font_manager is what builds the cache (once, when the first kernel starts).
    try:
        from matplotlib import font_manager
    except Exception:  # matplotlib missing or broken: kernels rebuild their own cache
        return None
    import matplotlib

    path = (
        Path(matplotlib.get_cachedir()) / f"fontlist-v{font_manager.FontManager.__version__}.json"
    )
    return path if path.is_file() else None
