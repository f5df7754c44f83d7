"""Helpers for the browser tests: a throwaway course, a JupyterLab server, Chromium.

The tests drive the learner's JupyterLab (started by `autograder.lab.start_lab`, the
same code as ``make lab``) with Playwright and Debian's Chromium.  Every wait is on the
page's own state (a selector, a prompt's execution count, a dialog), never a sleep.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import nbformat
from playwright.sync_api import BrowserContext, Locator, Page, Playwright, expect

from autograder.course import load_config
from autograder.lab import lab_environment, start_lab
from support.course import REPO
from support.processes import end_session, free_port, wait_until_answers

# Debian's Chromium headless shell: the build Playwright itself runs for headless tests, with
# the same Blink and V8 as the browser, without its window system.
CHROMIUM = Path("/usr/bin/chromium-headless-shell")
# What works here as root, with no network and no GPU; the profile is a fresh folder.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# JupyterLab user settings for the tests: render every cell (no virtual scrolling, so
# cell i of the page is cell i of the file).  No news or update pop-up: that is the lab's
# own default (autograder/lab_config), which the tests therefore see as a learner does.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

SERVER_START_TIMEOUT = 60.0  # seconds, per attempt (two busy cores)
ACTION_TIMEOUT_MS = 60_000  # a click or a key press, on a loaded machine
EXPECT_TIMEOUT_MS = 30_000  # Playwright's default of 5 s is too short on two busy cores
CELL_TIMEOUT_MS = 60_000  # one cell's run, kernel start included
VALIDATE_TIMEOUT_MS = 90_000  # nbgrader executes the whole notebook server-side
# Run All of a solved lesson runs its demonstrations, which time themselves and run many
# times slower on a busy machine: the wait only guards against a hang.
RUN_ALL_TIMEOUT_MS = 900_000

STDERR_MIME = "application/vnd.jupyter.stderr"
# The cells of the notebook on show (one notebook is open at a time: ?reset).
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELLS = f"{PANEL} .jp-Notebook .jp-Notebook-cell"


# --------------------------------------------------------------------------- course


def copy_course(src: Path, dest: Path) -> Path:
    """Copy what a lab needs (``nbgrader_config.py``, ``source/``, ``release/``) to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "nbgrader_config.py", dest / "nbgrader_config.py")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in ("source", "release"):
        if (src / folder).is_dir():
            shutil.copytree(src / folder, dest / folder, ignore=ignore, dirs_exist_ok=True)
    return dest


@contextmanager
def _venv_on_path() -> Iterator[None]:
    """Put this interpreter's ``bin/`` on ``PATH`` (nbgrader's gradebook runs ``alembic``)."""
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = lab_environment()["PATH"]
    try:
        yield
    finally:
        os.environ["PATH"] = old


def generate_release(course: Path, assignment: str) -> Path:
    """Generate ``release/<assignment>`` from ``source/`` with nbgrader's API, course config."""
    from nbgrader.apps import NbGraderAPI

    api = NbGraderAPI(config=load_config(course))
    with _venv_on_path():
        result = api.generate_assignment(assignment)
    if not result["success"]:
        raise RuntimeError(f"generate_assignment({assignment!r}) failed:\n{result['log']}")
    return course / "release" / assignment


