"""The command's entry point: the forkserver starts first, and the entry stays light."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autograder.entry import uses_local_pool


@pytest.mark.parametrize(
    ("argv", "local"),
    [
        (["grade", "e7_2_acceptance_tests"], True),
        (["grade", "e7_2_acceptance_tests", "--submissions", "dl.zip", "--workers", "4"], True),
        (["release", "--all"], True),
        (["demo"], True),
        (["grade", "e7_2_acceptance_tests", "--cluster", "local:2"], False),
        (["grade", "e7_2_acceptance_tests", "--cluster=local:2"], False),
        (["grade", "e7_2_acceptance_tests", "--scheduler", "tcp://127.0.0.1:8786"], False),
        (["grade", "--help"], False),
        (["grade", "-h"], False),
        (["export", "e7_2_acceptance_tests", "--to", "canvas"], False),
        (["report", "e7_2_acceptance_tests"], False),
        ([], False),
        # an option's value is not taken for a verb
        (["export", "grade", "--to", "csv"], False),
    ],
)
def test_the_forkserver_starts_early_only_for_local_grading(argv, local):
    assert uses_local_pool(argv) is local


@pytest.mark.parametrize("option", ["--clus", "--sched", "--work"])
def test_an_abbreviated_option_is_refused_so_the_early_start_never_guesses(option, capsys):
    from autograder.cli import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["grade", "e7_2_acceptance_tests", option, "2"])
    assert exit_info.value.code == 2
    assert f"unrecognized arguments: {option}" in capsys.readouterr().err


def test_the_entry_imports_nothing_heavy():
    """Every grading worker imports the command's ``__main__``: it must stay light.

    With ``autograder.cli`` as the console script's module, each worker imported the whole
    command (matplotlib for the report, the demo, the LMS exports) before its first job.
    """
    probe = (
        "import sys, runpy\n"
        "runpy.run_module('autograder.__main__', run_name='__mp_main__')\n"
        "import autograder.entry\n"
        "heavy = ('autograder.cli', 'autograder.grade', 'nbgrader', 'matplotlib', 'numpy')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    assert _output(probe) == "[]"


def test_the_command_runs_through_the_entry(tmp_path):
    """``python -m autograder`` is the command: the instructor's errors come back as before."""
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", "no_such", "--course", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: "), done.stderr


def test_the_command_leaves_what_it_made_to_the_exit_not_the_collector():
    """After the command, its objects are frozen out of the garbage collector, whose last
    pass at shutdown would otherwise walk all of them (the figures: ``entry.main``)."""
    probe = (
        "import gc, sys\n"
        "from autograder import entry\n"
        "sys.argv = ['specdec-course', '--help']\n"
        "try:\n"
        "    entry.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(gc.get_freeze_count() > len(gc.get_objects()))\n"
    )
    assert _output(probe).splitlines()[-1] == "True"  # after the help text


def _output(probe: str) -> str:
    """What ``probe`` prints, run in a new Python (stripped)."""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_course_environment_skips_the_slow_iri_parsers():
    """Every process of the course's environment, nbgrader's and Jupyter's commands too,
    starts without rfc3987_syntax (``scripts/install-venv-tweaks.sh``), and notebooks are
    still validated against their schema."""
    probe = (
        "import sys, nbformat\n"
        "print(sys.modules.get('rfc3987_syntax', 'absent'))\n"
        "nb = nbformat.v4.new_notebook()\n"
        "nb.cells.append(nbformat.v4.new_code_cell('1'))\n"
        "nb.cells[0]['execution_count'] = 'one'\n"
        "try:\n"
        "    nbformat.validate(nb)\n"
        "except nbformat.ValidationError:\n"
        "    print('invalid')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "invalid"]


@pytest.mark.parametrize("length", [40, 120])
def test_the_forkserver_starts_under_a_tmpdir_of_any_length(tmp_path, length):
    """Its socket lives in multiprocessing's temporary folder, under ``TMPDIR``; a socket's
    path holds at most 107 bytes.  Under a longer ``TMPDIR`` that one folder goes elsewhere,
    and everything else stays under ``TMPDIR``."""
    tmpdir = tmp_path / ("t" * max(1, length - len(str(tmp_path)) - 1))
    tmpdir.mkdir()
    probe = (
        "import concurrent.futures, os, tempfile\n"
        "from multiprocessing import util\n"
        "from autograder.grading import forkserver\n"
        "forkserver.start()\n"
        "with concurrent.futures.ProcessPoolExecutor(1, mp_context=forkserver.context()) as pool:\n"
        "    print(pool.submit(os.getpid).result() != os.getpid())\n"
        "print(util.get_temp_dir())\n"
        "print(tempfile.mkdtemp())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert done.returncode == 0, done.stderr
    worked, pymp, other = done.stdout.split("\n")[:3]
    assert worked == "True"
    assert other.startswith(str(tmpdir))
    assert pymp.startswith(str(tmpdir)) is (length < 60)
