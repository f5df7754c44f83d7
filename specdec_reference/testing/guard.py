"""Detect a learner notebook that uses the reference implementation.

:func:`reference_guard` runs at the top of every hidden test: it looks at whether the
reference was imported before the first test, at the learner's executed cells, and at
the code of the functions under test (:func:`assert_no_reference`).
"""

from __future__ import annotations

import ast
import functools
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .convert import _show

#: The package that learner code must not use.
REFERENCE_PACKAGE = "specdec_reference"
#: Notebook global in which the first hidden test records whether the reference
#: was already imported (by the learner) before any test imported it.
PRELOADED_KEY = "_specdec_preloaded"
#: Markers of cells written by the instructor, skipped when scanning learner cells.
_TEST_CELL_MARKERS = ("### BEGIN HIDDEN TESTS", "reference_guard(")


def _is_reference_object(value: Any) -> bool:
    """True for the reference package, its modules, and anything defined in them."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
    else:
        name = getattr(value, "__module__", None)
        if not isinstance(name, str):
            return False
    return name == REFERENCE_PACKAGE or name.startswith(REFERENCE_PACKAGE + ".")


def _mentions_reference(text: str) -> bool:
    return text == REFERENCE_PACKAGE or text.startswith(REFERENCE_PACKAGE + ".")


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """Yield ``code`` and every code object nested in it (inner functions, lambdas...)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _reference_uses(fn: Any, seen: set[int]) -> list[str]:
    """Return how ``fn`` (and the notebook functions it calls) reach the reference."""
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if _is_reference_object(fn):
        return [f"{name} is the reference's own {type(fn).__name__}"]
    # Unwrap partials, decorated functions and bound methods to the code underneath.
    inner = [
        getattr(fn, attr)
        for attr in ("func", "__wrapped__", "__func__")
        if hasattr(fn, attr) and not isinstance(fn, type)
    ]
    if isinstance(fn, functools.partial):
        inner += list(fn.args) + list(fn.keywords.values())
    found = [use for obj in inner for use in _reference_uses(obj, seen)]
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return found
    fn_globals = getattr(fn, "__globals__", {})
    referenced: list[Any] = list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    referenced += [cell.cell_contents for cell in (fn.__closure__ or ()) if _cell_is_set(cell)]
    for sub in _code_objects(code):
        for word in sub.co_names:
            if _mentions_reference(word):
                found.append(f"{name} uses the name {word}")
            elif word in fn_globals:
                referenced.append(fn_globals[word])
        for const in sub.co_consts:
            if isinstance(const, str) and _mentions_reference(const):
                found.append(f"{name} names {const!r}")
    for value in referenced:
        if _is_reference_object(value):
            found.append(
                f"{name} uses {getattr(value, '__name__', _show(value))} from {REFERENCE_PACKAGE}"
            )
        elif isinstance(value, (types.FunctionType, functools.partial)):
            found += _reference_uses(value, seen)
    return found


def _cell_is_set(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (raises ValueError while empty)
    except ValueError:
        return False
    return True


def assert_no_reference(fn: Any, *, name: str | None = None) -> None:
    r"""Fail if ``fn``, or a notebook function it calls, uses ``specdec_reference``.

    Looks at the function itself, its code and every nested code object (names,
    imports, string constants), the globals it reads, its defaults and closure,
    and recursively the functions those lead to.

    Examples
    --------
    >>> notebook = {"__name__": "__main__"}
    >>> exec("import specdec_reference\n"
    ...      "def accept_prob(p, q):\n"
    ...      "    return specdec_reference.accept_prob(p, q)\n", notebook)
    >>> assert_no_reference(notebook["accept_prob"])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: accept_prob must be your own code, but accept_prob uses the name
    specdec_reference. Graded functions may not use the reference implementation
    specdec_reference.
    >>> exec("def own(p, q):\n    return min(1.0, p / q)\n", notebook)
    >>> assert_no_reference(notebook["own"])
    """
    uses = _reference_uses(fn, set())
    if uses:
        label = name or getattr(fn, "__name__", "this function")
        raise AssertionError(
            f"{label} must be your own code, but {'; '.join(dict.fromkeys(uses))}. Graded "
            f"functions may not use the reference implementation {REFERENCE_PACKAGE}."
        )


def _learner_cells_using_reference(history: Sequence[Any]) -> list[str]:
    """Return the lines of executed learner cells that import or name the reference."""
    found = [
        line
        for source in history
        if isinstance(source, str) and not any(m in source for m in _TEST_CELL_MARKERS)
        for line in _reference_lines(source)
    ]
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=4096)
def _reference_lines(source: str) -> tuple[str, ...]:
    """The lines of one cell's ``source`` that import or name the reference.

    Memoized: every hidden test rescans all the cells executed before it, so without
    it a notebook's scan grows with the square of its length (a quarter of a second
    of E7.2's hidden tests).  The answer depends on the text alone.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hit = any(_mentions_reference(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            hit = node.level == 0 and _mentions_reference(node.module or "")
        elif isinstance(node, ast.Name):
            hit = _mentions_reference(node.id)
        elif isinstance(node, ast.Constant):
            hit = isinstance(node.value, str) and _mentions_reference(node.value)
        else:
            hit = False
        if hit:
            found.append(source.splitlines()[node.lineno - 1].strip())
    return tuple(found)


def reference_guard(namespace: Mapping[str, Any], names: Sequence[str] = ()) -> None:
    """Fail if the learner's notebook imported or uses ``specdec_reference``.

    Three checks, so that the hidden tests' own imports of the reference do not
    count against the learner:

    1. ``namespace[PRELOADED_KEY]``: recorded by the first hidden test before it
       imported anything, True when the reference was already in ``sys.modules``;
    2. the cells executed so far (IPython's ``_ih``), skipping instructor test
       cells, must not import or name the reference;
    3. each function in ``names`` must pass :func:`assert_no_reference`.

    Examples
    --------
    >>> ns = {"_ih": ["", "from specdec_reference import accept_prob"]}
    >>> reference_guard(ns)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: Your notebook uses the reference implementation (from specdec_reference
    import accept_prob). The graded functions must be your own code, so every hidden test fails
    while it does: remove it, restart the kernel and run all cells.
    """
    problems = []
    if namespace.get(PRELOADED_KEY):
        problems.append(f"{REFERENCE_PACKAGE} was imported before the tests ran")
    problems += _learner_cells_using_reference(namespace.get("_ih") or ())
    if problems:
        raise AssertionError(
            f"Your notebook uses the reference implementation ({'; '.join(problems)}). "
            "The graded functions must be your own code, so every hidden test fails while "
            "it does: remove it, restart the kernel and run all cells."
        )
    for name in names:
        if name in namespace:
            assert_no_reference(namespace[name], name=name)