def solution_sources(source_nb: Path) -> dict[str, str]:
    """Map each solution cell's grade_id to the source's solution, markers removed."""
    marker = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
    out = {}
    for cell in nbformat.read(source_nb, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            out[meta["grade_id"]] = marker.sub("", cell.source)
    return out


# --------------------------------------------------------------------------- server


@dataclass
class LabServer:
    """A running JupyterLab, its address and its log."""

    process: subprocess.Popen
    port: int
    token: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, *flags: str) -> str:
        """The browser URL of ``path`` (e.g. ``lab/tree/x.ipynb``), token included."""
        return f"{self.base_url}/{path.lstrip('/')}?" + "&".join([f"token={self.token}", *flags])

    def api(self, method: str, path: str, body: Any = None, timeout: float = 120) -> Any:
        """Call the server's REST API and return the decoded JSON (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base_url}/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def shutdown_kernels(self) -> None:
        """Shut down every kernel (each test's notebook has its own)."""
        for kernel in self.api("GET", "api/kernels", timeout=10):
            self.api("DELETE", f"api/kernels/{kernel['id']}", timeout=30)

    def stop(self) -> None:
        """Shut the kernels down, then the server; kill its process group if it lingers."""
        if self.process.poll() is None:
            try:
                self.shutdown_kernels()
            except (OSError, urllib.error.URLError, ValueError):
                pass  # the server is already going; the group kill below cleans up
        # Kernels live in the server's own session (start_new_session): end them all.
        end_session(self.process)


def learner_python() -> Path:
    """The interpreter of the learner's environment (``.venv-learner``, which ``make test``
    and ``make lab`` build with only the lessons' packages)."""
    python = REPO / ".venv-learner" / "bin" / "python"
    if not python.exists():
        raise RuntimeError(
            f"no learner environment at {python.parent.parent}: run `make test`, or "
            "`make .venv-learner/.installed` to build it alone"
        )
    return python


def start_lab_server(
    course: Path,
    workdir: Path,
    *,
    root: Path | None = None,
    while_starting: Callable[[], object] | None = None,
    extra_args: list[str] | None = None,
    python: Path | None = None,
) -> LabServer:
    """Start the learner's JupyterLab on a free loopback port with a token.

    The server runs in the learner's environment (`learner_python`), as ``make lab``
    runs it, so the tests prove that a learner needs nothing more.  ``root`` is the
    notebook root (default: the course root, so that both ``source/`` and ``release/``
    can be opened).  Settings, workspaces and runtime files go to ``workdir``.
    ``while_starting`` runs while the server boots (generate the release, say).
    ``extra_args`` are more ``--Class.trait=value`` options for the server.  One retry if
    the first start fails (a port taken in between, say).  ``python`` serves it from
    another environment instead (an instructor's formgrader needs the grader's).
    """
    python = str(python or learner_python())
    settings = workdir / "lab-settings"
    for name, value in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = {
        "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        "JUPYTER_CONFIG_DIR": str(workdir / "jupyter-config"),  # no user config
    }
    extra_args = [
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
        *(extra_args or []),
    ]
    return serve(
        lambda port, token, **popen: start_lab(
            course=course,
            root=root if root is not None else course,
            port=port,
            token=token,
            open_browser=False,
            extra_args=extra_args,
            env=env,
            python=python,
            **popen,
        ),
        workdir,
        while_starting=while_starting,
    )


def serve(
    start: Callable[..., subprocess.Popen],
    workdir: Path,
    *,
    while_starting: Callable[[], object] | None = None,
) -> LabServer:
    """Start a JupyterLab on a free loopback port with a token, and wait until it answers.

    ``start(port, token, **popen)`` starts it, passing ``popen`` (its log in ``workdir``,
    a session of its own) to `subprocess.Popen`.  ``while_starting`` runs while the
    server boots.  One retry if the first start fails (a port taken in between, say).
    """
    for attempt in (1, 2):
        port, token = free_port(), secrets.token_hex(16)
        log_path = workdir / f"jupyterlab-{attempt}.log"
        with open(log_path, "w") as log:
            process = start(
                port, token, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        server = LabServer(process, port, token, log_path)
        if while_starting is not None:
            try:
                while_starting()
            except BaseException:
                server.stop()
                raise
            while_starting = None
        if wait_until_answers(
            server.process,
            partial(server.api, "GET", "api/status", timeout=5),
            SERVER_START_TIMEOUT,
        ):
            return server
        server.stop()
    raise RuntimeError(f"JupyterLab did not start (twice); last log:\n{server.log_tail()}")


# --------------------------------------------------------------------------- browser


def launch_chromium(playwright: Playwright, profile: Path) -> BrowserContext:
    """Launch Debian's Chromium (no download) headless with a fresh profile."""
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    context = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=str(CHROMIUM),
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1280, "height": 900},
    )
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    return context


