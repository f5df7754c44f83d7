"""A throwaway PostgreSQL server for the gradebook tests: real ``postgres``, local only.

Debian's ``postgresql`` package (installed by ``scripts/install-system-deps.sh``) puts
its programs in ``/usr/lib/postgresql/<major>/bin``, outside ``PATH``.  The server runs
in a fresh data directory under ``/tmp``, listens on a free port of 127.0.0.1 only
(its Unix socket in the same directory), trusts local connections, and is stopped
and removed by :meth:`PostgresServer.stop`.  ``initdb`` refuses to run as root, so a
root test suite runs the server's programs as ``nobody``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from support.processes import free_port

SERVER_USER = "nobody"  #: who runs the server when the tests run as root
SUPERUSER = "postgres"  #: the database role initdb creates


def postgres_bindir() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres`` (newest major version)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")
    if not candidates:
        raise RuntimeError(
            "PostgreSQL is not installed: run `bash scripts/install-system-deps.sh` "
            "(Debian package postgresql)"
        )
    newest = max(candidates, key=lambda p: int(Path(p).parents[1].name.split(".")[0]))
    return Path(newest).parent


@dataclass
class PostgresServer:
    """A running server: its data directory, port, and how to reach it."""

    root: Path  #: the temporary directory holding the data directory, socket and log
    port: int
    bindir: Path
    as_user: list[str]  #: command prefix that runs a program as the server's owner

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL for ``database`` (psycopg, the `postgresql://` default driver)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                self.as_user
                + [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast"]
                + ["-w", "stop"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """Initialise a data directory and start a server on a free loopback port."""
    bindir = postgres_bindir()
    root = Path(tempfile.mkdtemp(prefix="specdec-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", SERVER_USER, "--"]
    env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
    server = PostgresServer(root=root, port=0, bindir=bindir, as_user=as_user)
    try:
        _run(
            as_user
            + [str(bindir / "initdb"), "-D", str(server.data), "-U", SUPERUSER]
            + ["--auth=trust", "--encoding=UTF8", "--no-sync"],
            env,
        )
        for _attempt in range(3):  # a port taken between the probe and the bind: try another
            server.port = free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {server.port} -k {root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            )
            proc = subprocess.run(
                as_user
                + [str(bindir / "pg_ctl"), "-D", str(server.data), "-l", str(server.log)]
                + ["-o", options, "-w", "-t", "60", "start"],
                env=env,
                capture_output=True,
                text=True,
                timeout=90,
            )
            if proc.returncode == 0:
                return server
        log = server.log.read_text(errors="replace") if server.log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {proc.stderr}\n{log[-2000:]}")
    except BaseException:
        server.stop()
        raise


def _run(argv: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n"
            f"{_diagnosis(env)}"
        )


def _diagnosis(env: dict[str, str]) -> str:
    """What the command inherited that could end it: this process's limits, and markers."""
    import resource

    limits = {
        name: resource.getrlimit(getattr(resource, name))
        for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE")
    }
    marked = {k: v for k, v in env.items() if k.startswith("SPECDEC")}
    return f"inherited limits {limits}; specdec variables {marked}"
