"""The static scan: flags for suspicious code in a submission's learner-editable cells.

An AST walk (after IPython's own input transformation, so magics parse) that names code
with no business in a solution: IPython transformers and callbacks, monkeypatched
numpy/math/builtins, trace hooks, ``os._exit``, the reference package, the course files.
"""

from __future__ import annotations

import ast
import re
from types import MappingProxyType

from IPython.core.inputtransformer2 import TransformerManager
from nbformat import NotebookNode

from autograder.integrity.flags import REFERENCE_PACKAGES

_WATCHED = MappingProxyType(
    {"numpy": "numpy", "math": "math", "builtins": "builtins", "operator": "operator"}
)


_IPYTHON_TAMPER_ATTRS = MappingProxyType(
    {
        "input_transformers_cleanup": "tamper:input-transformer",
        "input_transformers_post": "tamper:input-transformer",
        "input_transformer_manager": "tamper:input-transformer",
        "ast_transformers": "tamper:ast-transformer",
        "set_custom_exc": "tamper:custom-exception-handler",
        "custom_exceptions": "tamper:custom-exception-handler",
        "showtraceback": "tamper:kernel-patched",
        "_showtraceback": "tamper:kernel-patched",
        "showsyntaxerror": "tamper:kernel-patched",
        "InteractiveTB": "tamper:kernel-patched",
        "run_ast_nodes": "tamper:kernel-patched",
        "run_cell_async": "tamper:kernel-patched",
        "transform_cell": "tamper:kernel-patched",
    }
)


_SHELL_BENIGN = frozenset({"run_line_magic", "run_cell_magic", "magic", "system", "getoutput"})


_BUILTIN_NAMES = frozenset(
    {
        "abs",
        "all",
        "any",
        "bool",
        "dict",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "getattr",
        "hasattr",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "list",
        "map",
        "max",
        "min",
        "next",
        "pow",
        "print",
        "range",
        "repr",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "type",
        "zip",
        "AssertionError",
        "Exception",
        "BaseException",
        "TypeError",
        "ValueError",
    }
)


_FAKE_OUTPUT = re.compile(r"(tests? passed|all tests|\bpassed\b|✓|✔|100\s*%|full marks)", re.I)


_COURSE_PATHS = re.compile(
    r"(gradebook\.db|(^|/)(source|release|submitted|autograded|reports)/"
    r"|nbgrader_config|\.\./\.\.)"
)


