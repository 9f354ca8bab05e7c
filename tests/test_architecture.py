"""The import structure of dphist/ and dphist_audit/ (the audit ships beside the package): no import cycles, and
no module using another module's private names.  Both are read from the source (an AST scan), nothing is imported.

*The import graph* has an edge A -> B for every ``import B`` or ``from B import name`` in module A, whether at
module level or inside a function (a lazy import still ties the two modules together; it only runs later).
``from package import name`` is an edge to ``package.name`` when that is a module, else to the package's
``__init__``.  Left out: imports under ``if TYPE_CHECKING:``, which never run; and the parent packages that
Python runs before a submodule (every module would otherwise close a loop with its package's ``__init__``).

*A private import* is ``from module import _name``, or ``alias._name`` where ``alias`` is bound to another
module of the two packages (``import a.b as alias``, ``from a import b``), dunder names aside.  Imports under
``TYPE_CHECKING`` count here too: a private name is private in an annotation as well.

To list the module tree with line counts:

    find dphist dphist_audit -name '*.py' | sort | xargs wc -l
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dphist", "dphist_audit")


@dataclass(frozen=True)
class Module:
    name: str  # dotted: dphist.publishing.writers
    path: Path
    is_package: bool  # an __init__.py


def modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Module]:
    """Every module of ``packages`` under ``root``, by dotted name."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            found[name] = Module(name, path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class Facts:
    """What the scans need of one module, read in one pass over its syntax tree."""

    imports: list[tuple[ast.Import | ast.ImportFrom, bool]]  # every import at any depth; True: under TYPE_CHECKING
    private_attributes: list[ast.Attribute]  # every ``x._name``


@functools.cache
def facts(path: Path) -> Facts:
    """The :class:`Facts` of the module at ``path`` (parsed once per test process: both scans read every module)."""
    checking, imports, attributes = set(), [], []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            attributes.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            checking.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return Facts([(node, id(node) in checking) for node in imports], attributes)


def _source(module: Module, node: ast.ImportFrom) -> str:
    """The absolute dotted name that ``from ... import`` in ``module`` reads from."""
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: Module, node: ast.Import | ast.ImportFrom, known: dict[str, Module]) -> Iterator[str]:
    """The modules of ``known`` that the statement imports, or imports names from."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
        return
    source = _source(module, node)
    for alias in node.names:
        if f"{source}.{alias.name}" in known:
            yield f"{source}.{alias.name}"
        elif source in known:
            yield source


def _bindings(module: Module, node: ast.Import | ast.ImportFrom, known: dict[str, Module]) -> Iterator[tuple[str, str]]:
    """(a name the statement binds, the module of ``known`` it stands for)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname and alias.name in known:
                yield alias.asname, alias.name
            elif not alias.asname and alias.name.split(".")[0] in known:  # import a.b binds a
                yield alias.name.split(".")[0], alias.name.split(".")[0]
        return
    source = _source(module, node)
    for alias in node.names:
        if f"{source}.{alias.name}" in known:
            yield alias.asname or alias.name, f"{source}.{alias.name}"


