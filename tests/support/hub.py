"""A throwaway JupyterHub class on 127.0.0.1: accounts, exchange, hub, proxy, single-user servers.

Everything a test makes lives under one temporary folder (the class's *root*): the hub's
state, the exchange, the course, the learners' Jupyter configuration and Python, and each
learner's home.  The learners are real local users (the hub's `LocalProcessSpawner` runs
each learner's server as that user, so nbgrader names each student by it), created with
``useradd`` and removed with ``userdel``: the test runs as root.  The instructor is a hub
administrator whose nbgrader and ``specdec-course`` commands run as root, in this
environment.  :func:`hub_class` stops the hub, ends the learners' processes, removes the
accounts and deletes the folder when it ends, whatever happened.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from autograder.lab import LEARNER_CONFIG
from support.processes import end_session, free_port, wait_until_answers

BIN = Path(sys.executable).parent
#: ``configurable-http-proxy``, installed by ``make`` into the virtual environment.
PROXY = BIN / "configurable-http-proxy"
#: The GECOS field of every account a test creates: what :func:`remove_accounts` removes.
ACCOUNT_COMMENT = "specdec-course hub test account"
HUB_START_TIMEOUT = 90.0  # seconds; the hub, its database and the proxy, two busy cores

#: The learners' nbgrader server extensions on the hub (``docs/jupyterhub.md``): the
#: Assignments panel and Validate on, the instructor's formgrader and course list off.
LEARNER_SERVER_EXTENSIONS = {
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.formgrader": False,
}
#: The learners' JupyterLab plugins turned off on the hub: the instructor's panels.
LEARNER_DISABLED_PLUGINS = (
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:formgrader",
)
#: JupyterLab settings for the tests: render every cell, so cell i of the page is cell i
#: of the file (as ``support.browser`` sets for the lab tests).
TEST_LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


# --------------------------------------------------------------------------- accounts


@dataclass(frozen=True)
class Account:
    """A local user of the class: its name (the hub's and nbgrader's) and its home."""

    name: str
    home: Path

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.name).pw_uid

    @property
    def gid(self) -> int:
        return pwd.getpwnam(self.name).pw_gid


def create_account(name: str, home: Path) -> Account:
    """Create the local user ``name`` with its own group and its home at ``home``."""
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--user-group"]
        + ["--shell", "/bin/bash", "--comment", ACCOUNT_COMMENT, name],
        check=True,
        capture_output=True,
    )
    home.chmod(0o700)  # a learner's files are that learner's own
    return Account(name, home)


def remove_accounts(accounts: Sequence[Account]) -> None:
    """Kill what still runs as ``accounts`` (the processes their servers started), then
    remove the users and their groups.  Only accounts with :data:`ACCOUNT_COMMENT`."""
    uids = set()
    for account in accounts:
        try:
            entry = pwd.getpwnam(account.name)
        except KeyError:
            continue
        if entry.pw_gecos == ACCOUNT_COMMENT:
            uids.add(entry.pw_uid)
    leftovers = [p for p in psutil.process_iter(["uids"]) if p.info["uids"].real in uids]
    for process in leftovers:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(leftovers, timeout=10)
    for account in accounts:
        try:
            if pwd.getpwnam(account.name).pw_gecos != ACCOUNT_COMMENT:
                continue
        except KeyError:
            continue
        subprocess.run(["userdel", account.name], check=True, capture_output=True)


def give(account: Account, path: Path) -> None:
    """Make ``account`` the owner of ``path`` and of everything under it."""
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, account.uid, account.gid, follow_symlinks=False)


def write_lab_settings(account: Account) -> None:
    """Write :data:`TEST_LAB_SETTINGS` into the account's own JupyterLab user settings."""
    settings = account.home / ".jupyter" / "lab" / "user-settings"
    for name, value in TEST_LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    give(account, account.home / ".jupyter")


# --------------------------------------------------------------------------- configuration


