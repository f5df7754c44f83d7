"""The learner's JupyterLab, tested in a real browser (Playwright + Debian's Chromium).

One JupyterLab (started as ``make lab`` starts it, by `autograder.lab.start_lab`) serves
a throwaway copy of the course, whose releases are generated from the current
source with nbgrader's API, so the tests never depend on a stale ``release/`` and never write
into the repository.  Screenshots go to ``reports/screenshots/`` (ignored by git).
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import nbgrader
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import Page, expect, sync_playwright
from support.browser import (
    LabServer,
    NotebookPage,
    close_notebooks,
    copy_course,
    describe_errors,
    drag_slider,
    error_outputs,
    generate_release,
    image_loaded,
    launch_chromium,
    learner_python,
    nbgrader_meta,
    not_run,
    shown_probability,
    solution_sources,
    start_lab_server,
    type_slider_value,
)
from support.course import REPO

from autograder.lab import lab_command

ASSIGNMENT = "e7_2_acceptance_tests"
RELEASE_NB = f"release/{ASSIGNMENT}/acceptance_tests.ipynb"
SOURCE_NB = f"source/{ASSIGNMENT}/acceptance_tests.ipynb"
E7_1 = "e7_1_why_decoding_is_slow"
E7_1_RELEASE_NB = f"release/{E7_1}/why_decoding_is_slow.ipynb"
E7_1_SOURCE_NB = f"source/{E7_1}/why_decoding_is_slow.ipynb"
E7_3 = "e7_3_accept_step"
E7_3_RELEASE_NB = f"release/{E7_3}/accept_step.ipynb"
E7_3_SOURCE_NB = f"source/{E7_3}/accept_step.ipynb"
E7_4 = "e7_4_end_to_end"
E7_4_RELEASE_NB = f"release/{E7_4}/end_to_end.ipynb"
E7_4_SOURCE_NB = f"source/{E7_4}/end_to_end.ipynb"
E7_5 = "e7_5_token_trees"
E7_5_RELEASE_NB = f"release/{E7_5}/token_trees.ipynb"
E7_5_SOURCE_NB = f"source/{E7_5}/token_trees.ipynb"
E7_6 = "e7_6_serving"
E7_6_RELEASE_NB = f"release/{E7_6}/serving.ipynb"
E7_6_SOURCE_NB = f"source/{E7_6}/serving.ipynb"
SCREENSHOTS = REPO / "reports" / "screenshots"

ALWAYS = re.compile(r"always accepted")
PART_OF_THE_TIME = re.compile(r"only part of the time")
SUCCESS = "Success! Your notebook passes all the tests."


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A throwaway copy of the course (nbgrader_config.py, source/, release/)."""
    return copy_course(REPO, tmp_path_factory.mktemp("lab") / "course")