class NotebookPage:
    """A notebook opened in the learner's JupyterLab, driven like a learner would.

    ``in_lab``: the tab already shows the lab, with no notebook open; otherwise the tab
    loads the lab at the notebook's URL.
    """

    def __init__(self, page: Page, server: LabServer, path: str, *, in_lab: bool = False):
        self.page = page
        self.server = server
        self.path = path
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        if in_lab:
            # The lab is loaded in this tab, with no notebook open (see close_notebooks):
            # open the file as a learner would without reloading it, File > Open from Path.
            self.menu("File", "filebrowser:open-path")
            page.locator(".jp-Dialog input").fill(path)
            page.keyboard.press("Enter")
        else:
            # ?reset: a fresh workspace, so the previous test's notebook does not reopen.
            page.goto(server.url(f"lab/tree/{path}", "reset"))
        self.panel = page.locator(PANEL).first
        expect(self.cells.first).to_be_visible(timeout=CELL_TIMEOUT_MS)
        self.wait_for_kernel_idle()
        # The file as it was opened: the cell metadata (grade ids) to go by.
        self.notebook = self.read_file()
        # Every cell of the file is on the page (windowingMode none), in file order.
        expect(self.cells).to_have_count(len(self.notebook.cells), timeout=CELL_TIMEOUT_MS)

    def wait_for_kernel_idle(self, timeout: float = CELL_TIMEOUT_MS) -> None:
        """Wait until the status bar reports the notebook's kernel idle.

        The toolbar's indicator already says idle before any kernel exists, so go by
        the status bar's "Python 3 (ipykernel) | Idle".
        """
        status = self.page.locator("#jp-main-statusbar")
        expect(status).to_contain_text(re.compile(r"\| Idle"), timeout=timeout)

    @property
    def cells(self) -> Locator:
        return self.page.locator(CELLS)

    def cell(self, index: int) -> Locator:
        return self.cells.nth(index)

    def code_cell_indices(self) -> list[int]:
        return [i for i, c in enumerate(self.notebook.cells) if c.cell_type == "code"]

    def index_of(self, grade_id: str) -> int:
        for i, c in enumerate(self.notebook.cells):
            if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return i
        raise KeyError(grade_id)

    # ---- running

    def prompt(self, index: int) -> Locator:
        return self.cell(index).locator(".jp-InputArea-prompt")

    def menu(self, menu: str, command: str) -> None:
        """Click a menu of the menu bar, then its item for ``command``."""
        self.page.locator(".lm-MenuBar-item", has_text=menu).first.click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def wait_for_prompts(self, prompts: dict[int, str | None]) -> None:
        """Wait until each cell's prompt reads as given (None: any execution count).

        Polled in the page on every animation frame: a notebook has dozens of cells,
        and Playwright's expect() backs off up to a second between its checks.  A cell
        whose code is collapsed (a read-only cell such as *Your numbers*) has no input
        prompt: it reads ``[ ]:`` until it shows an output, and then any execution count.
        """
        self.page.wait_for_function(
            """([selector, wanted]) => {
                const cells = document.querySelectorAll(selector);
                return wanted.every(([index, text]) => {
                    const cell = cells[index];
                    if (cell && cell.querySelector(".jp-InputPlaceholder")) {
                        const ran = cell.querySelector(".jp-OutputArea-child") !== null;
                        return text === "[ ]:" ? !ran : ran;
                    }
                    const prompt = cell?.querySelector(".jp-InputArea-prompt");
                    const shown = prompt ? prompt.textContent.trim() : "";
                    return text === null ? /^\\[\\d+\\]:$/.test(shown) : shown === text;
                });
            }""",
            arg=[CELLS, list(prompts.items())],
            timeout=CELL_TIMEOUT_MS,
        )

    def run_each_cell(self) -> None:
        """Run every cell in turn with Shift+Enter, as a learner going down the page.

        Unlike Run All, this goes on past a failing cell (a stub), so every cell runs.
        Each code cell is waited for by its execution count: the kernel is fresh, so
        the k-th code cell shows ``[k]:``.
        """
        code = self.code_cell_indices()
        self.wait_for_prompts({i: "[ ]:" for i in code})
        self.prompt(0).click()  # select the first cell, in command mode
        count = 0
        for index in range(len(self.notebook.cells)):
            # Ctrl+Enter on the last cell: Shift+Enter there would append a new cell.
            last = index == len(self.notebook.cells) - 1
            self.page.keyboard.press("Control+Enter" if last else "Shift+Enter")
            if index in code:
                count += 1
                self.wait_for_prompts({index: f"[{count}]:"})

    def run_all(self) -> None:
        """Clear all outputs, then Run > Run All Cells, and wait until it has finished.

        Finished: some cell has an execution count and none is queued (``[*]:``).  If
        a cell fails, the cells after it are not run and their prompts go back to
        ``[ ]:``; the caller sees that in the saved file (`not_run`, `error_outputs`).
        """
        self.menu("Edit", "editmenu:clear-all")
        self.wait_for_prompts({i: "[ ]:" for i in self.code_cell_indices()})
        self.menu("Run", "runmenu:run-all")
        self.page.wait_for_function(
            """(selector) => {
                const shown = [...document.querySelectorAll(selector)].map(
                    (cell) => cell.querySelector(".jp-InputArea-prompt")?.textContent.trim());
                return shown.some((p) => /^\\[\\d+\\]:$/.test(p)) && !shown.includes("[*]:");
            }""",
            arg=CELLS,
            timeout=RUN_ALL_TIMEOUT_MS,
        )

    def save(self) -> nbformat.NotebookNode:
        """Save (Ctrl+S), wait until the tab is clean, and return the file as saved."""
        self.prompt(0).click()  # command mode, so the shortcut goes to the notebook
        self.page.keyboard.press("Control+s")
        tab = self.page.locator(".lm-TabBar-tab.jp-mod-current").first
        expect(tab).not_to_have_class(re.compile(r"jp-mod-dirty"), timeout=CELL_TIMEOUT_MS)
        return self.read_file()

    def read_file(self) -> nbformat.NotebookNode:
        model = self.server.api("GET", f"api/contents/{self.path}?content=1&type=notebook")
        return nbformat.from_dict(model["content"])

    # ---- editing

    def replace_cell_source(self, index: int, text: str) -> None:
        """Click into cell ``index``'s editor, select all and type ``text`` in its place.

        A Markdown cell (a written answer) is rendered: a double-click opens its editor."""
        if self.notebook.cells[index].cell_type == "markdown":
            self.cell(index).dblclick()
        editor = self.cell(index).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+a")
        # insert_text types the characters without key events, so the editor's
        # auto-closing brackets and auto-indent leave the code exactly as given.
        self.page.keyboard.insert_text(text)
        self.page.keyboard.press("Escape")  # back to command mode

    # ---- nbgrader

    def validate(self) -> Locator:
        """Press nbgrader's Validate button and return the results dialog once shown."""
        self.panel.locator(".jp-Toolbar .validate-button").click()
        dialog = self.page.locator(".jp-Dialog", has_text="Validation Results")
        expect(dialog).to_be_visible(timeout=VALIDATE_TIMEOUT_MS)
        return dialog


