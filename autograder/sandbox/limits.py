"""What the sandbox gives a kernel: its resource limits and the fixed paths inside it."""

from __future__ import annotations

from dataclasses import dataclass

#: Where the kernel's sockets and connection file live inside the sandbox.
INNER_RUN = "/run/specdec"


#: The directory inside the sandbox that holds the reference package (on PYTHONPATH).
INNER_REFERENCE = "/opt/specdec"


#: The kernel's home inside the sandbox (on the /tmp tmpfs).
INNER_HOME = "/tmp/home"


#: The unprivileged uid/gid the kernel runs as when the grader is root.
SANDBOX_UID = 65534


#: Environment variable telling the kernel-side integrity monitor its evidence fd.
EVIDENCE_FD_ENV = "SPECDEC_EVIDENCE_FD"


#: Per-job directory (under the job dir) for sandbox runtime files.
RUNTIME_DIR = ".sandbox"


#: Environment variable that marks the processes a grading job starts (see
#: :mod:`autograder.grading.processes`).
JOB_MARKER_ENV = "SPECDEC_GRADE_JOB"


#: Variables passed from the grader's environment into the sandbox (all others dropped).
PASSED_ENV = ("NBGRADER_EXECUTION", "SPECDEC_GRADE_JOB", "LANG", "LC_ALL", "TZ")


#: Cap on the integrity evidence the grader keeps from one kernel.
MAX_EVIDENCE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's kernel (and everything it starts)."""

    memory_bytes: int = 2 * 1024**3  #: address space per process (RLIMIT_AS)
    cpu_seconds: int = 300  #: CPU time per process (RLIMIT_CPU)
    max_processes: int = 64  #: processes and threads in the sandbox (RLIMIT_NPROC)
    file_size_bytes: int = 64 * 1024**2  #: largest file it may write (RLIMIT_FSIZE)
    scratch_bytes: int = 256 * 1024**2  #: size of each writable tmpfs (cwd, /tmp)
