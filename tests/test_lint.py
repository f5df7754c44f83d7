"""The code follows the project's ruff configuration (pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
PATHS = ["autograder", "specdec_reference", "tests", "benchmarks"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_passes(command):
    proc = subprocess.run([str(RUFF), *command, *PATHS], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