def static_flags(nb: NotebookNode) -> list[str]:
    """Flags for suspicious code in the learner-editable cells of a submitted notebook.

    Test cells (locked ``grade`` cells) are skipped: nbgrader restores their source
    before grading.  Cells that do not parse are scanned as text.
    """
    scanner = _Scanner()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and meta.get("locked") and not meta.get("solution"):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        scanner.scan(source)
    return sorted(scanner.flags)


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.flags: set[str] = set()
        self.modules: dict[str, str] = {}  # local name -> module (or module.attr) it is
        self.shells: set[str] = set()  # names bound to get_ipython()
        self.top_level = True

    # -- entry ----------------------------------------------------------------------------
    def scan(self, source: str) -> None:
        if re.search(r"^\s*!", source, re.M):
            self.flags.add("suspect:subprocess")
        try:
            code = TransformerManager().transform_cell(source)
            tree = ast.parse(code)
        except Exception:  # not Python: look at the words
            self._scan_text(source)
            return
        self.visit(tree)

    def _scan_text(self, source: str) -> None:
        for word, flag in _IPYTHON_TAMPER_ATTRS.items():
            if word in source:
                self.flags.add(flag)
        if any(r in source for r in REFERENCE_PACKAGES):
            self.flags.add("uses-reference")
        if "os._exit" in source:
            self.flags.add("suspect:exit")

    # -- helpers --------------------------------------------------------------------------
    def _root(self, node: ast.AST) -> tuple[str | None, list[str]]:
        """(module the chain starts from, attribute names) for ``np.testing.x``."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.insert(0, node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            if node.id in self.modules:
                return self.modules[node.id], attrs
            if node.id == "__builtins__":
                return "builtins", attrs
            if node.id in self.shells:
                return "<shell>", attrs
        if isinstance(node, ast.Call) and self._is_get_ipython(node):
            return "<shell>", attrs
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("vars", "globals")
        ):
            if node.func.id == "vars" and node.args:
                module, _ = self._root(node.args[0])
                return module, ["__dict__", *attrs]
        return None, attrs

    def _is_get_ipython(self, node: ast.Call) -> bool:
        func = node.func
        return (isinstance(func, ast.Name) and func.id == "get_ipython") or (
            isinstance(func, ast.Attribute) and func.attr == "get_ipython"
        )

    def _patch(self, target: ast.AST) -> None:
        """Record an assignment to (or deletion of) ``target``."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._patch(elt)
            return
        if isinstance(target, ast.Starred):
            self._patch(target.value)
            return
        if isinstance(target, ast.Subscript):
            module, attrs = self._root(target.value)
            if module is not None and (not attrs or attrs[-1] == "__dict__"):
                self._module_patched(module, attrs)
            elif module == "sys" and attrs[:1] == ["modules"]:
                self.flags.add("tamper:import-hook")
            return
        if isinstance(target, ast.Attribute):
            if target.attr in (
                "__code__",
                "__globals__",
                "__closure__",
                "__defaults__",
                "__kwdefaults__",
            ):
                self.flags.add("suspect:code-patch")
            module, attrs = self._root(target)
            if module is not None:
                self._module_patched(module, attrs)
            return
        if isinstance(target, ast.Name):
            if target.id == "__builtins__":
                self.flags.add("tamper:monkeypatch-builtins")
            elif target.id in _BUILTIN_NAMES and self.top_level:
                self.flags.add("suspect:shadows-builtin")

    def _module_patched(self, module: str, attrs: list[str]) -> None:
        root = module.split(".")[0]
        if module == "<shell>":
            flag = next(
                (_IPYTHON_TAMPER_ATTRS[a] for a in attrs if a in _IPYTHON_TAMPER_ATTRS),
                "tamper:kernel-patched",
            )
            self.flags.add(flag)
        elif root in _WATCHED:
            self.flags.add(f"tamper:monkeypatch-{_WATCHED[root]}")
        elif root in REFERENCE_PACKAGES:
            self.flags.add("tamper:patched-reference")
        elif root == "sys":
            first = attrs[0] if attrs else ""
            if first in ("stdout", "stderr", "__stdout__", "__stderr__"):
                self.flags.add("suspect:stream-redirect")
            elif first in ("meta_path", "path_hooks", "modules", "path_importer_cache"):
                self.flags.add("tamper:import-hook")
            elif first == "path":
                self.flags.add("suspect:sys-path")
            elif first in ("excepthook", "displayhook", "settrace", "setprofile"):
                self.flags.add("tamper:kernel-patched")
        elif root in ("IPython", "ipykernel", "traitlets"):
            self.flags.add("tamper:kernel-patched")

    def _import(self, module: str) -> None:
        root = module.split(".")[0]
        if root in REFERENCE_PACKAGES:
            self.flags.add("uses-reference")
        elif root in ("ctypes", "gc", "inspect"):
            self.flags.add("suspect:introspection")
        elif root == "importlib":
            self.flags.add("suspect:dynamic-import")
        elif root in ("socket", "urllib", "http", "requests", "ssl", "asyncio.streams"):
            self.flags.add("suspect:network")
        elif root in ("subprocess", "multiprocessing", "pty"):
            self.flags.add("suspect:subprocess")
        elif root == "signal":
            self.flags.add("suspect:signal")
        elif root == "ipykernel" or module.startswith("IPython.core"):
            self.flags.add("suspect:ipython-internals")
        elif root in ("unittest", "mock"):
            self.flags.add("suspect:code-patch")

    # -- visitors ---------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(alias.name)
            if alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            return
        self._import(module)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._import(full)
            self.modules[alias.asname or alias.name] = full
            if alias.name == "get_ipython":
                self.modules.pop(alias.asname or alias.name, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._patch(target)
        if isinstance(node.value, ast.Call) and self._is_get_ipython(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.shells.add(target.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._patch(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._patch(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._patch(target)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.top_level and node.name in _BUILTIN_NAMES:
            self.flags.add("suspect:shadows-builtin")
        top, self.top_level = self.top_level, False
        self.generic_visit(node)
        self.top_level = top

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.top_level and node.name in _BUILTIN_NAMES:
            self.flags.add("suspect:shadows-builtin")
        top, self.top_level = self.top_level, False
        self.generic_visit(node)
        self.top_level = top

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _IPYTHON_TAMPER_ATTRS:
            self.flags.add(_IPYTHON_TAMPER_ATTRS[node.attr])
        module, attrs = self._root(node)
        if module == "<shell>" and attrs:
            if attrs[0] == "events":
                self.flags.add("tamper:event-callback")
            elif attrs[0] in ("system", "getoutput"):
                self.flags.add("suspect:subprocess")
            elif attrs[0] not in _SHELL_BENIGN and attrs[0] not in _IPYTHON_TAMPER_ATTRS:
                self.flags.add("suspect:ipython-internals")
        elif module == "sys" and attrs[:1] == ["modules"]:
            self.flags.add("suspect:dynamic-import")
        elif module == "sys" and attrs[:1] == ["_getframe"]:
            self.flags.add("suspect:introspection")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in REFERENCE_PACKAGES:
            self.flags.add("uses-reference")
        elif node.id in ("__import__",):
            self.flags.add("suspect:dynamic-import")
        elif node.id in ("exec", "eval", "compile") and isinstance(node.ctx, ast.Load):
            self.flags.add("suspect:dynamic-code")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            text = node.value
            if any(
                text == r or text.startswith(r + ".") or f"{r}/" in text for r in REFERENCE_PACKAGES
            ):
                self.flags.add("uses-reference")
            if _COURSE_PATHS.search(text):
                self.flags.add("suspect:course-files")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        module, attrs = self._root(func) if isinstance(func, ast.Attribute) else (None, [])
        dotted = ".".join([module or "", *attrs]) if module else ""
        name = func.id if isinstance(func, ast.Name) else None
        if name in ("setattr", "delattr") and node.args:
            target_module, target_attrs = self._root(node.args[0])
            if target_module is not None:
                self._module_patched(target_module, [*target_attrs, "?"])
        elif name in ("exit", "quit"):
            self.flags.add("suspect:exit")
        elif name == "print":
            for arg in node.args:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        if _FAKE_OUTPUT.search(sub.value):
                            self.flags.add("suspect:fake-test-output")
        elif name == "open" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                if first.value.startswith("/") or ".." in first.value:
                    self.flags.add("suspect:course-files")
        if dotted in ("os._exit", "os.kill", "os.abort", "os.killpg", "posix._exit", "sys.exit"):
            self.flags.add("suspect:exit")
        elif dotted in (
            "sys.settrace",
            "sys.setprofile",
            "threading.settrace",
            "threading.setprofile",
            "threading.settrace_all_threads",
        ):
            self.flags.add("tamper:trace")
        elif dotted.startswith("signal."):
            self.flags.add("suspect:signal")
        elif dotted in (
            "os.system",
            "os.popen",
            "os.fork",
            "os.forkpty",
            "os.spawnl",
            "os.spawnv",
            "os.execv",
            "os.execl",
            "os.posix_spawn",
            "pty.fork",
        ):
            self.flags.add("suspect:subprocess")
        elif dotted.startswith(("importlib.", "sys.modules")):
            self.flags.add("suspect:dynamic-import")
        elif dotted.startswith(("gc.", "ctypes.", "inspect.")):
            self.flags.add("suspect:introspection")
        elif dotted.startswith("sys.path.") and attrs[-1] in ("insert", "append", "extend"):
            self.flags.add("suspect:sys-path")
        elif dotted.startswith("sys.meta_path.") or dotted.startswith("sys.path_hooks."):
            self.flags.add("tamper:import-hook")
        elif module == "<shell>" and attrs and attrs[0] in ("register_magic_function",):
            self.flags.add("suspect:ipython-internals")
        if (
            module is not None
            and attrs
            and attrs[-1] in ("append", "insert", "extend", "register", "__setitem__")
        ):
            # get_ipython().input_transformers_cleanup.append(...) and the like
            self._module_patched(module, attrs[:-1]) if module == "<shell>" else None
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        name = (
            exc.func.id
            if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)
            else (exc.id if isinstance(exc, ast.Name) else None)
        )
        if name in ("SystemExit", "KeyboardInterrupt"):
            self.flags.add("suspect:exit")
        self.generic_visit(node)
