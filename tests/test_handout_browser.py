"""The learner's kit on its own: unpacked, installed with pip from its requirements.txt
alone, and used in its own JupyterLab in Chromium, as its README tells a learner.

A throwaway course releases every lesson from the current source; ``handout --all``
writes the kit; its zip is unpacked into a fresh folder, where a virtual environment is
made from ``requirements.txt`` (pip's cache makes that quick after ``make``).  JupyterLab
starts from that environment in the kit's folder with the README's command, with no
Jupyter configuration of this machine (fresh config, data and runtime folders): what
the learner's lab shows comes from the kit.  One lab and one tab serve every lesson.
Screenshots go to ``reports/screenshots/handout-*.png``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import psutil
import pytest
from packaging.utils import canonicalize_name
from playwright.sync_api import Page, expect, sync_playwright
from support.browser import (
    LabServer,
    NotebookPage,
    close_notebooks,
    describe_errors,
    error_outputs,
    launch_chromium,
    learner_python,
    not_run,
    serve,
)
from support.course import FILES, REPO, new_course

from autograder.course import assignments
from autograder.handout.kit import handout
from autograder.release import release

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

LESSONS = assignments(REPO)
#: The lesson solved in the kit's lab (the first: plots, numpy and every kind of cell).
SOLVED = LESSONS[0]
SCREENSHOTS = REPO / "reports" / "screenshots"
SUCCESS = "Success! Your notebook passes all the tests."
#: Where pip installs: what a learner's environment holds besides the pins.
INSTALLERS = {"pip"}


def learner_env(**extra: str | Path) -> dict[str, str]:
    """This process's environment without the course's virtual environments: no
    ``VIRTUAL_ENV``, no Jupyter settings, and no folder of this checkout on ``PATH``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not k.startswith("JUPYTER")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and not Path(p).is_relative_to(REPO)
    )
    return env | {k: str(v) for k, v in extra.items()}


def screenshot(target, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / f"handout-{name}.png"))


def distributions(python: Path) -> dict[str, str]:
    """``{canonical name: version}`` of what the environment of ``python`` holds."""
    probe = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=True, env=learner_env()
    ).stdout
    return {canonicalize_name(name): version for name, version in json.loads(out).items()}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    """Every lesson's kit, written from fresh releases and unpacked from its zip."""
    root = tmp_path_factory.mktemp("handout")
    course = new_course(root / "course", {a: REPO / "source" / a for a in LESSONS})
    release(course=course, all=True, check=False)
    written = handout(course=course, all=True, out=root / "instructor" / "kit")
    with zipfile.ZipFile(written.zip) as zf:
        zf.extractall(root / "learner")
    return root / "learner" / "kit"


