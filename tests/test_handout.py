"""`specdec-course handout`: the learner's kit, what it holds, and what it refuses.

These tests need no kernel: they build kits of the tiny ``mini`` assignment (nbgrader's
``generate_assignment`` takes a fraction of a second for it).  The kit of every lesson,
installed from its own ``requirements.txt`` and used in Chromium, is tested in
``tests/test_handout_browser.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import yaml

from autograder import cli
from autograder.handout import kit as kit_module
from autograder.handout.pins import PLATFORMS, learner_pins
from autograder.lab import LEARNER_CONFIG, LEARNER_SERVER_EXTENSIONS
from autograder.release import release

#: Every file of a one-lesson kit of ``mini``.
MINI_KIT = {
    "README.md",
    "requirements.txt",
    "environment.yml",
    "jupyter_lab_config.json",
    "nbgrader_config.json",
    "lab-settings/page_config.json",
    "lab-settings/overrides.json",
    "mini/mini.ipynb",
}
#: What the instructor's environment has and a learner's must not get.
NOT_FOR_LEARNERS = {"pytest", "playwright", "hypothesis", "distributed", "psycopg", "ruff"}


@pytest.fixture
def course(unreleased_mini_course) -> Path:
    """The ``mini`` course, released (without the self-check, which needs kernels)."""
    release("mini", course=unreleased_mini_course, check=False)
    return unreleased_mini_course


def run(*argv: str | Path) -> int:
    return cli.main(["handout", *map(str, argv)])


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the scratch folder aside) and its SHA-256."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".scratch" not in p.relative_to(folder).parts
    }


def zip_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def edit_release(course: Path, edit) -> Path:
    """Apply ``edit`` to the released ``mini`` notebook, in place; return its path."""
    path = course / "release/mini/mini.ipynb"
    nb = nbformat.read(path, as_version=4)
    edit(nb)
    nbformat.write(nb, path)
    return path


# --------------------------------------------------------------------------- the kit


def test_the_kit_holds_the_release_and_the_learners_files_only(course, tmp_path, capsys):
    before = snapshot(course)
    out = tmp_path / "handed-out" / "kit"
    assert run("mini", "--course", course, "--out", out) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "Mini assignment: mini/mini.ipynb" in printed
    assert f"wrote {out} and {out}.zip (8 files)" in printed

    assert files_of(out) == MINI_KIT
    assert (out / "mini/mini.ipynb").read_bytes() == (
        course / "release/mini/mini.ipynb"
    ).read_bytes()
    # The zip is the folder, under the folder's name.
    with zipfile.ZipFile(f"{out}.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"kit/{name}" for name in MINI_KIT)
        for name in MINI_KIT:
            assert zf.read(f"kit/{name}") == (out / name).read_bytes(), name
    # Nothing else was written: not in the course, not beside the kit.
    assert snapshot(course) == before
    assert list((course / ".scratch").glob("handout-*")) == []
    assert sorted(p.name for p in out.parent.iterdir()) == ["kit", "kit.zip"]


def test_the_learners_lab_settings_are_the_lab_verbs_own(course, tmp_path):
    out = tmp_path / "kit"
    assert run("mini", "--course", course, "--out", out) == 0
    lab = json.loads((out / "jupyter_lab_config.json").read_text())
    assert lab["ServerApp"] == {"ip": "127.0.0.1", "jpserver_extensions": LEARNER_SERVER_EXTENSIONS}
    assert lab["LabApp"]["news_url"] is None
    assert lab["LabApp"]["app_settings_dir"] == "lab-settings"
    labconfig = LEARNER_CONFIG / "labconfig"
    assert (out / "lab-settings/page_config.json").read_bytes() == (
        labconfig / "page_config.json"
    ).read_bytes()
    assert (out / "lab-settings/overrides.json").read_bytes() == (
        labconfig / "default_setting_overrides.json"
    ).read_bytes()
    # Validate runs the notebook with the course's Execute settings, skipping the cells
    # the grader skips as the learner's lab does, and nothing else of the course's
    # configuration is handed out.
    config = kit_module.load_config(course)
    assert json.loads((out / "nbgrader_config.json").read_text()) == {
        "Execute": {**dict(config.Execute), "skip_cells_with_tag": "demo"}
    }


def test_the_requirements_are_the_installed_dependencies_pinned_for_each_platform(course, tmp_path):
    out = tmp_path / "kit"
    assert run("mini", "--course", course, "--out", out) == 0
    pins = learner_pins()
    lines = [
        line for line in (out / "requirements.txt").read_text().splitlines() if line[:1] != "#"
    ]
    assert lines == pins.lines
    names = {pin.name for pin in pins.pins}
    # The lessons' packages and what they need; not the instructor's tools, not the tool.
    assert {"nbgrader", "jupyterlab", "numpy", "matplotlib", "ipywidgets", "ipykernel"} <= names
    assert not names & NOT_FOR_LEARNERS and "specdec-course" not in names
    for pin in pins.pins:
        assert pin.version == metadata.version(pin.name), pin
    # ipython needs pexpect on Linux and macOS only, and jupyter-events asks for jsonschema's
    # format-nongpl extra, which alone brings webcolors: markers and extras are followed.
    by_name = {pin.name: pin for pin in pins.pins}
    assert by_name["pexpect"].line.endswith('; sys_platform != "win32"')
    assert by_name["numpy"].platforms == frozenset(PLATFORMS)
    assert "webcolors" in names
    # conda: the tested Python, pip, and the same pins through pip.
    env = yaml.safe_load((out / "environment.yml").read_text())
    assert env["name"] == "specdec-e7"
    assert env["dependencies"][:2] == [f"python={pins.python}", "pip"]
    assert env["dependencies"][2] == {"pip": pins.lines}


def test_the_readme_says_how_to_install_open_validate_submit_and_read_feedback(course, tmp_path):
    out = tmp_path / "kit"
    assert run("mini", "--course", course, "--out", out) == 0
    text = (out / "README.md").read_text()
    assert "| Mini assignment | `mini/mini.ipynb` |" in text
    for command in (
        "python3.11 -m venv .venv",
        ".venv/bin/python -m pip install -r requirements.txt",
        "py -3.11 -m venv .venv",
        ".venv\\Scripts\\python -m pip install -r requirements.txt",
        "conda env create -f environment.yml",
        ".venv/bin/jupyter lab --config=jupyter_lab_config.json",
        ".venv\\Scripts\\jupyter lab --config=jupyter_lab_config.json",
        "conda activate specdec-e7",
    ):
        assert command in text, command
    for heading in ("Install", "Open JupyterLab", "Validate", "Submit", "Feedback"):
        assert f". {heading}" in text, heading
    assert "`mini.ipynb`, under the name it has in this folder" in text
    assert "$" not in text  # every placeholder filled in


# --------------------------------------------------------------------------- refusals


def refused(course: Path, out: Path, capsys, *argv: str) -> str:
    """Run handout, expect it refused (exit 1) with nothing written; return its message."""
    before = snapshot(course)
    assert run(*argv, "--course", course, "--out", out) == 1
    err = capsys.readouterr().err
    assert f"handout refused; nothing was written to {out}" in err, err
    assert not out.exists() and not Path(f"{out}.zip").exists()
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
    assert snapshot(course) == before
    assert list((course / ".scratch").glob("handout-*")) == []
    return err


def plant_marker(course: Path) -> str:
    edit_release(
        course, lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell("### BEGIN SOLUTION"))
    )
    return "mini/mini.ipynb: contains 'BEGIN SOLUTION'"


def plant_solution_line(course: Path) -> str:
    edit_release(
        course,
        lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell("    result_of_squaring = x * x")),
    )
    return "mini/mini.ipynb: solution code leaked: 'result_of_squaring = x * x'"


def plant_python_file(course: Path) -> str:
    (course / "release/mini/helper.py").write_text("def square(x):\n    return x * x\n")
    return "mini/helper.py: Python files are not released (solutions could leak)"


def plant_reference_name(course: Path) -> str:
    (course / "release/mini/notes.txt").write_text("from specdec_reference import accept_prob\n")
    return "mini/notes.txt: contains 'specdec_reference'"


@pytest.mark.parametrize(
    "plant", [plant_marker, plant_solution_line, plant_python_file, plant_reference_name]
)
def test_a_leak_in_the_release_refuses_the_kit(course, tmp_path, capsys, plant):
    reason = plant(course)
    err = refused(course, tmp_path / "out" / "kit", capsys, "mini")
    assert reason in err, err


def test_a_leak_in_the_kits_own_files_refuses_the_kit(course, tmp_path, capsys, monkeypatch):
    """The README, the requirements and the settings are scanned too, against every
    solution of the kit."""
    learner_files = shutil.copytree(kit_module.LEARNER_FILES, tmp_path / "learner_files")
    readme = learner_files / "README.md"
    readme.write_text(
        readme.read_text()
        + "\nA hint: `import specdec_reference`, then\n\n    result_of_squaring = x * x\n"
    )
    monkeypatch.setattr(kit_module, "LEARNER_FILES", learner_files)
    err = refused(course, tmp_path / "out" / "kit", capsys, "mini")
    assert "README.md: contains 'specdec_reference'" in err
    assert "README.md: solution code leaked: 'result_of_squaring = x * x'" in err


def test_a_release_missing_or_stale_against_source_is_refused(course, tmp_path, capsys):
    shutil.rmtree(course / "release/mini")
    err = refused(course, tmp_path / "missing" / "kit", capsys, "mini")
    assert "release/mini is missing: run `specdec-course release mini` first" in err

    release("mini", course=course, check=False)
    path = course / "source/mini/mini.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\nA sentence added after the release."
    nbformat.write(nb, path)
    err = refused(course, tmp_path / "stale" / "kit", capsys, "mini")
    assert "release/mini is stale against source/mini: run `specdec-course release mini`" in err
    # Released again, it is handed out.
    release("mini", course=course, check=False)
    assert run("mini", "--course", course, "--out", tmp_path / "fresh") == 0


def test_a_hand_edited_release_is_stale(course, tmp_path, capsys):
    """A release that differs from what source/ generates, though it leaks nothing."""
    edit_release(course, lambda nb: nb.cells.pop())
    err = refused(course, tmp_path / "out" / "kit", capsys, "mini")
    assert "release/mini is stale against source/mini" in err
    assert [line for line in err.splitlines() if line.startswith("  - ")] == [
        "  - release/mini is stale against source/mini: run `specdec-course release mini`"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["e7_9_no_such_lesson"], "unknown assignment 'e7_9_no_such_lesson' (known: mini)"),
        ([], "name an assignment or pass --all"),
        (["mini", "--out", "{course}/source/kit"], "cannot be written inside the course's source/"),
        (["mini", "--out", "{course}/source"], "cannot be written inside the course's source/"),
        (
            ["mini", "--out", "{course}/release/kit"],
            "cannot be written inside the course's release/",
        ),
        (["mini", "--out", "{course}/.."], "holds the course"),
        (["mini", "--out", "{course}/../kit.zip"], "names the kit's folder, not the zip"),
    ],
)
def test_bad_input_is_an_error_that_says_what_is_wrong(course, capsys, argv, message):
    before = snapshot(course)
    argv = [a.format(course=course) for a in argv]
    assert run(*argv, "--course", course) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert snapshot(course) == before


def test_an_existing_output_is_replaced_only_with_force_and_only_if_it_is_a_kit(
    course, tmp_path, capsys
):
    out = tmp_path / "dist" / "kit"
    notes = tmp_path / "dist" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("the instructor's own notes")
    assert run("mini", "--course", course, "--out", out) == 0
    first, first_zip = snapshot(out.parent), zip_members(Path(f"{out}.zip"))

    # Without --force: refused, nothing touched.
    assert run("mini", "--course", course, "--out", out) == 2
    assert "already exist: pass --force" in capsys.readouterr().err
    assert snapshot(out.parent) == first

    # With --force: the earlier kit is replaced, the instructor's file is not.
    (out / "README.md").write_text("an older README")
    assert run("mini", "--course", course, "--out", out, "--force") == 0
    assert snapshot(out.parent) | {"kit.zip": ""} == first | {"kit.zip": ""}
    assert zip_members(Path(f"{out}.zip")) == first_zip
    assert sorted(p.name for p in out.parent.iterdir()) == ["kit", "kit.zip", "notes.txt"]

    # A folder or a zip that is not a kit is never replaced, even with --force.
    other = tmp_path / "dist" / "lecture-notes"
    other.mkdir()
    (other / "slides.txt").write_text("slides")
    assert run("mini", "--course", course, "--out", other, "--force") == 2
    assert "is not a kit written by handout" in capsys.readouterr().err
    assert files_of(other) == {"slides.txt"}
    stray_zip = tmp_path / "dist" / "photos.zip"
    with zipfile.ZipFile(stray_zip, "w") as zf:
        zf.writestr("photos/a.txt", "a")
    zip_bytes = stray_zip.read_bytes()
    assert run("mini", "--course", course, "--out", tmp_path / "dist" / "photos", "--force") == 2
    assert stray_zip.read_bytes() == zip_bytes
    assert not (tmp_path / "dist" / "photos").exists()
    assert notes.read_text() == "the instructor's own notes"


def test_the_default_kit_goes_to_dist_in_the_course(course, capsys):
    assert run("mini", "--course", course) == 0
    assert files_of(course / "dist" / "specdec-e7-mini") == MINI_KIT
    assert (course / "dist" / "specdec-e7-mini.zip").is_file()