def _runnable_by_everyone(path: Path) -> bool:
    """True when any user can run ``path``: it and every folder above it are executable."""
    real = path.resolve()
    for item in [real, *real.parents]:
        if not item.exists() or not item.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def _share(source: Path, target: Path) -> None:
    """Put the tree at ``source`` at ``target``, readable by every user, without copying data.

    A file that every user can already read is hard-linked (the same file system, as a
    temporary folder beside the clone usually is) or else copied; any other file is copied
    and opened to reading.  Folders are opened to traversal.  The original tree is not
    touched: it may sit in a folder the learners cannot enter, as ``mktemp -d`` makes it.
    """

    def place(src: str, dst: str) -> None:
        readable = os.stat(src).st_mode & stat.S_IROTH
        try:
            if not readable:
                raise PermissionError(src)
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
            os.chmod(dst, os.stat(dst).st_mode | stat.S_IROTH | stat.S_IRGRP)

    shutil.copytree(
        source,
        target,
        symlinks=True,
        copy_function=place,
        # the editable install points into the clone, which the learners need not reach
        ignore=shutil.ignore_patterns("_editable_impl_*.pth", "__editable__*"),
    )
    for folder, _, _ in os.walk(target):
        os.chmod(folder, 0o755)


def learner_python(folder: Path) -> Path:
    """A virtual environment at ``folder`` that the learners' accounts can run; its python.

    It has this environment's packages, placed in ``folder`` (hard links where possible),
    on an interpreter that every user can run: this environment's own base interpreter when
    it can, else the system's Python of the same version (a base installed in root's home,
    as pyenv does, is closed to other users).  Nothing of it points back into the clone,
    which may be closed to other users, as a checkout under ``mktemp -d`` is; a hub's
    administrator does the same when installing the course's environment for all users.
    Its ``share/jupyter`` and ``etc/jupyter`` are this environment's, so the learners'
    servers find the same JupyterLab extensions, kernels and server settings.
    """
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(getattr(sys, "_base_executable", sys.executable))]
    candidates += [Path("/usr/bin") / version, Path("/usr/local/bin") / version]
    base = next((c for c in candidates if c.exists() and _runnable_by_everyone(c)), None)
    if base is None:
        raise RuntimeError(
            f"no {version} that every user can run (tried {', '.join(map(str, candidates))}): "
            f"install Debian's {version} (apt-get install {version})"
        )
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder)], check=True)
    site_packages = folder / "lib" / version / "site-packages"
    shutil.rmtree(site_packages)
    _share(Path(sysconfig.get_paths()["purelib"]), site_packages)
    for sub in ("share/jupyter", "etc/jupyter"):
        if (Path(sys.prefix) / sub).is_dir():
            _share(Path(sys.prefix) / sub, folder / sub)
    python = folder / "bin" / "python"
    if not _runnable_by_everyone(python) or not _runnable_by_everyone(site_packages):
        raise RuntimeError(f"the learners cannot run {python} with {site_packages}")
    return python


def write_learner_config(folder: Path, course_config: Path, exchange: Path) -> Path:
    """The learners' Jupyter configuration folder (``JUPYTER_CONFIG_PATH`` of their servers).

    It holds the course's ``nbgrader_config.py`` with the exchange added (Validate and the
    Assignments panel read it), the nbgrader server extensions of
    :data:`LEARNER_SERVER_EXTENSIONS`, the plugins of :data:`LEARNER_DISABLED_PLUGINS` turned
    off, and the lab's own settings overrides (no news pop-up).
    """
    folder.mkdir(parents=True)
    config = course_config.read_text(encoding="utf-8")
    config += f"\nc.Exchange.root = {str(exchange)!r}\n"
    (folder / "nbgrader_config.py").write_text(config, encoding="utf-8")
    (folder / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": LEARNER_SERVER_EXTENSIONS}}, indent=2)
    )
    labconfig = folder / "labconfig"
    labconfig.mkdir()
    disabled = {"disabledExtensions": dict.fromkeys(LEARNER_DISABLED_PLUGINS, True)}
    (labconfig / "page_config.json").write_text(json.dumps(disabled, indent=2))
    overrides = LEARNER_CONFIG / "labconfig" / "default_setting_overrides.json"
    shutil.copy2(overrides, labconfig / "default_setting_overrides.json")
    return folder