@pytest.fixture(scope="module")
def lab_server(course, tmp_path_factory):
    """The learner's JupyterLab on the course copy; stopped (kernels too) even on failure.

    While it boots, the releases are generated from the current source.
    """
    server = start_lab_server(
        course,
        tmp_path_factory.mktemp("lab-run"),
        while_starting=lambda: [
            generate_release(course, a) for a in (E7_1, ASSIGNMENT, E7_3, E7_4, E7_5, E7_6)
        ],
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    with sync_playwright() as playwright:
        context = launch_chromium(playwright, tmp_path_factory.mktemp("chromium-profile"))
        yield context
        context.close()


@pytest.fixture
def page(chromium, lab_server):
    """A fresh tab; afterwards its notebook's kernel is shut down."""
    tab = chromium.new_page()
    yield tab
    tab.close()
    lab_server.shutdown_kernels()


@pytest.fixture(scope="module")
def lab_tab(chromium):
    """One tab for the notebook tests, in which the lab loads once (see `notebook_tab`)."""
    tab = chromium.new_page()
    yield tab
    tab.close()


@pytest.fixture
def notebook_tab(lab_tab, lab_server):
    """`lab_tab`, with the lab loaded or not (open a notebook in it with `open_notebook`);
    afterwards its notebook is closed, unsaved changes discarded, and its kernel shut down,
    so the next test opens its own notebook in the same lab instead of loading it again."""
    yield lab_tab
    if lab_loaded(lab_tab, lab_server):
        try:
            close_notebooks(lab_tab)
        except Exception:  # a dialog the test left open, say: the next test loads the lab
            lab_tab.goto("about:blank")
    lab_server.shutdown_kernels()


def lab_loaded(tab: Page, server: LabServer) -> bool:
    return tab.url.startswith(f"{server.base_url}/lab")


def open_notebook(tab: Page, server: LabServer, path: str) -> NotebookPage:
    """Open ``path`` in ``tab``: at its URL the first time, in the loaded lab after that."""
    return NotebookPage(tab, server, path, in_lab=lab_loaded(tab, server))


def screenshot(target, name: str) -> Path:
    """Save a PNG of a page or an element under reports/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    target.screenshot(path=str(path))
    return path


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def plot_cells(nb: nbformat.NotebookNode) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "plt.show()" in c.source]


def assert_plots_are_images(nbp: NotebookPage, cells: list[int]) -> None:
    for index in cells:
        img = nbp.cell(index).locator(".jp-OutputArea-output img")
        expect(img, f"cell {index} shows no plot").to_have_count(1)
        assert image_loaded(img), f"cell {index}: the plot image did not load"


# --------------------------------------------------------------------------- tests


def test_lab_command_listens_on_loopback_only():
    argv = lab_command(root=REPO / "release", port=8899, open_browser=False)
    assert "--ServerApp.ip=127.0.0.1" in argv
    assert f"--ServerApp.root_dir={REPO / 'release'}" in argv
    assert "--ServerApp.port=8899" in argv and "--ServerApp.port_retries=0" in argv
    assert "--ServerApp.open_browser=False" in argv


@pytest.mark.browser
@pytest.mark.kernel
def test_lab_serves_nbgrader_learner_extensions_and_widgets(lab_server):
    # The lab extensions the page loads (installed in the venv, none disabled).
    html = urllib.request.urlopen(lab_server.url("lab"), timeout=60).read().decode()
    found = re.search(
        r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S
    )
    assert found, "no page config in /lab"
    page_config = json.loads(found.group(1))
    loaded = {ext["name"] for ext in page_config["federated_extensions"]}
    assert {"@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"} <= loaded, loaded
    # Off: nbgrader's instructor panels, the Assignments panel (no exchange here) and the
    # menu that offers them.  Validate and the widgets stay on.
    disabled = set(page_config.get("disabledExtensions") or [])
    assert disabled == {
        "@jupyter/nbgrader:assignment-list",
        "@jupyter/nbgrader:course-list",
        "@jupyter/nbgrader:create-assignment",
        "@jupyter/nbgrader:formgrader",
        "@jupyter/nbgrader:menu",
    }, disabled
    # The Validate handler answers; the assignment list and the formgrader are not served.
    version = lab_server.api("GET", f"nbgrader_version?version={nbgrader.__version__}")
    assert version == {"success": True}, version
    for endpoint in ("assignments", "formgrader"):
        with pytest.raises(urllib.error.HTTPError) as off:
            lab_server.api("GET", endpoint)
        assert off.value.code == 404, endpoint


#: What a learner's environment has no need for: the test, cluster and database tools.
NOT_FOR_LEARNERS = ("pytest", "playwright", "hypothesis", "distributed", "dask", "psycopg", "ruff")
#: Standard modules that Linux and macOS have and Windows has not.
POSIX_ONLY = ("resource", "fcntl", "pwd", "grp", "termios", "pty")


@pytest.mark.browser
@pytest.mark.kernel
def test_the_lab_runs_from_the_learners_environment_with_only_the_lessons_packages(lab_server):
    """Every browser test's lab is served from ``.venv-learner``, as ``make lab`` serves it.

    That environment has none of the grader's test, cluster or database tools, and the
    learner's command (``specdec-course lab``) needs no POSIX-only module, as on Windows.
    """
    assert Path(psutil.Process(lab_server.process.pid).cmdline()[0]) == learner_python()
    probe = f"""
import importlib.util, sys
for name in {POSIX_ONLY!r}:
    sys.modules[name] = None  # as on Windows: importing it raises ImportError
from autograder import cli, entry, lab
lab.lab_command(root=lab.Path("release"), port=8888)
lab.lab_environment()
try:
    cli.main(["lab", "--help"])
except SystemExit as done:
    assert done.code == 0, done.code
print("absent:", [m for m in {NOT_FOR_LEARNERS!r} if importlib.util.find_spec(m)])
"""
    # On stdin, not on the command line: the marker tripwires read command lines.
    run = subprocess.run(
        [str(learner_python()), "-"], input=probe, capture_output=True, text=True, cwd=REPO
    )
    assert run.returncode == 0, run.stderr
    assert "usage: specdec-course lab" in run.stdout, run.stdout
    assert run.stdout.strip().endswith("absent: []"), run.stdout


@pytest.mark.browser
@pytest.mark.kernel
def test_the_learners_lab_shows_no_instructor_tool_no_exchange_error_and_no_pop_up(
    page, lab_server
):
    """What ``make lab`` shows around a lesson: Validate, and nothing meant for instructors."""
    nbp = NotebookPage(page, lab_server, E7_3_RELEASE_NB)
    expect(nbp.panel.locator(".jp-Toolbar .validate-button")).to_have_text("Validate")
    # No Nbgrader menu: what it offers is the instructor's tools and the Assignments panel.
    menus = page.locator(".lm-MenuBar-itemLabel")
    expect(menus.filter(has_text="Kernel")).to_have_count(1)
    assert "Nbgrader" not in menus.all_inner_texts(), menus.all_inner_texts()
    body = page.locator("body")
    for text in ("Create Assignment", "Error fetching courses", "exchange directory"):
        expect(body).not_to_contain_text(text)
    expect(page.locator(".Toastify__toast")).to_have_count(0)  # no "official Jupyter news?"
    screenshot(page, "lab-learner-view.png")
    assert not nbp.errors, nbp.errors


@pytest.mark.browser
@pytest.mark.kernel
def test_validate_runs_with_the_course_config(lab_server, course):
    """A graded cell that emits a RuntimeWarning passes Validate only with the course config.

    nbgrader fails a test cell that writes to stderr; the course's nbgrader_config.py
    prints warnings on stdout instead.  Validate reads that file from the server's
    working directory, so this proves the lab validates with the course's settings.
    """
    probe = new_notebook(
        cells=[
            new_code_cell(
                '"""Check a cell that warns."""\n'
                "import warnings\n"
                'warnings.warn("0/0 in a learner\'s numpy code", RuntimeWarning)\n'
                "assert True",
                metadata={
                    "nbgrader": {
                        "grade": True,
                        "grade_id": "test_probe_warns",
                        "locked": True,
                        "points": 1,
                        "schema_version": 3,
                        "solution": False,
                        "task": False,
                    }
                },
            )
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    nbformat.write(probe, course / "config-probe.ipynb")
    result = lab_server.api("POST", "assignments/validate", {"path": "config-probe.ipynb"})
    assert result["success"], result["value"]
    for cell in result["value"].get("failed", []):
        pytest.fail("Validate failed a cell that only warns:\n" + strip_ansi(cell["raw_error"]))


def check_explorer(nbp: NotebookPage) -> None:
    """The explorer renders; moving the p slider changes the probability and the sentence."""
    page = nbp.page
    explorer = nbp.panel.locator(".jp-OutputArea-output", has=page.locator(".widget-slider"))
    expect(explorer).to_have_count(1)
    p_slider = explorer.locator(".widget-slider", has_text="target p")
    q_slider = explorer.locator(".widget-slider", has_text="draft q")
    verdict = explorer.locator(".widget-html", has_text="min(1, p/q)")
    expect(p_slider).to_be_visible()
    expect(q_slider).to_be_visible()
    expect(explorer).to_contain_text("Σ min(p, q) = 0.75")
    # The lesson's example: p = 0.5, q = 0.8.
    expect(verdict).to_contain_text(PART_OF_THE_TIME)
    assert shown_probability(verdict.inner_text()) == pytest.approx(0.625)
    explorer.scroll_into_view_if_needed()
    screenshot(explorer, "e7_2-explorer.png")

    # Drag p to its top: p = 1 >= q = 0.8, so the token is always accepted.
    drag_slider(page, p_slider, to="max")
    expect(verdict).to_contain_text(ALWAYS)
    assert shown_probability(verdict.inner_text()) == pytest.approx(1.0)
    screenshot(explorer, "e7_2-explorer-p-at-max.png")
    # Type p = 0.4 into the slider's readout: 0.4 / 0.8, accepted half of the time.
    type_slider_value(page, p_slider, "0.4")
    expect(verdict).to_contain_text(PART_OF_THE_TIME)
    assert shown_probability(verdict.inner_text()) == pytest.approx(0.5)

    # From the keyboard: the handle takes the focus, and the arrow, End and Home keys move it.
    p_slider.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    expect(verdict).not_to_contain_text("min(1, 0.5) ")
    assert 0.5 < shown_probability(verdict.inner_text()) < 1
    page.keyboard.press("End")
    expect(verdict).to_contain_text(ALWAYS)
    page.keyboard.press("Home")
    expect(verdict).to_contain_text("never accepted")
    assert shown_probability(verdict.inner_text()) == pytest.approx(0.0)


def check_only_stubs_fail(saved: nbformat.NotebookNode, solutions: dict[str, str]) -> None:
    """In the run release, only stubs and the tests of stubs fail; nothing else is red.

    ``solutions`` (the source's, by grade_id) tell which names the stubs leave undefined.
    """
    failed = {
        i: (out.ename, out.evalue)
        for i, c in enumerate(saved.cells)
        if c.cell_type == "code"
        for out in c.outputs
        if out.output_type == "error"
    }
    stubs = {i for i, c in enumerate(saved.cells) if nbgrader_meta(c).get("solution")}
    tests = {i for i, c in enumerate(saved.cells) if nbgrader_meta(c).get("grade")}
    # Stubs that run at top level (Part 1, check your understanding) raise at once...
    top_level = {
        i for i in stubs if re.search(r"^raise NotImplementedError", saved.cells[i].source, re.M)
    }
    for i in top_level:
        assert failed.get(i, ("nothing",))[0] == "NotImplementedError", describe_errors(saved)
    # ... so the names they should define are missing in their tests.
    undefined = {
        name
        for i in top_level
        for name in re.findall(
            r"^(\w+)\s*=", solutions[nbgrader_meta(saved.cells[i])["grade_id"]], re.M
        )
    }
    expected = {f"name '{name}' is not defined" for name in undefined}
    unexpected = [
        i
        for i, (name, value) in failed.items()
        if not (i in stubs and name == "NotImplementedError")
        and not (i in tests and name == "NotImplementedError")
        and not (i in tests and name == "NameError" and value in expected)
    ]
    assert not unexpected, describe_errors(saved)
    # Nothing else writes to stderr (a learner would see it in red).
    noisy = [
        i
        for i, c in enumerate(saved.cells)
        if c.cell_type == "code"
        and i not in stubs | tests
        and any(o.output_type == "stream" and o.name == "stderr" for o in c.outputs)
    ]
    assert not noisy, {i: saved.cells[i].source[:200] for i in noisy}


@pytest.mark.browser
@pytest.mark.kernel
def test_source_notebook_runs_top_to_bottom_without_error(notebook_tab, lab_server):
    nbp = open_notebook(notebook_tab, lab_server, SOURCE_NB)
    nbp.run_all()
    saved = nbp.save()
    assert error_outputs(saved) == {}, describe_errors(saved)
    assert not_run(saved) == [], "cells not run"
    assert_plots_are_images(nbp, plot_cells(saved))
    assert not nbp.errors, nbp.errors


NOT_WRITTEN = re.compile(r"(\w+) is not written yet: finish Part \d+, then run this cell again\.")


@dataclass(frozen=True)
class Lesson:
    """What a learner meets in one lesson: the blank release, then the solved one."""

    release: str  # the notebook, relative to the course
    source: str
    functions: frozenset[str]  # solution cells that must be there
    figures: tuple[str, ...]  # one screenshot name per plt.show() cell, in order
    texts: dict[str, tuple[str, ...]]  # {text in a cell's source: texts its output shows}
    explore: Callable[[NotebookPage], None] | None = None  # tries the blank release's explorer
    trace: str | None = None  # text in the source of the cell that draws a colour-coded trace


LESSONS = {
    E7_1: Lesson(
        E7_1_RELEASE_NB,
        E7_1_SOURCE_NB,
        frozenset({"step_time", "ridge_batch", "max_batch", "verify_cost_ratio", "greedy_verify"}),
        ("batch", "roofline", "trace"),
        {
            "_LINES = [": (  # the Your numbers cell: a course without a key prints row 0
                "Your numbers (variant 0)",
                "Part 1: Llama-2-7B in 16-bit on the A100 SXM 80 GB; the draft has k = 4 tokens",
                "C: 153, the ridge batch less one",
            ),
            "most = max_batch(LLAMA2_7B, A100, 4096)": (
                "at most 30 sequences of 4096 tokens fit",
                "memory-bound",
            ),
            "plain = prompt  # plain greedy": (
                "the same text as plain greedy decoding: True",
                "passes saved",
            ),
        },
        trace="plain = prompt  # plain greedy",
    ),
    ASSIGNMENT: Lesson(
        RELEASE_NB,
        SOURCE_NB,
        frozenset(
            {"accept_prob", "overall_acceptance", "propose_and_test", "empirical_acceptance"}
        ),
        ("convergence", "tokens-per-pass"),
        {},
        explore=lambda nbp: check_explorer(nbp),
    ),
    E7_3: Lesson(
        E7_3_RELEASE_NB,
        E7_3_SOURCE_NB,
        frozenset({"spec_accept", "residual_distribution", "speculative_step"})
        | frozenset({"expected_tokens", "greedy_step", "part1_answers"}),
        ("distribution", "tokens-per-pass"),
        {
            "by_acceptance = np.minimum(": ("min(p,q)", "resample"),
            'print("speculative greedy", fast)': ("identical: True",),
            "for alpha in (0.5, 0.8, 0.95):": ("2.101x the target alone",),
        },
    ),
    E7_4: Lesson(
        E7_4_RELEASE_NB,
        E7_4_SOURCE_NB,
        frozenset(
            {"with_temperature", "draft", "speculative_decode", "speculative_decode_cached"}
            | {"measured_alpha", "tokens_per_pass", "improvement_factor", "speculation_pays"}
            | {"best_k"}
        ),
        ("acceptance",),
        {
            "recorded = Recording(": ("characters from", "target's token"),
            "for label, target_view, draft_view in": ("draft at T = 1", "target untempered"),
            "samplers = {": ("never-truncated target", "OUTSIDE"),
        },
        trace="recorded = Recording(",
    ),
    E7_5: Lesson(
        E7_5_RELEASE_NB,
        E7_5_SOURCE_NB,
        frozenset({"tree_depths", "tree_attention_mask", "multi_draft_accept", "verify_tree"})
        | frozenset({"greedy_verify_tree", "tree_expected_tokens", "chain_or_tree"})
        | frozenset({"tree_cache_keep"}),
        ("one-pass", "chain-or-tree"),
        {
            "(example_tokens, example_parents), example_q = draft_tree(": ("parents:", "tokens:"),
            "def any_rule_accept(": (
                "any-candidate rule: accepted",
                "The any-candidate rule always accepts 1 - 0.5**3 = 0.875",
                "L1 distance to p",
            ),
            "def draw_pass(": ("accepted path:",),
            "def topk_node_accept(": ("L1 distance to p: top-3 tree", "a child accepted in"),
            'shapes = {"chain (1,1,1,1,1,1)"': (
                "tokens per pass; alpha per depth",
                "acceptance vector after 'def '",
            ),
        },
    ),
    E7_6: Lesson(
        E7_6_RELEASE_NB,
        E7_6_SOURCE_NB,
        frozenset({"prompt_lookup_draft", "deterministic_verify", "batch_step_time"})
        | frozenset({"speculative_speedup", "should_speculate", "adaptive_k"})
        | frozenset({"cached_step_time", "max_batch_in_memory"}),
        ("speedup", "cache", "server"),
        {
            "for name, sample in samplers.items():": ("your lookup_decode", "OUTSIDE"),
            "tasks = {": ("lookup wins", "draft wins"),
            "def cached_speedup(": ("2,048 tokens                  61", "none up to 4,096"),
            "def simulate(": ("never slower than off", "faster than fixed k = 4 at 0 of 10 rates"),
            "alpha_256, k_256, c_256 = 0.7, 4, 0.05": (
                "= 5.00",
                "still pays? False",
                "slower than plain decoding from batch 79",
            ),
        },
    ),
}


@pytest.mark.browser
@pytest.mark.kernel
@pytest.mark.parametrize("assignment", sorted(LESSONS))
def test_a_learner_runs_the_blank_release_then_solves_it_and_validates(
    notebook_tab, lab_server, course, assignment
):
    """One lesson, in one notebook session, as a learner goes through it.

    1. The blank release, run cell by cell: only the stubs, and the tests that call them,
       raise; a cell that needs a function not written yet says so in one line, with no
       traceback; the explorer answers the mouse and the keyboard.
    2. Every solution typed in, then Run all: no error, nothing on stderr, every figure
       drawn, and a colour-coded trace tells its kinds apart without colour too.
    3. Validate passes.
    """
    lesson = LESSONS[assignment]
    short = assignment[:4]
    page = notebook_tab
    nbp = open_notebook(page, lab_server, lesson.release)
    # nbgrader's lab extension put its Validate button in the notebook toolbar.
    expect(nbp.panel.locator(".jp-Toolbar .validate-button")).to_have_text("Validate")
    solutions = solution_sources(course / lesson.source)
    assert lesson.functions <= set(solutions)

    nbp.run_each_cell()
    if lesson.explore:
        lesson.explore(nbp)
    blank = nbp.save()
    check_only_stubs_fail(blank, solutions)
    check_waiting_cells(nbp, blank, solutions, short)

    for grade_id, text in solutions.items():
        nbp.replace_cell_source(nbp.index_of(grade_id), text)
    written = type_written_answers(nbp, course / lesson.source, short)
    nbp.run_all()
    saved = nbp.save()
    check_written_answers(nbp, saved, written, short)
    assert error_outputs(saved) == {}, describe_errors(saved)
    assert not_run(saved) == [], "cells not run"
    for grade_id, text in solutions.items():
        assert saved.cells[nbp.index_of(grade_id)].source.strip() == text.strip(), grade_id
    noisy = [
        i
        for i, c in enumerate(saved.cells)
        if c.cell_type == "code"
        and any(o.output_type == "stream" and o.name == "stderr" for o in c.outputs)
    ]
    assert not noisy, {i: saved.cells[i].source[:200] for i in noisy}
    figures = plot_cells(saved)
    assert len(figures) == len(lesson.figures), lesson.figures
    assert_plots_are_images(nbp, figures)
    for index, name in zip(figures, lesson.figures, strict=True):
        area = nbp.cell(index).locator(".jp-OutputArea")
        area.scroll_into_view_if_needed()
        screenshot(area, f"{short}-solved-{name}.png")
    for marker, shown in lesson.texts.items():
        [index] = [i for i, c in enumerate(saved.cells) if marker in c.source]
        area = nbp.cell(index).locator(".jp-OutputArea")
        for text in shown:
            expect(area).to_contain_text(text)
        area.scroll_into_view_if_needed()
        screenshot(nbp.cell(index), f"{short}-solved-cell{index}.png")
    if lesson.trace:
        check_trace_without_colour(nbp, saved, lesson.trace, short)

    dialog = nbp.validate()
    expect(dialog.locator(".validation-success")).to_contain_text(SUCCESS)
    screenshot(page, f"{short}-validated.png")
    dialog.locator(".jp-Dialog-button", has_text="Ok").click()
    expect(dialog).to_have_count(0)
    assert not nbp.errors, nbp.errors


#: What the learner types in a written answer (Markdown, with math).
WRITTEN_ANSWER = "Acceptance emits $\\min(p, q)$, a rejection adds $\\max(0, p - q)$: in all, $p$."


def type_written_answers(nbp: NotebookPage, source: Path, short: str) -> list[int]:
    """Type an answer in each written-answer cell (a Markdown answer that a grader scores
    by hand) over its placeholder, as a learner does.  Return the cells' indices."""
    typed = []
    for cell in nbformat.read(source, as_version=4).cells:
        meta = nbgrader_meta(cell)
        if not (cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade")):
            continue
        index = nbp.index_of(meta["grade_id"])
        answer = nbp.cell(index)
        answer.scroll_into_view_if_needed()
        expect(answer).to_contain_text("YOUR ANSWER HERE")
        screenshot(nbp.cells.nth(index - 1), f"{short}-written-question.png")
        screenshot(answer, f"{short}-written-blank.png")
        nbp.replace_cell_source(index, WRITTEN_ANSWER)
        typed.append(index)
    return typed


def check_written_answers(
    nbp: NotebookPage, saved: nbformat.NotebookNode, written: list[int], short: str
) -> None:
    """Each written answer is saved as typed and shown rendered, its math typeset."""
    for index in written:
        assert saved.cells[index].source == WRITTEN_ANSWER
        answer = nbp.cell(index)
        expect(answer).to_contain_text("a rejection adds")
        expect(answer.locator("mjx-container").first).to_be_visible()
        answer.scroll_into_view_if_needed()
        screenshot(answer, f"{short}-written-answered.png")


def stream_text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def check_waiting_cells(
    nbp: NotebookPage, blank: nbformat.NotebookNode, solutions: dict[str, str], short: str
) -> None:
    """In the run blank release, the cells that need a learner function say which one.

    Each names a function the learner writes (a stub of this lesson), and every figure
    cell either draws or says what it waits for.
    """
    waiting = {
        i: NOT_WRITTEN.findall(stream_text(c))
        for i, c in enumerate(blank.cells)
        if c.cell_type == "code" and NOT_WRITTEN.search(stream_text(c))
    }
    assert waiting, "no cell of the blank release says which function it waits for"
    stubs = "\n".join(solutions.values())
    for i, names in waiting.items():
        for name in names:
            assert re.search(rf"^def {name}\(", stubs, re.M), (i, name, "is not a stub here")
    for i in plot_cells(blank):
        drawn = any("image/png" in o.get("data", {}) for o in blank.cells[i].outputs)
        assert drawn or i in waiting, f"cell {i} neither draws its figure nor says why"
    first = min(waiting)
    nbp.cell(first).scroll_into_view_if_needed()
    screenshot(nbp.cell(first), f"{short}-blank-waits-cell{first}.png")


def check_trace_without_colour(
    nbp: NotebookPage, saved: nbformat.NotebookNode, marker: str, short: str
) -> None:
    """The trace has a key, and each kind of span differs from the others in style too.

    Learners who cannot tell the trace's colours apart read it from the key and from
    each kind's text style: struck through, bold, a solid or a dashed box.
    """
    [index] = [i for i, c in enumerate(saved.cells) if marker in c.source]
    area = nbp.cell(index).locator(".jp-OutputArea")
    styles = area.evaluate(
        """(area) => [...area.querySelectorAll("span[title]")].map((span) => {
            const s = getComputedStyle(span);
            return {
                kind: span.title,
                inKey: span.closest("pre") === null,
                look: [s.textDecorationLine, Number(s.fontWeight) >= 600, s.borderTopStyle,
                       s.fontStyle].join(" "),
            };
        })"""
    )
    key = {s["kind"] for s in styles if s["inKey"]}
    used = {s["kind"] for s in styles if not s["inKey"]}
    assert len(used) >= 3 and used <= key, (used, key)
    expect(area).to_contain_text("Key:")
    looks: dict[str, set[str]] = {}
    for s in styles:
        looks.setdefault(s["kind"], set()).add(s["look"])
    assert all(len(v) == 1 for v in looks.values()), looks  # one style per kind
    distinct = {next(iter(v)) for v in looks.values()}
    assert len(distinct) == len(looks), f"two kinds differ only by colour: {looks}"
    assert any("line-through" in look for look in distinct), looks
    area.scroll_into_view_if_needed()
    screenshot(area, f"{short}-solved-trace.png")
