"""The README and the pages of docs/ point at what exists and show commands that run.

* Every relative link in ``README.md``, ``CHANGELOG.md`` and ``docs/*.md`` names an
  existing file or folder; a link with a ``#fragment`` names an existing heading of its
  target, by GitHub's anchor rule (lowercase, punctuation but hyphens and spaces dropped,
  spaces to hyphens, ``-1``, ``-2`` for repeats).
* Every command in a ``console`` block that runs ``specdec-course`` (``specdec-course``,
  ``.venv/bin/specdec-course``, ``python -m autograder``) names a real verb, each of its
  ``--options`` appears in that verb's ``--help``, a value given to an option with fixed
  choices is one of them, and every assignment it names is a folder of ``source/``.
* Every ``make`` command names a target of the ``Makefile``, and every Python script a
  ``.venv/bin/python`` command runs exists.
* The README says of each make target what its rule runs (``make test``'s sessions,
  processes and slowest tests, what ``make test-fast`` leaves out, what ``make clean``
  removes, the Debian packages the set-up installs...), and shows every target.
* ``docs/architecture.md``'s module map has a row for every module of ``autograder/`` and
  ``specdec_reference/``.

The help texts come from one process that runs the command's entry point (the
``specdec-course`` script of ``pyproject.toml``) once for each verb the pages use, with
``--help``, and are cached for the whole module.  No kernel starts: ``--help`` grades
nothing.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from support.course import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: read the one line by hand
    tomllib = None

#: The pages checked.
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
#: How a command line may start the course's command (the rest are its arguments).
COMMAND_PREFIXES = (("specdec-course",), (".venv/bin/specdec-course",))
SEPARATORS = {";", "&&", "||", "|", "&"}

# ---------------------------------------------------------------------------------------
# Reading Markdown
# ---------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class Line:
    page: Path
    number: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.number}"


def _lines(page: Path) -> list[tuple[int, str, str | None]]:
    """``(line number, text, info string of the fenced block it is in, or None)``.

    Fence lines themselves are reported with the info ``"fence"``.
    """
    out = []
    fence: str | None = None
    info: str | None = None
    for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        match = _FENCE.match(text)
        if fence is None and match:
            fence, info = match.group(1)[0] * 3, match.group(2) or ""
            out.append((number, text, "fence"))
        elif fence is not None and text.strip().startswith(fence):
            fence = info = None
            out.append((number, text, "fence"))
        else:
            out.append((number, text, info))
    return out


def anchor_slugs(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for _, text, info in _lines(page):
        match = _HEADING.match(text) if info is None else None
        if not match:
            continue
        slug = github_slug(match.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


def github_slug(heading: str) -> str:
    """A heading's anchor, by GitHub's rule.

    >>> github_slug("`submitted/` is never harmed")
    'submitted-is-never-harmed'
    >>> github_slug("What 10,000 submissions would take")
    'what-10000-submissions-would-take'
    >>> github_slug("See [the guide](guide.md): *options*")
    'see-the-guide-options'
    """
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = unicodedata.normalize("NFC", text.strip().lower())
    text = "".join(ch for ch in text if ch in "-_ " or unicodedata.category(ch)[0] in "LNM")
    return text.replace(" ", "-")


def links(page: Path) -> list[tuple[Line, str]]:
    """Every relative link of ``page`` outside code: ``(line, target)``."""
    found = []
    for number, text, info in _lines(page):
        if info is not None:
            continue
        prose = re.sub(r"(`+)(?:(?!\1).)+\1", lambda m: "x" * len(m.group(0)), text)
        for match in _LINK.finditer(prose):
            target = text[match.start(1) : match.end(1)]
            if not _SCHEME.match(target):
                found.append((Line(page, number, text), target))
    return found


def console_commands(page: Path) -> list[tuple[Line, str]]:
    """Every command line of the ``console`` blocks of ``page`` (continuations joined)."""
    found = []
    pending: tuple[int, str] | None = None
    for number, text, info in _lines(page):
        if info != "console":
            pending = None
            continue
        if pending is not None:
            start, command = pending
            command = command + " " + text.strip()
        elif text.startswith("$ "):
            start, command = number, text[2:].strip()
        elif text.startswith(tuple(p[0] + " " for p in COMMAND_PREFIXES)):
            start, command = number, text.strip()
        else:
            continue
        if command.endswith("\\"):
            pending = (start, command[:-1].rstrip())
            continue
        pending = None
        found.append((Line(page, start, command), command))
    return found


def segments(command: str) -> list[list[str]]:
    """The simple commands of a shell line (split at ``;``, ``&&``, ``|``...), as words."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    for word in lexer:
        if word in SEPARATORS:
            out.append([])
        else:
            out[-1].append(word)
    return [words for words in out if words]