def hub_config(
    *,
    root: Path,
    ports: dict[str, int],
    learners: Sequence[str],
    instructor: str,
    passwords: dict[str, str],
    api_token: str,
    learner_config: Path,
    python: Path,
) -> str:
    """The text of ``jupyterhub_config.py`` for the class (see docs/jupyterhub.md)."""
    settings: dict[str, Any] = {
        "JupyterHub.ip": "127.0.0.1",
        "JupyterHub.port": ports["hub"],
        "JupyterHub.hub_ip": "127.0.0.1",
        "JupyterHub.hub_port": ports["hub_api"],
        "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{ports['proxy_api']}",
        "ConfigurableHTTPProxy.command": [str(PROXY)],
        "ConfigurableHTTPProxy.pid_file": str(root / "jupyterhub-proxy.pid"),
        "JupyterHub.db_url": f"sqlite:///{root / 'jupyterhub.sqlite'}",
        "JupyterHub.cookie_secret_file": str(root / "jupyterhub_cookie_secret"),
        "JupyterHub.pid_file": str(root / "jupyterhub.pid"),
        # A shared password for learners, another for the instructor (an admin): the
        # testing authenticator that replaces DummyAuthenticator's deprecated password.
        "JupyterHub.authenticator_class": "shared-password",
        "SharedPasswordAuthenticator.user_password": passwords["learner"],
        "SharedPasswordAuthenticator.admin_password": passwords["instructor"],
        "Authenticator.allowed_users": sorted(learners),
        "Authenticator.admin_users": [instructor],
        # Each learner's server runs as that learner's local user, in its home.
        "JupyterHub.spawner_class": "localprocess",
        "Spawner.cmd": [str(python), "-m", "jupyterhub.singleuser"],
        "Spawner.default_url": "/lab",
        "Spawner.environment": {
            "JUPYTER_CONFIG_PATH": str(learner_config),
            # The kernel's "python" is the learners' python.
            "PATH": os.pathsep.join([str(python.parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        },
        "Spawner.start_timeout": 120,
        "Spawner.http_timeout": 120,
        # The test's own client of the hub's REST API.
        "JupyterHub.services": [{"name": "class-test", "api_token": api_token}],
        "JupyterHub.load_roles": [
            {
                "name": "class-test",
                "scopes": ["admin:users", "admin:servers", "access:servers"],
                "services": ["class-test"],
            }
        ],
    }
    lines = ["c = get_config()  # noqa: F821"]
    lines += [f"c.{name} = {value!r}" for name, value in settings.items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the hub


@dataclass
class Hub:
    """A running JupyterHub (and its proxy), its address and its log."""

    process: subprocess.Popen
    port: int
    api_token: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        """Call ``path`` through the proxy with the test's token; the decoded JSON or None."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base_url}/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.api_token}"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def server(self, user: str) -> UserServer:
        return UserServer(self, user)

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the hub: it stops the single-user servers and the proxy it started."""
        end_session(self.process, grace=60)


@dataclass
class UserServer:
    """A learner's single-user server behind the hub, as ``support.browser`` drives a lab.

    The browser reaches it with the learner's login cookie; the test reads its files with
    the hub's API token (``access:servers``).
    """

    hub: Hub
    user: str

    @property
    def prefix(self) -> str:
        return f"user/{urllib.parse.quote(self.user)}"

    def url(self, path: str, *flags: str) -> str:
        """The browser URL of ``path`` (e.g. ``lab/tree/x.ipynb``) on this learner's server."""
        query = "&".join(flags)
        return f"{self.hub.base_url}/{self.prefix}/{path.lstrip('/')}" + (
            f"?{query}" if query else ""
        )

    def api(self, method: str, path: str, body: Any = None, timeout: float = 120) -> Any:
        return self.hub.api(method, f"{self.prefix}/{path.lstrip('/')}", body, timeout)


def start_hub(root: Path, config_text_for: Any) -> Hub:
    """Start ``jupyterhub`` in ``root`` with the config ``config_text_for(ports, token)``.

    One retry if the first start fails (a port taken in between, say).
    """
    for attempt in (1, 2):
        ports = {name: free_port() for name in ("hub", "hub_api", "proxy_api")}
        token = secrets.token_hex(32)
        config = root / "jupyterhub_config.py"
        config.write_text(config_text_for(ports, token))
        log_path = root / f"jupyterhub-{attempt}.log"
        env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [str(BIN / "jupyterhub"), "-f", str(config)],
                cwd=root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        hub = Hub(process, ports["hub"], token, log_path)
        if wait_until_answers(
            hub.process, partial(hub.api, "GET", "hub/api/", timeout=5), HUB_START_TIMEOUT
        ):
            return hub
        hub.stop()
    raise RuntimeError(f"JupyterHub did not start (twice); last log:\n{hub.log_tail()}")


@dataclass
class HubClass:
    """A class on a running hub: the instructor, the learners, the exchange, the course."""

    hub: Hub
    root: Path
    instructor: str
    learners: list[Account]
    exchange: Path
    course: Path
    learner_config: Path
    passwords: dict[str, str]


@contextmanager
def hub_class(course_src: Path, learners: Sequence[str], instructor: str) -> Iterator[HubClass]:
    """A running hub with the learners' local accounts, an exchange and a course.

    Parameters
    ----------
    course_src : Path
        The course to copy (``nbgrader_config.py``, ``source/``, ``release/``).
    learners : sequence of str
        The learners' names, before this run's suffix.
    instructor : str
        The instructor's hub name (an administrator; no local account).

    Yields
    ------
    HubClass
        The running class.

    Notes
    -----
    ``course_src`` is copied to ``course/`` (its ``nbgrader_config.py`` gets the
    exchange).  The exchange is a folder everyone can write to, with the sticky bit, as
    nbgrader's documentation describes.  The learners' names get a suffix of this run, so
    that two runs on one machine never share an account.  On leaving, whatever happened:
    the hub stops (and its servers and proxy), leftover processes of the learners are
    killed, their accounts are removed, and the root folder is deleted.
    """
    from support.browser import copy_course

    with ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="specdec-hub-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        root.chmod(0o755)  # the learners reach their homes and the exchange through it
        accounts: list[Account] = []
        stack.callback(remove_accounts, accounts)
        suffix = secrets.token_hex(2)
        (root / "home").mkdir(mode=0o755)
        for name in learners:
            unique = f"{name}-{suffix}"
            accounts.append(create_account(unique, root / "home" / unique))
            write_lab_settings(accounts[-1])

        exchange = root / "exchange"
        exchange.mkdir()
        exchange.chmod(0o1777)
        course = copy_course(course_src, root / "course")
        with open(course / "nbgrader_config.py", "a", encoding="utf-8") as fh:
            fh.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
        learner_config = write_learner_config(
            root / "learner-config", course_src / "nbgrader_config.py", exchange
        )
        python = learner_python(root / "learner-python")
        passwords = {"learner": secrets.token_hex(8), "instructor": secrets.token_hex(16)}

        def config_for(ports: dict[str, int], token: str) -> str:
            return hub_config(
                root=root,
                ports=ports,
                learners=[a.name for a in accounts],
                instructor=instructor,
                passwords=passwords,
                api_token=token,
                learner_config=learner_config,
                python=python,
            )

        hub = start_hub(root, config_for)
        stack.callback(hub.stop)
        yield HubClass(hub, root, instructor, accounts, exchange, course, learner_config, passwords)
