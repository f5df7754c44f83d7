"""Whether the sandbox can run on this machine (a tiny sandboxed Python, once per process)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.sandbox.launch import Launch
from autograder.sandbox.limits import Limits
from autograder.sandbox.mounts import scratch_root


@functools.cache
def sandbox_problem() -> str | None:
    """Return None when the sandbox works on this machine, else the reason it does not.

    Runs a tiny sandboxed Python once per process (about 50 ms) with the same mounts,
    user switch and limits that kernels get.
    """
    if sys.platform != "linux":
        return f"the sandbox needs Linux (this is {sys.platform})"
    tools = ["bwrap", "prlimit"] + (["unshare", "setpriv", "mount"] if os.geteuid() == 0 else [])
    missing = [t for t in tools if shutil.which(t) is None]
    if "bwrap" in missing:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if missing:
        return f"missing util-linux tools: {', '.join(missing)} (apt-get install util-linux)"
    with tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-check-", dir=scratch_root()) as tmp:
        cwd = Path(tmp) / "work"
        cwd.mkdir()
        launch = Launch(
            run_dir=Path(tmp) / "run",
            cwd=cwd,
            limits=Limits(),
            command=[sys.executable, "-c", "import sys; print('sandbox-ok')"],
        )
        try:
            proc = subprocess.run(
                launch.argv,
                pass_fds=launch.pass_fds,
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
                env=launch.outer_env,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start: {exc}"
        finally:
            launch.close()
        if proc.returncode != 0 or "sandbox-ok" not in proc.stdout:
            detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
            return (
                f"bubblewrap cannot create the sandbox here ({detail.splitlines()[-1]}); "
                "unprivileged user namespaces may be disabled "
                "(sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)"
            )
    return None