def course_arguments(words: list[str]) -> list[str] | None:
    """The arguments of a ``specdec-course`` command, or None for another command."""
    for prefix in COMMAND_PREFIXES:
        if tuple(words[: len(prefix)]) == prefix:
            return words[len(prefix) :]
    if len(words) >= 3 and words[0].endswith("python") and words[1:3] == ["-m", "autograder"]:
        return words[3:]
    return None


# ---------------------------------------------------------------------------------------
# What exists: files, headings, verbs and their options, Makefile targets
# ---------------------------------------------------------------------------------------


@functools.cache
def headings_of(path: Path) -> set[str]:
    return anchor_slugs(path)


def entry_point() -> str:
    """``module:function`` of the ``specdec-course`` script in ``pyproject.toml``."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is not None:
        return tomllib.loads(text)["project"]["scripts"]["specdec-course"]
    return re.search(r'^specdec-course\s*=\s*"([^"]+)"', text, flags=re.M).group(1)


#: Runs the command's entry point with ``<verb> --help`` for each verb in argv, in one
#: process (each run as the ``specdec-course`` script runs it), and prints the results.
_HELP_DRIVER = """
import contextlib, importlib, io, json, sys
module, _, name = sys.argv[1].partition(":")
verbs = sys.argv[2:]
main = getattr(importlib.import_module(module), name)
out = {}
for verb in verbs:
    sys.argv = ["specdec-course", *([verb] if verb else []), "--help"]
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main()
        except SystemExit as exc:
            code = exc.code
    out[verb] = [code or 0, stdout.getvalue(), stderr.getvalue()]
print(json.dumps(out))
"""


@functools.cache
def help_texts(verbs: tuple[str, ...]) -> dict[str, tuple[int, str, str]]:
    """``{verb: (exit code, stdout, stderr)}`` of ``specdec-course <verb> --help``.

    The verb ``""`` is the command's own ``--help``.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _HELP_DRIVER, entry_point(), *verbs],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return {verb: tuple(result) for verb, result in json.loads(proc.stdout).items()}


def listed_verbs(top_help: str) -> list[str]:
    """The verbs that the command's own ``--help`` lists."""
    after = top_help.split("positional arguments:", 1)[-1]
    return re.findall(r"^    (\w[\w-]*)\s", after, flags=re.M)


def verb_help(verb: str) -> str | None:
    """The help text of ``verb``, or None when it is not one of the command's verbs."""
    texts = help_texts(DOC_VERBS)
    if verb and verb not in listed_verbs(texts[""][1]):
        return None
    if verb not in texts:  # a verb no page uses (the checks' own test)
        texts = help_texts((verb,))
    code, out, _ = texts[verb]
    usage = f"usage: specdec-course {verb}".rstrip()
    return out if code == 0 and out.startswith(usage) else None


