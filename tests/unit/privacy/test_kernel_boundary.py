"""Budget arithmetic stays in the privacy kernel: no module of ``dphist`` outside ``dphist/privacy/`` computes with
an amount it reads off a budget.

The rule (:func:`violations`), checked on the syntax tree of every module under ``dphist/`` but ``dphist/privacy/``:
an arithmetic operation (a binary operator, an augmented assignment, a unary minus, or a ``sum``
of values) must not have as an operand

* an attribute ``amount``, ``epsilon``, ``rho``, ``delta``, ``remaining``, ``remaining_delta``, ``spent``,
  ``spent_delta`` or ``factor`` of a *budget value*, or the result of its ``scale(...)`` or
  ``laplace_epsilon(...)``; a wrapper ``float(...)``, ``int(...)`` or ``Fraction(...)`` around one does not hide it;
* a local name bound to such a read in the same function (``unit = budget.scale(1, a)``, then ``unit * x``).

A *budget value* is an object of one of the kernel's amount-carrying types (:data:`BUDGET_TYPES`: the budgets, and
the accountant's charges, caps and spends): a name or attribute whose name contains "budget"; a parameter
annotated with one of those types; the result of calling one of them, or a function or method whose return
annotation names one (``split``, ``probe``, ``table_budget``...), an element of such a result (unpacked, indexed
or iterated, also through ``enumerate``, ``zip``, ``reversed``, ``sorted``, ``list`` or ``tuple``); or a name bound
to a budget value in the same function.

Where the line is drawn.  Passing a budget's amount on (``budget.laplace(..., part.amount, ...)``), comparing it
(``budget.delta <= 0``) or formatting it is not arithmetic.  What the kernel returns for that purpose (the ε per
record of an amount, the part of a budget a share is, the σ of a Gaussian part, an amount per row of the protected
unit) is the kernel's answer, not a read of the budget: an algorithm's error model that computes with it (the
structure-first formula for k, MWEM's number of rounds, DAWA's penalty, the grids' ε̃) is algorithm math, outside
this check.  Arithmetic on amounts that never were a budget's (a plan's ε, an option's share) is not checked
either: a budget's figures are what the kernel vouches for.

:data:`ALLOWED` lists what the rule flags that is not budget arithmetic, each with its reason (one entry: a noise
scale used as a noise magnitude in an error score); an entry that no longer occurs fails the test.

``dphist_audit/`` is not scanned: the audit checks the kernel's claims from outside, so the rule's remedy (ask
the kernel) would make it take the figures it tests against from the code under test; it must compute them by
itself (today it does so on its own constants and has no line the rule would flag).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "dphist"
KERNEL = PACKAGE / "privacy"

#: The kernel's types whose objects carry privacy amounts.
BUDGET_TYPES = frozenset({"PrivacyBudget", "ZCDPBudget", "Charge", "Cap", "Spend"})
#: What a budget value holds that only the kernel may compute with.
BUDGET_ATTRIBUTES = frozenset({"amount", "epsilon", "rho", "delta", "remaining", "remaining_delta", "spent",
                               "spent_delta", "factor"})
BUDGET_METHODS = frozenset({"scale", "laplace_epsilon"})
_WRAPPERS = frozenset({"float", "int", "Fraction"})
#: Calls that pass their arguments' elements through (a budget iterated through them is still a budget).
_PASS_THROUGH = frozenset({"enumerate", "zip", "reversed", "sorted", "list", "tuple"})
#: Calls that do arithmetic over the values they are given.
_REDUCTIONS = frozenset({"sum"})


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _names_type(annotation: ast.AST | None) -> bool:
    """Whether an annotation (possibly a string, a union or a generic) names a budget type."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any(_identifier(n) in BUDGET_TYPES for n in ast.walk(annotation))


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class _Index:
    """A module read in one pass: each scope (the module, each class body, each function) with the nodes that are
    its own (not inside a nested one), and the functions whose return annotation names a budget type."""

    def __init__(self, tree: ast.AST):
        self.scopes: dict[ast.AST, list[ast.AST]] = {tree: []}
        self.returning: set[str] = set()
        stack = [(tree, tree)]
        while stack:
            node, scope = stack.pop()
            for child in ast.iter_child_nodes(node):
                self.scopes[scope].append(child)
                inner = scope
                if isinstance(child, (*_FUNCTIONS, ast.ClassDef)):
                    inner = child
                    self.scopes[child] = []
                    if not isinstance(child, (ast.Lambda, ast.ClassDef)) and _names_type(child.returns):
                        self.returning.add(child.name)
                stack.append((child, inner))