def close_notebooks(page: Page) -> None:
    """File > Close All Tabs in the lab of ``page``, discarding unsaved changes, and wait
    until no notebook is open (the next :class:`NotebookPage` then opens in the same lab)."""
    page.locator(".lm-MenuBar-item", has_text="File").first.click()
    page.locator('.lm-Menu-item[data-command="application:close-all"]').click()
    panels = page.locator(".jp-NotebookPanel")
    discard = page.locator(".jp-Dialog .jp-Dialog-button", has_text="Discard")
    # An unsaved notebook asks "Save your work" first (one notebook is open at a time).
    page.wait_for_function(
        "() => document.querySelector('.jp-Dialog') || !document.querySelector('.jp-NotebookPanel')"
    )
    if discard.count():
        discard.click()
    expect(panels).to_have_count(0)


def drag_slider(page: Page, slider: Locator, *, to: str) -> None:
    """Drag an ipywidgets slider's handle with the mouse past its ``"min"`` or ``"max"`` end."""
    handle = slider.locator(".noUi-handle")
    track = slider.locator(".noUi-base").bounding_box()
    grip = handle.bounding_box()
    assert track is not None and grip is not None, "the slider is not on screen"
    y = grip["y"] + grip["height"] / 2
    x = track["x"] + track["width"] + 30 if to == "max" else track["x"] - 30
    page.mouse.move(grip["x"] + grip["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(x, y, steps=8)
    page.mouse.up()


def type_slider_value(page: Page, slider: Locator, value: str) -> None:
    """Type a value into a slider's editable readout and press Enter."""
    readout = slider.locator(".widget-readout")
    readout.click()
    page.keyboard.press("Control+a")
    page.keyboard.type(value)
    page.keyboard.press("Enter")


def shown_probability(text: str) -> float:
    """The acceptance probability in the explorer's ``... min(1, p/q) = ... = 0.625`` line."""
    line = next(line for line in text.splitlines() if "min(1, p/q)" in line)
    return float(line.rsplit("=", 1)[1].strip())


def image_loaded(img: Locator) -> bool:
    """True when an ``<img>`` has finished loading a non-empty picture."""
    return img.evaluate("img => img.complete && img.naturalWidth > 0")


def error_outputs(nb: nbformat.NotebookNode) -> dict[int, str]:
    """Map the index of each code cell that raised to its exception name."""
    found = {}
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.output_type == "error":
                found[i] = out.ename
    return found


def not_run(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells without an execution count."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and not c.execution_count]


def describe_errors(nb: nbformat.NotebookNode) -> str:
    """One line per failed cell: its index, the exception and the cell's first line."""
    lines = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.output_type == "error":
                first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                lines.append(f"cell {i} ({first[:60]}): {out.ename}: {out.evalue[:300]}")
    return "\n".join(lines) or "no error"


def nbgrader_meta(cell: nbformat.NotebookNode) -> dict:
    return cell.metadata.get("nbgrader", {})
