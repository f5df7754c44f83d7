"""Run learner kernels in a bubblewrap sandbox with resource limits.

Every submission's Jupyter kernel runs as an unprivileged user in its own user, mount,
pid, network, IPC and UTS namespaces (bubblewrap, ``bwrap``), under rlimits set by
``prlimit``.  Inside, the kernel sees:

* read-only: ``/usr`` (and the ``/bin``, ``/lib*`` links), the Python installation and
  the virtualenv at their usual paths, and a copy of the reference package at
  :data:`INNER_REFERENCE` (readable only while a test cell runs, when grading as root);
* read-write, size-capped tmpfs: ``/tmp`` (its home), and its working directory, which
  has the notebook's path (so relative paths behave) and shows the files next to the
  notebook read-only, but not the notebooks themselves (they hold the hidden tests);
* nothing else: not the course (``source/``, ``release/``, ``gradebook.db``, other
  students' ``submitted/``), not the instructor's home, not other workers' jobs.

It has no network at all, not even the host's loopback.  The grader talks to the
kernel over ZeroMQ ``ipc`` sockets that the kernel creates inside its own tmpfs; the
grader reaches them through ``/proc/<pid>/root``, so nothing on the host is writable
from inside.

When the grader runs as root, the kernel runs as uid 65534 (``nobody``): the launch goes
through ``unshare --mount`` (a private mount namespace, invisible to the host, where the
paths an unprivileged user cannot reach are bind-mounted to reachable mount points) and
``setpriv`` (drop to the unprivileged uid) before ``bwrap``.  Otherwise it runs as the
grader's own uid, mapped into a user namespace.

By default a worker does not start Python afresh for each kernel: it forks the kernel
from a *warm parent* (:mod:`~autograder.sandbox.warm`), a Python in a sandbox of its own
that has already imported ipykernel, and numpy and matplotlib when the assignment does.
Each forked kernel gets new mount, pid, IPC, network and UTS namespaces, fresh tmpfs
mounts, the same limits and no capabilities, before any learner code runs.

The worker calls :func:`configure` on the job's nbgrader config and passes its
``Execute`` class through :func:`executor`; nbgrader then creates a
:class:`SandboxedKernelManager` for each notebook.  :func:`kill_leftovers`
cleans up after a job.  Every launch starts under :mod:`~autograder.sandbox.tether`, so a
sandbox never outlives the worker that started it.  See ``SECURITY.md`` for what this
does and does not prevent.

* :mod:`~autograder.sandbox.check`: whether the sandbox can run on this machine;
* :mod:`~autograder.sandbox.limits`: the resource limits and the fixed paths inside;
* :mod:`~autograder.sandbox.mounts`: the host paths the sandbox binds, and their sources;
* :mod:`~autograder.sandbox.launch`: one sandboxed process, its ``bwrap`` command line;
* :mod:`~autograder.sandbox.tether`: the first process of every launch;
* :mod:`~autograder.sandbox.executor`: nbgrader's config and ``Execute`` class for a job;
* :mod:`~autograder.sandbox.kernel_manager`: starts each kernel in the sandbox;
* :mod:`~autograder.sandbox.kernel_client`: talks to a sandboxed kernel, ready when it is;
* :mod:`~autograder.sandbox.warm_parent`: the Python inside a sandbox that forks kernels;
* :mod:`~autograder.sandbox.warm`: the grader's side of the warm parent;
* :mod:`~autograder.sandbox.cleanup`: finds and kills what a job's sandboxes left running.
* :mod:`~autograder.sandbox.proctree`: the host's processes as a tree, read cheaply again.
"""

from autograder.sandbox.check import sandbox_problem
from autograder.sandbox.cleanup import kill_leftovers, kill_with_sandboxes, members, running
from autograder.sandbox.executor import configure, executor
from autograder.sandbox.kernel_manager import JobKernels, SandboxedKernelManager
from autograder.sandbox.limits import INNER_REFERENCE, SANDBOX_UID, Limits
from autograder.sandbox.mounts import python_mounts, visible_entries
from autograder.sandbox.proctree import ProcessTree
from autograder.sandbox.warm import WarmParents, preload_for

__all__ = [
    "INNER_REFERENCE",
    "SANDBOX_UID",
    "JobKernels",
    "Limits",
    "ProcessTree",
    "SandboxedKernelManager",
    "WarmParents",
    "configure",
    "executor",
    "kill_leftovers",
    "kill_with_sandboxes",
    "members",
    "preload_for",
    "python_mounts",
    "running",
    "sandbox_problem",
    "visible_entries",
]