def options_in(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", help_text))


def choices_in(help_text: str) -> dict[str, set[str]]:
    """``{option: its choices}`` for the options with fixed choices (``--to {a,b}``)."""
    return {
        option: set(values.split(","))
        for option, values in re.findall(r"(--[\w-]+)[ =]\{([^}]*)\}", help_text)
    }


@functools.cache
def make_targets() -> set[str]:
    make = parse_makefile((REPO / "Makefile").read_text(encoding="utf-8"))
    return (set(make.rules) | set(make.phony())) - {".PHONY"}


def assignments() -> set[str]:
    return {p.name for p in (REPO / "source").iterdir() if p.is_dir()}


# ---------------------------------------------------------------------------------------
# The checks, as functions that return the problems they find (so that they can be tested)
# ---------------------------------------------------------------------------------------


def link_problem(line: Line, target: str) -> str | None:
    """Why a relative link does not resolve, or None."""
    path_part, _, fragment = target.partition("#")
    path = (line.page.parent / unquote(path_part)).resolve() if path_part else line.page
    if not path.exists():
        return f"{target}: no such file {path}"
    if fragment:
        if path.is_dir() or path.suffix.lower() != ".md":
            return f"{target}: a #fragment on {path.name}, which has no headings"
        if unquote(fragment) not in headings_of(path):
            known = ", ".join(sorted(headings_of(path)))
            return f"{target}: {path.name} has no heading #{fragment} (it has: {known})"
    return None


def command_problems(command: str) -> list[str]:
    """What is wrong with the ``specdec-course``, ``make`` and Python parts of a command."""
    problems = []
    for words in segments(command):
        args = course_arguments(words)
        if args is not None:
            problems += _course_problems(args)
        elif words[0] == "make":
            for target in words[1:]:
                if not target.startswith("-") and "=" not in target:
                    if target not in make_targets():
                        problems.append(f"make {target}: no such target in the Makefile")
        elif words[0].endswith("/python") or words[0] in ("python", "python3"):
            for word in words[1:]:
                if word.endswith(".py") and not (REPO / word).is_file():
                    problems.append(f"{word}: no such script")
    return problems


def _course_problems(args: list[str]) -> list[str]:
    verb = args[0] if args and not args[0].startswith("-") else ""
    text = verb_help(verb)
    if text is None:
        return [f"specdec-course {verb}: not a verb of the command"]
    problems = []
    known, choices = options_in(text), choices_in(text)
    rest = args[1:] if verb else args
    for i, word in enumerate(rest):
        if not word.startswith("-") or word == "-":
            continue
        option, has_value, value = word.partition("=")
        if option not in known:
            problems.append(f"specdec-course {verb}: no option {option}")
            continue
        if option in choices:
            given = value if has_value else (rest[i + 1] if i + 1 < len(rest) else None)
            if given is not None and given not in choices[option]:
                problems.append(
                    f"specdec-course {verb} {option} {given}: not one of {sorted(choices[option])}"
                )
    for word in rest:
        if re.fullmatch(r"e\d+_\d+_\w+", word) and word not in assignments():
            problems.append(f"{word}: no such assignment in source/")
    return problems


# ---------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------

LINKS = [(line, target) for page in PAGES for line, target in links(page)]


def _checked(command: str) -> bool:
    """Whether a command runs something these checks know: the course's command, make, Python."""
    return any(
        course_arguments(w) is not None or w[0] == "make" or w[0].endswith("python")
        for w in segments(command)
    )


COMMANDS = [
    (line, command)
    for page in PAGES
    for line, command in console_commands(page)
    if _checked(command)
]


def _verbs_used() -> tuple[str, ...]:
    verbs = {""}
    for _, command in COMMANDS:
        for words in segments(command):
            args = course_arguments(words)
            if args and not args[0].startswith("-"):
                verbs.add(args[0])
    return tuple(sorted(verbs))


DOC_VERBS = _verbs_used()


def test_the_pages_have_links_and_commands_to_check():
    assert len(PAGES) >= 10, [p.name for p in PAGES]
    assert len(LINKS) >= 50
    assert sum(course_arguments(w) is not None for _, c in COMMANDS for w in segments(c)) >= 20
    assert {"release", "grade", "export", "report"} <= set(DOC_VERBS)


@pytest.mark.parametrize(
    ("line", "target"), LINKS, ids=[f"{line.where} {target}" for line, target in LINKS]
)
def test_relative_link_resolves(line, target):
    problem = link_problem(line, target)
    assert problem is None, f"{line.where}: {problem}"


@pytest.mark.parametrize(
    ("line", "command"), COMMANDS, ids=[f"{line.where} {command}" for line, command in COMMANDS]
)
def test_console_command_names_real_verbs_options_and_targets(line, command):
    problems = command_problems(command)
    assert not problems, f"{line.where}: {command}\n" + "\n".join(problems)


def test_every_verb_of_the_command_is_documented_in_the_instructors_guide():
    """The guide has a section for each verb that the command's own --help lists."""
    top = verb_help("")
    assert top is not None
    listed = listed_verbs(top)
    assert len(listed) >= 7, top
    guide = headings_of(REPO / "docs" / "instructor-guide.md")
    assert [v for v in listed if v not in guide] == []


def test_the_checks_catch_a_broken_link_a_missing_heading_and_a_wrong_option(tmp_path):
    """Each check fails on a page that is wrong in its way (a scratch page, not the docs)."""
    page = tmp_path / "docs" / "scratch.md"
    page.parent.mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading, here\n")
    page.write_text(
        "# Scratch\n\n[gone](missing.md) [no heading](other.md#nowhere) "
        "[fine](other.md#a-heading-here) [self](#scratch) `[code](not-a-link.md)`\n\n"
        "```console\n$ specdec-course grade e7_2_acceptance_tests --no-such-option\n"
        "$ .venv/bin/specdec-course export e7_2_acceptance_tests --to nowhere\n"
        "$ specdec-course regrade e7_2_acceptance_tests\n"
        "$ specdec-course report e9_9_no_such_lesson\n"
        "$ make no-such-target && make demo\n"
        "$ .venv/bin/python benchmarks/no_such_benchmark.py\n"
        "$ specdec-course grade e7_2_acceptance_tests --lms canvas \\\n"
        "      --workers 2   # fine\n"
        "```\n"
    )
    found = {target: link_problem(line, target) for line, target in links(page)}
    assert list(found) == ["missing.md", "other.md#nowhere", "other.md#a-heading-here", "#scratch"]
    assert found["missing.md"] and found["other.md#nowhere"]
    assert found["other.md#a-heading-here"] is None and found["#scratch"] is None
    commands = [command for _, command in console_commands(page)]
    problems = [command_problems(c) for c in commands]
    assert ["--no-such-option" in " ".join(p) for p in problems[:1]] == [True]
    assert "nowhere" in " ".join(problems[1])
    assert "not a verb" in " ".join(problems[2])
    assert "e9_9_no_such_lesson" in " ".join(problems[3])
    assert problems[4] == ["make no-such-target: no such target in the Makefile"]
    assert "no_such_benchmark.py" in " ".join(problems[5])
    assert commands[6].endswith("--workers 2   # fine") and problems[6] == []


# ---------------------------------------------------------------------------------------
# The module map: every module of the two packages has its row
# ---------------------------------------------------------------------------------------

_ROW_LINK = re.compile(r"\]\(\.\./([^)#\s]+)\)")


def module_map(architecture: str) -> list[str]:
    """The rows of the architecture page's module map (its tables' lines)."""
    section = architecture.split("\n## Module map", 1)[-1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


def _row_targets(row: str) -> set[str]:
    """The repository paths a row links to, a package's ``__init__.py`` as its folder."""
    return {t.removesuffix("/__init__.py").rstrip("/") for t in _ROW_LINK.findall(row)}


def module_map_problems(architecture: str, root: Path = REPO) -> list[str]:
    """The modules and packages of ``autograder/`` and ``specdec_reference/`` that the module
    map leaves out.

    A package with a section of its own (``### `autograder/intake/` ...``) has a row for each
    of its modules; a package without one (``handout/``, ``testing/``) has one row, linked to
    it, that names in backticks each of its modules and subpackages (``kit.py`` or ``kit``,
    ``e7_1/``).
    """
    rows = module_map(architecture)
    linked = set().union(*map(_row_targets, rows))
    sections = set(re.findall(r"^### `([\w/]+?)/?`", architecture, flags=re.M))
    problems = []
    for top in ("autograder", "specdec_reference"):
        inits = sorted((root / top).glob("*/__init__.py"))
        for package in [top, *(str(p.parent.relative_to(root)) for p in inits)]:
            folder = root / package
            modules = sorted(m for m in folder.glob("*.py") if m.name != "__init__.py")
            if package in sections:
                problems += [
                    f"{package}/{m.name}: no row in the module map"
                    for m in modules
                    if f"{package}/{m.name}" not in linked
                ]
                continue
            row = next((r for r in rows if package in _row_targets(r)), None)
            if row is None:
                problems.append(f"{package}/: no section or row in the module map")
                continue
            named = set(re.findall(r"`([\w.]+?)(?:\.py|/)?`", row))
            parts = [m.stem for m in modules]
            parts += [d.name for d in sorted(folder.iterdir()) if (d / "__init__.py").is_file()]
            problems += [
                f"{package}/{p}: not named in its row of the module map"
                for p in parts
                if p not in named
            ]
    return problems


# ---------------------------------------------------------------------------------------
# The make targets, as the README describes them
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Makefile:
    variables: dict[str, str]  #: as assigned (``=``, ``:=`` or ``?=``), unexpanded
    rules: dict[str, tuple[list[str], list[str]]]  #: target -> (prerequisites, recipe lines)

    def expand(self, text: str) -> str:
        for _ in range(10):
            text = re.sub(r"\$\((\w+)\)", lambda m: self.variables.get(m.group(1), ""), text)
        return text.replace("$$", "$")

    def recipe(self, target: str) -> list[str]:
        return [self.expand(line) for line in self.rules[target][1]]

    def prerequisites(self, target: str) -> list[str]:
        return [self.expand(p) for p in self.rules[target][0]]

    def phony(self) -> list[str]:
        return self.prerequisites(".PHONY")


def parse_makefile(text: str) -> Makefile:
    """The variables and rules of a Makefile as simple as the course's."""
    variables: dict[str, str] = {}
    rules: dict[str, tuple[list[str], list[str]]] = {}
    current: list[str] | None = None
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        if line.startswith("\t") and current is not None:
            current.append(line.strip())
            continue
        line = line.split("#", 1)[0].rstrip() if not line.startswith("\t") else line
        assignment = re.match(r"^(\w+)\s*(?:\?=|:=|=)\s*(.*)$", line)
        rule = re.match(r"^([^\s:=][^:=]*?)\s*:(?!=)\s*(.*)$", line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2)
            current = None
        elif rule:
            current = []
            for target in rule.group(1).split():
                rules[target] = (rule.group(2).split(), current)
        elif line.strip():
            current = None
    made = Makefile(variables, {})
    made.rules.update({made.expand(t): r for t, r in rules.items()})
    return made


_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
#: What ``make test-fast``'s comment names, as the pytest markers it leaves out.
_FAST_EXCLUDES = {
    "kernel": "kernel",
    "browser": "browser",
    "Dask cluster": "cluster",
    "database server": "postgres",
    "hub": "hub",
}
#: What ``make bench``'s comment names, as the commands of its recipe.
_BENCHMARKS = {
    "reference sampler": "-m specdec_reference.bench",
    "Run all": "benchmarks/run_all.py",
    "grading throughput": "benchmarks/grade_throughput.py",
}


def _make_comments(readme: str) -> dict[str, str]:
    """``target -> comment`` for each ``$ make <target>  # comment`` line of the README."""
    return dict(re.findall(r"^\$ make ([\w-]+)\s+#\s*(.*)$", readme, flags=re.M))


def _listed(text: str) -> list[str]:
    """The items of an English list: ``a, b, c or d`` (``and`` too)."""
    return [w.strip() for w in re.split(r",\s*|\s+(?:or|and)\s+", text) if w.strip()]


def readme_make_problems(readme: str, makefile: str, system_deps: str) -> list[str]:
    """Where the README says of a make target what its Makefile rule does not do."""
    make = parse_makefile(makefile)
    comments = _make_comments(readme)
    problems = [
        f"make {t}: a target of the Makefile the README does not show"
        for t in make.phony()
        if not re.search(rf"`?make {re.escape(t)}\b", readme)
    ]
    problems += [
        f"make {t}: the README shows a target the Makefile does not have"
        for t in comments
        if t not in make.rules
    ]
    return (
        problems
        + _make_test_problems(readme, make)
        + _listed_target_problems(comments, make)
        + _clean_problems(readme, make)
        + _set_up_problems(readme, make, system_deps)
    )


def _runs(make: Makefile, target: str, fragment: str) -> bool:
    return any(fragment in line for line in make.recipe(target))


def _make_test_problems(readme: str, make: Makefile) -> list[str]:
    """``make test``: its sessions, its processes, its slowest tests."""
    said = re.search(
        r"`make test` runs the whole suite in (\w+) pytest sessions?, in (\w+) processes, "
        r"and ends with\s+its (\d+) slowest tests",
        readme,
    )
    if not said:
        return ["make test: the README no longer says how many sessions and processes"]
    recipe = make.recipe("test")
    sessions = sum("pytest" in line for line in recipe)
    workers = re.search(r"-n (\S+)", " ".join(recipe))
    slowest = re.search(r"--durations=(\d+)", " ".join(recipe))
    problems = []
    if _NUMBERS.get(said.group(1)) != sessions:
        problems.append(f"make test: {said.group(1)} session(s) said, {sessions} run")
    if workers is None or str(_NUMBERS.get(said.group(2))) != workers.group(1):
        shown = workers.group(1) if workers else "none"
        problems.append(f"make test: {said.group(2)} processes said, -n {shown} run")
    if slowest is None or slowest.group(1) != said.group(3):
        shown = slowest.group(1) if slowest else "none"
        problems.append(f"make test: {said.group(3)} slowest said, --durations={shown} run")
    return problems


def _listed_target_problems(comments: dict[str, str], make: Makefile) -> list[str]:
    """The targets whose comment lists what they run: test-fast, bench, lint, and the verbs."""
    problems = []
    if "test-fast" in comments:
        excluded = set(re.findall(r"not (\w+)", make.expand("$(FAST)")))
        named = re.search(r"no (.*)$", comments["test-fast"])
        said = {_FAST_EXCLUDES.get(w, w) for w in _listed(named.group(1) if named else "")}
        if said != excluded:
            problems.append(
                f"make test-fast: leaves out {sorted(said)} said, {sorted(excluded)} run"
            )
    if "bench" in comments:
        named = _listed(comments["bench"].split(":", 1)[-1])
        commands = make.recipe("bench")
        run = {c for c in _BENCHMARKS.values() if any(c in line for line in commands)}
        if {_BENCHMARKS.get(w, w) for w in named} != run or len(commands) != len(run):
            problems.append(f"make bench: {named} said, {commands} run")
    if "lint" in comments:
        tools = _listed(comments["lint"])
        problems += [f"make lint: {t!r} said, not run" for t in tools if not _runs(make, "lint", t)]
        if len(make.recipe("lint")) != len(tools):
            problems.append(f"make lint: {tools} said, {make.recipe('lint')} run")
    for verb in ("demo", "lab", "release"):
        if verb in make.rules and not _runs(make, verb, f"specdec-course {verb}"):
            problems.append(f"make {verb}: does not run specdec-course {verb}")
    learner = make.expand("$(LEARNER_VENV)") + "/bin/specdec-course"
    if "learner" in comments.get("lab", "") and not _runs(make, "lab", learner):
        problems.append("make lab: the learner's JupyterLab said, not the learner's environment")
    return problems


def _clean_problems(readme: str, make: Makefile) -> list[str]:
    """``make clean``: what it removes."""
    said = re.search(r"`make clean` removes (.*?)\.\s", readme, flags=re.S)
    text = said.group(1) if said else ""
    named = {w.rstrip("/") for w in re.findall(r"`([^`]+)`", text)}
    if "the demo and scratch folders" in text:
        named |= {".demo", ".scratch"}
    removed = {w.rstrip("/") for line in make.recipe("clean") for w in line.split()[2:]}
    if named != removed:
        return [f"make clean: removes {sorted(named)} said, {sorted(removed)} run"]
    return []


def _set_up_problems(readme: str, make: Makefile, system_deps: str) -> list[str]:
    """``make demo`` and ``make test`` set themselves up, the Debian packages included."""
    installs = set(re.findall(r"missing\+=\(([\w.-]+)\)", system_deps))
    said = re.search(
        r"Debian packages it needs when they are\s+missing: (.*?)\.\s+[A-Z]", readme, re.S
    )
    listed = re.sub(r"\([^)]*\)", "", said.group(1)) if said else ""  # not what it says of each
    named = set(re.findall(r"`([\w.-]+)`", listed))
    problems = []
    if named != installs:
        problems.append(f"Debian packages: {sorted(named)} said, {sorted(installs)} installed")
    stamp = make.expand("$(STAMP)")
    for target in ("demo", "test"):
        if stamp not in make.prerequisites(target):
            problems.append(f"make {target}: does not set itself up ({stamp})")
    if not _runs(make, stamp, "install-system-deps.sh"):
        problems.append("the set-up does not install the Debian packages")
    return problems


ARCHITECTURE = REPO / "docs" / "architecture.md"
MAKE_FILES = ("README.md", "Makefile", "scripts/install-system-deps.sh")


def test_the_module_map_names_every_module():
    assert module_map_problems(ARCHITECTURE.read_text(encoding="utf-8")) == []


def test_the_readme_says_what_each_make_target_does():
    texts = [(REPO / name).read_text(encoding="utf-8") for name in MAKE_FILES]
    assert readme_make_problems(*texts) == []


def test_the_map_and_make_checks_catch_a_missing_module_and_a_wrong_description():
    """Each check fails on a page or a Makefile that is wrong in its way."""
    page = ARCHITECTURE.read_text(encoding="utf-8")
    no_row = "\n".join(line for line in page.splitlines() if "tree_decoding.py" not in line)
    assert module_map_problems(no_row) == [
        "specdec_reference/tree_decoding.py: no row in the module map"
    ]
    no_kit = page.replace("(`kit.py`)", "")
    assert module_map_problems(no_kit) == [
        "autograder/handout/kit: not named in its row of the module map"
    ]

    readme, makefile, deps = ((REPO / name).read_text(encoding="utf-8") for name in MAKE_FILES)
    said = re.search(r"`make test` runs .*?\.\n", readme, flags=re.S).group(0)
    two_parts = readme.replace(
        said,
        "`make test` runs the fast tests on every core, then the rest; each part ends with its "
        "25\nslowest tests and pytest's summary line.\n",
    )
    wrong = {
        "two parts": (two_parts, makefile, deps),
        "workers": (readme, makefile.replace("TEST_WORKERS ?= 3", "TEST_WORKERS ?= 2"), deps),
        "durations": (readme, makefile.replace("--durations=25", "--durations=10"), deps),
        "test-fast": (readme, makefile.replace(" and not hub", ""), deps),
        "bench": (readme, makefile.replace("\t$(BIN)/python benchmarks/run_all.py\n", ""), deps),
        "lint": (readme, makefile.replace("\t$(BIN)/ruff format --check", "\t#"), deps),
        "lab": (
            readme,
            makefile.replace("$(LEARNER_VENV)/bin/specdec-course lab", "$(BIN)/specdec-course lab"),
            deps,
        ),
        "clean": (readme, makefile.replace(" gradebook.db\n", "\n"), deps),
        "debian": (readme, makefile, deps.replace("missing+=(npm)", "true")),
        "set-up": (readme, makefile.replace("demo: $(STAMP)", "demo:"), deps),
        "phony": (readme, makefile.replace("bench clean", "bench clean docs"), deps),
    }
    found = {name: readme_make_problems(*texts) for name, texts in wrong.items()}
    assert {name: len(problems) for name, problems in found.items()} == dict.fromkeys(wrong, 1)
    assert "no longer says" in found["two parts"][0]
    assert "-n 2" in found["workers"][0] and "--durations=10" in found["durations"][0]
    assert "hub" in found["test-fast"][0] and "npm" in found["debian"][0]
    assert "gradebook.db" in found["clean"][0] and "make docs" in found["phony"][0]
