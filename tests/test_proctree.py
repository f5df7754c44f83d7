"""ProcessTree finds the descendants that psutil finds, also after a re-parenting."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from autograder.sandbox.proctree import ProcessTree, parent_of

#: A process that starts a child, which starts a grandchild; it prints both pids and
#: waits.  With ``subreaper`` it is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``),
#: as a sandbox's init is for its namespace: when the child exits, the grandchild becomes
#: its own child.  Told ``exit`` on its input, it ends the child.
FAMILY = """
import ctypes, subprocess, sys, time
if sys.argv[1] == "subreaper":
    assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; g = subprocess.Popen(['sleep', '60']); "
    "print(g.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
print(child.pid, child.stdout.readline().decode().strip(), flush=True)
assert sys.stdin.readline().strip() == "exit"
child.kill(); child.wait()
print("done", flush=True)
time.sleep(60)
"""


def psutil_descendants(pid: int) -> set[int]:
    """psutil's descendants of ``pid``, the oracle."""
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


@pytest.fixture
def family(request):
    """(top, child, grandchild) pids of a running :data:`FAMILY`, and a way to end the
    child; everything is killed afterwards."""
    top = subprocess.Popen(
        [sys.executable, "-c", FAMILY, request.param],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    child, grandchild = map(int, top.stdout.readline().split())

    def end_child() -> None:
        top.stdin.write("exit\n")
        top.stdin.flush()
        assert top.stdout.readline().strip() == "done"

    yield top.pid, child, grandchild, end_child
    for pid in (grandchild, child):
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    top.kill()
    top.wait()


@pytest.mark.parametrize("family", ["plain"], indirect=True)
def test_the_descendants_are_those_psutil_sees(family):
    top, child, grandchild, _ = family
    tree = ProcessTree()
    assert set(tree.descendants(top)) == psutil_descendants(top) == {child, grandchild}
    assert set(tree.descendants(os.getpid())) == psutil_descendants(os.getpid())
    assert top in tree.descendants(os.getpid())
    assert 1 not in tree.descendants(os.getpid())
    assert parent_of(grandchild) == child and parent_of(child) == top
    assert tree.descendants(grandchild) == []


@pytest.mark.parametrize(
    ("family", "adopted"), [("plain", False), ("subreaper", True)], indirect=["family"]
)
def test_an_orphan_counts_under_its_new_parent_only(family, adopted):
    """When the child exits, its own child goes to init, out of the family, or to the
    subreaper above it: what a sandbox's init sees, where the memory watch must still
    count it (read again, not lost under its old parent)."""
    top, child, grandchild, end_child = family
    tree = ProcessTree()
    assert set(tree.descendants(top)) == {child, grandchild}
    end_child()
    assert psutil.Process(grandchild).is_running()
    assert parent_of(child) is None
    assert (parent_of(grandchild) == top) is adopted
    expected = {grandchild} if adopted else set()
    assert set(tree.descendants(top)) == expected == psutil_descendants(top)


def test_a_pid_that_is_gone_has_no_parent():
    process = subprocess.Popen(["true"])
    process.wait()
    assert parent_of(process.pid) is None