def import_graph(known: dict[str, Module]) -> dict[str, set[str]]:
    """Module -> the modules it imports (module-level and function-level; not under TYPE_CHECKING)."""
    graph = {}
    for name, module in known.items():
        graph[name] = {target for node, checking in facts(module.path).imports if not checking
                       for target in _targets(module, node, known) if target != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle [a, b, ..., a], or None when the graph has none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once every path from it is explored
    for start in sorted(graph):
        if start in state:
            continue
        path, todo = [start], [iter(sorted(graph[start]))]
        state[start] = "open"
        while todo:
            step = next(todo[-1], None)
            if step is None:
                state[path.pop()] = "done"
                todo.pop()
            elif state.get(step) == "open":
                return path[path.index(step):] + [step]
            elif step not in state and step in graph:
                state[step] = "open"
                path.append(step)
                todo.append(iter(sorted(graph[step])))
    return None


def private_imports(known: dict[str, Module], root: Path = ROOT) -> list[str]:
    """Each use of another module's private name, as 'path:line: what'."""
    found = []
    for name, module in known.items():
        where = module.path.relative_to(root)
        bound = {}  # a name in this module -> the module it stands for
        for node, _ in facts(module.path).imports:
            bound.update(_bindings(module, node, known))
            if isinstance(node, ast.ImportFrom) and _source(module, node) in known:
                found += [f"{where}:{node.lineno}: from {_source(module, node)} import {alias.name}"
                          for alias in node.names if _private(alias.name)]

        def module_of(expr: ast.expr) -> str | None:
            if isinstance(expr, ast.Name):
                return bound.get(expr.id)
            if isinstance(expr, ast.Attribute):
                base = module_of(expr.value)
                return f"{base}.{expr.attr}" if base and f"{base}.{expr.attr}" in known else None
            return None

        for node in facts(module.path).private_attributes:
            owner = module_of(node.value)
            if owner and owner != name:
                found.append(f"{where}:{node.lineno}: {owner}.{node.attr}")
    return found


# ---- the package ---------------------------------------------------------------------------------------------

@functools.cache
def _package_graph() -> dict[str, set[str]]:
    return import_graph(modules())


def test_the_packages_have_no_import_cycle():
    cycle = find_cycle(_package_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_uses_another_modules_private_names():
    found = private_imports(modules())
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_the_scan_sees_both_packages_and_their_lazy_imports():
    graph = _package_graph()
    assert {"dphist.cli.tools", "dphist.publishing.writers", "dphist_audit.runner", "dphist_audit.cases"} <= set(graph)
    # dphist audit imports the audit inside the command's function; a scan of module level alone would miss it
    assert "dphist_audit" in graph["dphist.cli.tools"]


# ---- the checks catch what they look for ----------------------------------------------------------------------

def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    for name, text in {"__init__.py": "", **files}.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    return modules(tmp_path, ("pkg",))


def test_a_planted_cycle_through_a_lazy_import_is_found(tmp_path):
    known = _package(tmp_path, {"a.py": "from .b import helper\n",
                                "b.py": "def helper():\n    from . import a\n    return a\n",
                                "c.py": "from .a import helper\n"})
    assert find_cycle(import_graph(known)) in (["pkg.a", "pkg.b", "pkg.a"], ["pkg.b", "pkg.a", "pkg.b"])


def test_a_longer_planted_cycle_is_found_whole(tmp_path):
    known = _package(tmp_path, {"a.py": "import pkg.sub.b\n", "sub/__init__.py": "",
                                "sub/b.py": "from ..c import x\n", "c.py": "from .a import y\n"})
    assert find_cycle(import_graph(known)) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]


def test_imports_only_for_type_checking_make_no_cycle(tmp_path):
    known = _package(tmp_path, {"a.py": "from .b import helper\n",
                                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"})
    assert find_cycle(import_graph(known)) is None


def test_planted_private_imports_are_found(tmp_path):
    known = _package(tmp_path, {
        "b.py": "_hidden = 1\n__version__ = '1'\n",
        "direct.py": "from .b import _hidden\n",
        "lazy.py": "def f():\n    from pkg.b import _hidden\n    return _hidden\n",
        "attribute.py": "from . import b\nprint(b._hidden)\n",
        "aliased.py": "import pkg.b as other\nprint(other._hidden)\n",
        "dotted.py": "import pkg.b\nprint(pkg.b._hidden)\n",
        "fine.py": "from .b import __version__\nfrom . import b\n_mine = b.__version__\nprint(_mine, b.real)\n"})
    found = private_imports(known, tmp_path)
    assert found == ["pkg/aliased.py:2: pkg.b._hidden", "pkg/attribute.py:2: pkg.b._hidden",
                     "pkg/direct.py:1: from pkg.b import _hidden", "pkg/dotted.py:2: pkg.b._hidden",
                     "pkg/lazy.py:2: from pkg.b import _hidden"]
