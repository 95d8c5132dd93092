"""The structure of the Python package: the import graph of ``python/cnfmce`` (every import,
at module level or inside a function, read from the source's syntax tree) has no circle, the
library never imports the command line, and the optional integrations (Ray, transformers) are
reached from one dispatch point each, lazily."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import cnfmce

PKG = Path(cnfmce.__file__).resolve().parent

# The command line and its sub-command modules: they may import anything in the package.
CLI_MODULES = {"cli", "eval_cli"}

# Optional integrations and the one function of the library that dispatches to each:
# (importing module, function) -> the integration it imports. These edges alone may close a
# circle (the integration calls back into the module that dispatched to it).
DISPATCH = {
    ("training", "_on_ray"): "ray",              # backend="ray" of train / count / train_from_counts
    ("shards", "tokenize_corpus"): "ray",        # backend="ray" of tokenize_corpus
    ("tokenizer", "to_transformers"): "hf",      # Tokenizer.to_transformers
}
INTEGRATIONS = set(DISPATCH.values())


def _modules() -> Set[str]:
    return {p.stem for p in PKG.glob("*.py")}


def _targets(node: ast.AST, mod: str, modules: Set[str]) -> Set[str]:
    """The package modules one import statement of ``mod`` names."""
    out: Set[str] = set()
    if isinstance(node, ast.ImportFrom):
        if node.level == 1 or (node.level == 0 and node.module and node.module.split(".")[0] == "cnfmce"):
            parts = (node.module or "").split(".")
            if node.level == 0:
                parts = parts[1:]
            if parts and parts[0]:
                out.add(parts[0])
            else:  # from . import x, y
                out.update(a.name for a in node.names)
        elif node.level > 1:  # pragma: no cover - the package is flat
            raise AssertionError(f"{mod}: relative import beyond the package")
    elif isinstance(node, ast.Import):
        for a in node.names:
            parts = a.name.split(".")
            if parts[0] == "cnfmce" and len(parts) > 1:
                out.add(parts[1])
    return {t for t in out if t in modules and t != mod}


def import_edges() -> List[Tuple[str, str, Optional[str], int]]:
    """(importer, imported, enclosing function or None at module level, line) for every import
    of a package module by another, wherever it stands in the source."""
    modules = _modules()
    edges = []
    for mod in sorted(modules):
        tree = ast.parse((PKG / f"{mod}.py").read_text(encoding="utf-8"))

        def visit(node: ast.AST, func: Optional[str]) -> None:
            for child in ast.iter_child_nodes(node):
                f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
                for t in _targets(child, mod, modules):
                    edges.append((mod, t, func, child.lineno))
                visit(child, f)

        visit(tree, None)
    return edges


def graph(skip_dispatch: bool) -> Dict[str, Set[str]]:
    g: Dict[str, Set[str]] = {m: set() for m in _modules()}
    for a, b, func, _ in import_edges():
        if skip_dispatch and DISPATCH.get((a, func)) == b:
            continue
        g[a].add(b)
    return g


def find_cycle(g: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One circle of ``g`` (as a path that starts and ends at the same module), or None."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def dfs(v: str) -> Optional[List[str]]:
        state[v] = 1
        stack.append(v)
        for w in sorted(g[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                c = dfs(w)
                if c:
                    return c
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(g):
        if v not in state:
            c = dfs(v)
            if c:
                return c
    return None


def test_the_graph_is_read_from_every_import():
    # the parser sees imports inside functions and methods, and `from . import x`
    edges = {(a, b, f) for a, b, f, _ in import_edges()}
    assert ("training", "ray", "_on_ray") in edges
    assert ("__init__", "evaluation", None) in edges
    assert ("shards", "loading", "_load") in edges
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_besides_the_dispatch_points():
    cycle = find_cycle(graph(skip_dispatch=True))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_library_never_imports_the_command_line():
    bad = [(a, line) for a, b, _, line in import_edges() if b in CLI_MODULES and a not in CLI_MODULES]
    assert not bad, f"library modules import the CLI: {bad}"


def test_integrations_are_reached_from_one_dispatch_point_each():
    for a, b, func, line in import_edges():
        if b not in INTEGRATIONS or a in CLI_MODULES or a in INTEGRATIONS:
            continue
        assert DISPATCH.get((a, func)) == b, \
            f"{a}.py:{line} imports {b} outside its dispatch point"
    # every dispatch point exists and is a lazy import (inside its function)
    edges = {(a, b, f) for a, b, f, _ in import_edges()}
    for (a, func), b in DISPATCH.items():
        assert (a, b, func) in edges, f"no dispatch {a}.{func} -> {b}"
    top_level = {(a, b) for a, b, f, _ in import_edges() if f is None}
    assert not [e for e in top_level if e[1] in INTEGRATIONS and e[0] not in INTEGRATIONS]


def test_importing_cnfmce_loads_no_integration_nor_the_cli():
    code = ("import sys, cnfmce\n"
            "print(sorted(m for m in sys.modules if m in ('cnfmce.ray', 'cnfmce.hf', 'cnfmce.cli', "
            "'ray', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             [str(PKG.parent), os.environ.get("PYTHONPATH", "")])})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