def budget_returning(indexes: list[_Index]) -> frozenset[str]:
    """The names of functions and methods, over the modules, whose return annotation names a budget type."""
    return frozenset(name for index in indexes for name in index.returning)


class _Scope:
    """One function body (or a module's top level): which local names hold budget values, which hold reads."""

    def __init__(self, node: ast.AST, own: list[ast.AST], producers: frozenset[str]):
        self.producers = producers
        self.budgets: set[str] = set()
        self.reads: set[str] = set()
        self.bindings, self.arithmetic = [], []
        for n in own:
            self.bindings.extend(_bindings(n))
            if isinstance(n, (ast.BinOp, ast.AugAssign)) or (isinstance(n, ast.UnaryOp) and
                                                             isinstance(n.op, ast.USub)) or _is_reduction(n):
                self.arithmetic.append(n)
        if isinstance(node, _FUNCTIONS):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if arg is not None and _names_type(arg.annotation):
                    self.budgets.add(arg.arg)
        self._bind()

    def is_budget(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.budgets or "budget" in node.id.lower()
        if isinstance(node, ast.Attribute):
            return "budget" in node.attr.lower()
        if isinstance(node, ast.Call):
            name = _identifier(node.func)
            if name in _PASS_THROUGH:
                return any(self.is_budget(a) for a in node.args)
            return name in BUDGET_TYPES or name in self.producers
        if isinstance(node, (ast.Subscript, ast.Starred)):
            return self.is_budget(node.value)
        if isinstance(node, (ast.Tuple, ast.List)):
            return any(self.is_budget(e) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return self.is_budget(node.body) or self.is_budget(node.orelse)
        return False

    def is_read(self, node: ast.AST) -> bool:
        """Whether ``node`` is a value read off a budget (through float/int/Fraction wrappers, or a local name)."""
        while isinstance(node, ast.Call) and _identifier(node.func) in _WRAPPERS and len(node.args) == 1:
            node = node.args[0]
        if isinstance(node, ast.Name):
            return node.id in self.reads
        if isinstance(node, ast.Attribute):
            return node.attr in BUDGET_ATTRIBUTES and self.is_budget(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in BUDGET_METHODS and self.is_budget(node.func.value)
        return False

    def _bind(self) -> None:
        """Names bound to budget values or reads, until nothing changes (a binding may use an earlier one)."""
        while True:
            before = (len(self.budgets), len(self.reads))
            for targets, value in self.bindings:
                names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                if self.is_budget(value):
                    self.budgets |= names
                if self.is_read(value):
                    self.reads |= names
            if (len(self.budgets), len(self.reads)) == before:
                return


def _bindings(node: ast.AST):
    """(targets, value) for each way ``node`` binds names to a value."""
    if isinstance(node, ast.Assign):
        yield node.targets, node.value
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        yield [node.target], node.value
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        yield [node.target], node.iter


def _is_reduction(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _REDUCTIONS


def _operands(node: ast.AST) -> list[ast.AST]:
    if _is_reduction(node):
        values = []
        for arg in node.args:
            if isinstance(arg, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
                values.append(arg.elt)
            elif isinstance(arg, (ast.List, ast.Tuple, ast.Set)):
                values.extend(arg.elts)
            else:
                values.append(arg)
        return values
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.AugAssign):
        return [node.target, node.value]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return [node.operand]
    return []


def violations(module: ast.AST | _Index, producers: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, source) of every arithmetic operation in ``module`` (a tree or its index) with an operand read off a
    budget (module docstring); ``producers``: further names of functions that return budget values (from other
    modules)."""
    index = module if isinstance(module, _Index) else _Index(module)
    producers = producers | index.returning
    found = []
    for node, own in index.scopes.items():
        if not any(isinstance(n, (ast.BinOp, ast.AugAssign, ast.UnaryOp)) or _is_reduction(n) for n in own):
            continue
        scope = _Scope(node, own, producers)
        for node in scope.arithmetic:
            if any(scope.is_read(o) for o in _operands(node)):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


#: Arithmetic the rule flags that is not budget arithmetic, by module and source text, each with its reason.
ALLOWED = {
    ("dphist/algorithms/efpa.py", "math.sqrt(2.0 * weight) * scale"):
        "EFPA's score uses a candidate's noise scale as the size of its expected noise (√(2w)·b records)",
}


@functools.lru_cache(maxsize=1)
def _modules() -> dict[Path, _Index]:
    return {path: _Index(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_outside_the_kernel_does_budget_arithmetic():
    modules = _modules()
    producers = budget_returning(list(modules.values()))
    found = {(str(path.relative_to(ROOT)), line, source) for path, tree in modules.items()
             if KERNEL not in path.parents for line, source in violations(tree, producers)}
    flagged = [f"{path}:{line}: {source}" for path, line, source in sorted(found) if (path, source) not in ALLOWED]
    assert flagged == [], "budget arithmetic outside dphist/privacy/ (ask the kernel):\n" + "\n".join(flagged)
    stale = set(ALLOWED) - {(path, source) for path, _, source in found}
    assert not stale, f"allowed exceptions that no longer occur (remove them): {sorted(stale)}"


def test_the_scan_covers_the_package():
    modules = _modules()
    outside = [p for p in modules if KERNEL not in p.parents]
    assert len(outside) > 50 and PACKAGE / "publishing" / "ledger.py" in outside
    producers = budget_returning(list(modules.values()))
    assert {"split", "probe", "table_budget", "_spend", "_cap"} <= producers  # budgets, spends and caps returned


@pytest.mark.parametrize("source", [
    "def f(budget):\n    return 1 / budget.scale(1, budget.amount)\n",
    "def f(b):\n    first, rest = b.split([1, 2])\n    return rest.amount / 2\n",
    "def f(parts):\n    x = parts.budget.epsilon\n    return -x\n",
    "def f(b: 'PrivacyBudget'):\n    unit = b.scale(1, b.amount)\n    return float(unit * 3)\n",
    "def f(b: PrivacyBudget | None):\n    return b.factor / math.sqrt(2 * float(a))\n",
    "def f(spend: Spend, need):\n    return spend.rho + need\n",
    "def f(n):\n    whole = PrivacyBudget(n, bits=None)\n    t = 0\n    t += float(whole.amount)\n    return t\n",
    "def f(table):\n    return [m * table.budget.spent for m in range(3)]\n",
    "def f(b):\n    for part in b.split([1, 1]):\n        yield Fraction(part.delta) - 1\n",
    "def f(table_budgets, used):\n    return sum((b.amount for i, b in enumerate(table_budgets) if i in used), 0)\n",
    "def f(b):\n    return sum([part.epsilon for part in b.split([1, 2])])\n",
])
def test_a_planted_violation_is_found(source):
    assert len(violations(ast.parse(source), frozenset({"split"}))) == 1


@pytest.mark.parametrize("source", [
    "def f(budget):\n    eps = budget.epsilon_per_record(budget.amount)\n    return 1 / eps\n",
    "def f(budget, counts):\n    a, b = budget.split([1, 1])\n    return a.laplace(counts, 1, a.amount, 'x')\n",
    "def f(plan, k):\n    return plan.epsilon / k + plan.amount * 2\n",
    "def f(budget):\n    if budget.delta <= 0:\n        raise ValueError(str(budget.amount))\n",
    "def f(budget, x):\n    return budget.part(x) * 2 - budget.gaussian_sigma(x)\n",
])
def test_clean_code_passes(source):
    assert violations(ast.parse(source), frozenset({"split"})) == []
