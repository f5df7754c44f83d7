"""Start the learner's JupyterLab on ``release/`` (``specdec-course lab``, ``make lab``).

Learners open the release notebooks, play with the widgets, fill in the stubs and press
nbgrader's *Validate* button.  The server listens on 127.0.0.1 only.

nbgrader's Validate handler reads ``nbgrader_config.py`` from the server's *working
directory*, not from its notebook root, so the server runs with the course root as its
working directory: validation then executes the notebook with the course's settings
(timeouts, warnings printed on stdout) exactly as the grader will.

A learner's lab shows a learner's tools only.  The folder ``lab_config/`` beside this
module is added to Jupyter's config path.  Its ``labconfig/page_config.json`` turns off
nbgrader's instructor panels (Create Assignment, Formgrader, Course List), the
Assignments panel, which needs an exchange that a learner's own machine has not got (a
course's JupyterHub serves it; see ``docs/jupyterhub.md``), and the Nbgrader menu that
offers them.  Its ``labconfig/default_setting_overrides.json`` turns off the news and
update pop-up.  Its ``nbgrader_config.json`` makes Validate skip the cells tagged as
demonstrations (:data:`autograder.demonstrations.DEMO_TAG`), the cells the grader skips.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autograder.course import find_course

#: The Jupyter config folder added to ``JUPYTER_CONFIG_PATH`` (see the module docstring).
LEARNER_CONFIG = Path(__file__).with_name("lab_config")

# The nbgrader server extension a learner uses here: the Validate button.  The others stay
# off: the formgrader would open (and create) the course's gradebook, the course list
# serves formgraders, and the assignment list needs nbgrader's exchange.
LEARNER_SERVER_EXTENSIONS = {
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.formgrader": False,
}


def lab_command(
    *,
    root: Path,
    port: int | None = None,
    open_browser: bool = True,
    extra_args: list[str] | None = None,
    python: str | None = None,
) -> list[str]:
    """Return the command line that starts JupyterLab for learners.

    Parameters
    ----------
    root : Path
        The notebook root shown in the file browser (``release/`` for ``make lab``).
    port : int, optional
        The port on 127.0.0.1; by default Jupyter picks 8888 or the next free one.
    open_browser : bool
        Whether Jupyter opens the learner's web browser.
    extra_args : list of str, optional
        More ``--Class.trait=value`` options (the browser tests set private settings
        and workspace folders).
    python : str, optional
        The interpreter of the environment that serves the lab (default: this one).

    Returns
    -------
    list of str
        ``python -m jupyterlab ...``.
    """
    argv = [
        python or sys.executable,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--ServerApp.open_browser={open_browser}",
        # No calls home: no news feed, no update check.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    argv += [
        f"--ServerApp.jpserver_extensions={name}={enabled}"
        for name, enabled in LEARNER_SERVER_EXTENSIONS.items()
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Jupyter refuses to run as root unless told; containers often run as root, and
        # the server is reachable from this machine only, behind a token.
        argv.append("--ServerApp.allow_root=True")
    if port is not None:
        # An explicit port is a promise: fail rather than silently move elsewhere.
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    return argv + list(extra_args or [])


def lab_environment(
    extra: Mapping[str, str] | None = None, python: str | None = None
) -> dict[str, str]:
    """Return the server's environment: the interpreter's ``bin/`` first on ``PATH``, and
    :data:`LEARNER_CONFIG` first on ``JUPYTER_CONFIG_PATH``.

    ``make lab`` runs ``.venv-learner/bin/specdec-course`` without activating the virtual
    environment; nbgrader still finds its ``alembic`` helper and Jupyter its kernels.
    ``extra`` variables are added (the tests move Jupyter's runtime folder).  ``python``
    is the serving interpreter (default: this one).
    """
    env = dict(os.environ)
    bindir = str(Path(python or sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    config_path = [str(LEARNER_CONFIG), env.get("JUPYTER_CONFIG_PATH", "")]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in config_path if p)
    env.update(extra or {})
    return env


def start_lab(
    *,
    course: Path,
    root: Path | None = None,
    port: int | None = None,
    token: str | None = None,
    open_browser: bool = True,
    extra_args: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    **popen_kwargs: Any,
) -> subprocess.Popen:
    """Start the learner's JupyterLab in the background and return its process.

    The server runs with the course root as its working directory, where nbgrader's
    Validate handler reads ``nbgrader_config.py``.  ``root`` is the notebook root
    (default: ``course/release``).  ``token`` is the login token (passed in the
    environment, not on the command line; by default Jupyter makes one up and prints
    the URL).  ``python`` is the interpreter of the environment that serves the lab
    (default: this one).  The other parameters are those of `lab_command`, ``env`` those
    of `lab_environment`, and ``popen_kwargs`` go to `subprocess.Popen`.
    """
    argv = lab_command(
        root=root if root is not None else course / "release",
        port=port,
        open_browser=open_browser,
        extra_args=extra_args,
        python=python,
    )
    env = dict(env or {})
    if token is not None:
        env["JUPYTER_TOKEN"] = token
    return subprocess.Popen(argv, cwd=course, env=lab_environment(env, python), **popen_kwargs)


def lab(*, course: Path, port: int | None = None, open_browser: bool = True) -> int:
    """Run JupyterLab on the course's ``release/`` folder until the learner stops it.

    Parameters
    ----------
    course : Path
        The course root (holds ``nbgrader_config.py``, ``source/`` and ``release/``).
    port : int, optional
        The port on 127.0.0.1; by default 8888 or the next free one.
    open_browser : bool
        Whether to open the learner's web browser on the lab.

    Returns
    -------
    int
        JupyterLab's exit status (0 after a normal shutdown), or 2 without ``release/``.
    """
    course = find_course(course)
    if not (course / "release").is_dir():
        print(f"no {course / 'release'}: run `specdec-course release --all` first", file=sys.stderr)
        return 2
    server = start_lab(course=course, port=port, open_browser=open_browser)
    while True:
        try:
            status = server.wait()
            break
        except KeyboardInterrupt:
            # JupyterLab got the same Ctrl-C (same process group): it asks to confirm,
            # then shuts its kernels down.  Wait for it rather than kill it.
            continue
    # Stopped with Ctrl-C (or by the system): a normal end of a lab session.
    return 0 if status in (-signal.SIGINT, -signal.SIGTERM) else status