@pytest.fixture(scope="module")
def kit_python(kit) -> Path:
    """The kit's own environment, made as its README says: a venv, then
    ``pip install -r requirements.txt``, nothing else."""
    base = subprocess.run(
        ["sh", str(REPO / "scripts" / "venv-python.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run([base, "-m", "venv", ".venv"], cwd=kit, check=True, env=learner_env())
    python = kit / ".venv" / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", "requirements.txt"],
        cwd=kit,
        capture_output=True,
        text=True,
        env=learner_env(),
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return python


@pytest.fixture(scope="module")
def kit_lab(kit, kit_python, tmp_path_factory):
    """JupyterLab started in the kit's folder with the README's command; stopped after."""
    work = tmp_path_factory.mktemp("kit-lab")
    argv = [str(kit / ".venv" / "bin" / "jupyter"), "lab", "--config=jupyter_lab_config.json"]
    # What this machine needs beyond the README: no browser of its own, a free port, and
    # root's consent (the suite may run as root in a container).
    argv += ["--no-browser", "--ServerApp.port_retries=0"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    server = serve(
        lambda port, token, **popen: subprocess.Popen(
            [*argv, f"--port={port}"],
            cwd=kit,
            env=learner_env(
                JUPYTER_TOKEN=token,
                JUPYTER_CONFIG_DIR=work / "config",
                JUPYTER_DATA_DIR=work / "data",
                JUPYTER_RUNTIME_DIR=work / "runtime",
            ),
            **popen,
        ),
        work,
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kit_tab(kit_lab):
    """One Chromium tab for every lesson: the lab loads once."""
    with sync_playwright() as playwright:
        context = launch_chromium(playwright, kit_lab.log_path.parent / "chromium-profile")
        tab = context.new_page()
        yield tab
        context.close()


def open_in(tab: Page, server: LabServer, path: str) -> NotebookPage:
    """Open ``path``: at its URL the first time, then from the loaded lab."""
    return NotebookPage(tab, server, path, in_lab=tab.url.startswith(f"{server.base_url}/lab"))


@pytest.fixture
def notebook_tab(kit_tab, kit_lab):
    """`kit_tab`; afterwards its notebooks are closed and their kernels shut down."""
    yield kit_tab
    if kit_tab.url.startswith(f"{kit_lab.base_url}/lab"):
        try:
            close_notebooks(kit_tab)
        except Exception:  # a dialog the test left open: the next test loads the lab
            kit_tab.goto("about:blank")
    kit_lab.shutdown_kernels()


def lesson_notebook(kit: Path, assignment: str) -> str:
    [notebook] = (kit / assignment).glob("*.ipynb")
    return f"{assignment}/{notebook.name}"


# --------------------------------------------------------------------------- tests


def test_pip_installs_the_tested_learner_environment_from_requirements_alone(kit_python):
    """The kit's environment holds what ``.venv-learner`` (where the other browser tests
    serve the lab from) holds, at the same versions: everything but this package itself."""
    ours = distributions(kit_python)
    tested = distributions(learner_python())
    tested.pop("specdec-course")
    for name in INSTALLERS:
        ours.pop(name, None)
        tested.pop(name, None)
    assert ours == tested
    assert "specdec-course" not in ours and "nbgrader" in ours


def test_the_learners_window_shows_validate_and_no_instructor_tool(notebook_tab, kit_lab, kit):
    page = notebook_tab
    nbp = open_in(page, kit_lab, lesson_notebook(kit, LESSONS[0]))
    expect(nbp.panel.locator(".jp-Toolbar .validate-button")).to_have_text("Validate")
    menus = page.locator(".lm-MenuBar-itemLabel")
    expect(menus.filter(has_text="Kernel")).to_have_count(1)
    assert "Nbgrader" not in menus.all_inner_texts(), menus.all_inner_texts()
    body = page.locator("body")
    for text in ("Create Assignment", "Formgrader", "Error fetching courses", "exchange"):
        expect(body).not_to_contain_text(text)
    expect(page.locator(".Toastify__toast")).to_have_count(0)  # no news pop-up
    screenshot(page, "learner-view")
    # The server serves Validate, and neither the formgrader nor the assignment list.
    html = urllib.request.urlopen(kit_lab.url("lab"), timeout=60).read().decode()
    config = json.loads(
        re.search(
            r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S
        )[1]
    )
    assert set(config["disabledExtensions"]) == {
        "@jupyter/nbgrader:assignment-list",
        "@jupyter/nbgrader:course-list",
        "@jupyter/nbgrader:create-assignment",
        "@jupyter/nbgrader:formgrader",
        "@jupyter/nbgrader:menu",
    }
    assert config["news"] == {"disabled": True}
    for endpoint in ("assignments", "formgrader"):
        with pytest.raises(urllib.error.HTTPError) as off:
            kit_lab.api("GET", endpoint)
        assert off.value.code == 404, endpoint
    # The server runs from the kit's own environment.
    server = psutil.Process(kit_lab.process.pid).cmdline()
    assert Path(server[0]).parent == kit / ".venv" / "bin", server
    assert not nbp.errors, nbp.errors


def test_validate_reads_the_kits_nbgrader_config(kit_lab, kit):
    """A correct E7.2 whose numpy code warns passes Validate: the kit's
    ``nbgrader_config.json`` sends the kernel's warnings to stdout and quiets its log, as
    the course's configuration does when grading.  Plain nbgrader fails a test cell on
    any output to stderr."""
    assignment = "e7_2_acceptance_tests"
    sample = FILES / assignment / "submissions" / "variant-runtime-warning.ipynb"
    shutil.copyfile(sample, kit / "warns.ipynb")  # beside the lessons, not among them
    result = kit_lab.api("POST", "assignments/validate", {"path": "warns.ipynb"})
    assert result["success"], result["value"]
    assert not result["value"].get("failed"), result["value"]["failed"][0]["error"]
    kit_lab.shutdown_kernels()


@pytest.mark.parametrize("assignment", LESSONS)
def test_a_blank_lesson_runs_and_validate_lists_its_failing_tests(
    notebook_tab, kit_lab, kit, assignment
):
    """The blank lesson: Run all stops at a stub, Validate lists failing tests.

    Run all stops at the first error, but the kernel aborts only the cells queued while it
    handles that error: a later cell may still run, and meet a function whose stub was
    aborted (a NameError).  How many do depends on the machine's speed, so the test asks
    that the first error be a stub's, and every other one a stub's or such a name.
    """
    page = notebook_tab
    nbp = open_in(page, kit_lab, lesson_notebook(kit, assignment))
    nbp.run_all()
    blank = nbp.save()
    errors = error_outputs(blank)
    assert errors, describe_errors(blank)
    assert errors[min(errors)] == "NotImplementedError", describe_errors(blank)
    assert set(errors.values()) <= {"NotImplementedError", "NameError"}, describe_errors(blank)
    dialog = nbp.validate()
    failed = dialog.locator(".validation-failed")
    expect(failed).to_contain_text("The following cell failed")
    expect(failed).to_contain_text("NotImplementedError")
    screenshot(page, f"{assignment[:4]}-blank-validated")
    dialog.locator(".jp-Dialog-button", has_text="Ok").click()
    assert not nbp.errors, nbp.errors


def test_a_solved_lesson_runs_and_validate_says_success(notebook_tab, kit_lab, kit):
    """Solved (the lesson's reference sample in the kit notebook's place): Run all without
    an error, and Validate says "Success!".  One lesson is enough here: every lesson,
    solved, runs and validates in ``tests/test_browser.py`` in ``.venv-learner``, and
    the first test above proves the kit's environment holds exactly what that one does."""
    page = notebook_tab
    path = lesson_notebook(kit, SOLVED)
    shutil.copyfile(FILES / SOLVED / "submissions" / "reference.ipynb", kit / path)
    nbp = open_in(page, kit_lab, path)
    nbp.run_all()
    dialog = nbp.validate()  # saves the notebook first
    expect(dialog.locator(".validation-success")).to_contain_text(SUCCESS)
    screenshot(page, f"{SOLVED[:4]}-solved-validated")
    dialog.locator(".jp-Dialog-button", has_text="Ok").click()
    expect(dialog).to_have_count(0)
    solved = nbp.read_file()
    assert error_outputs(solved) == {}, describe_errors(solved)
    assert not_run(solved) == [], "cells not run"
    assert not nbp.errors, nbp.errors
