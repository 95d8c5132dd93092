"""The type stubs of the Rust extension (``python/cnfmce/_core.pyi``) agree with the module: the
same public names, the same kinds (class, function, property, method, static method, constant)
and, for every callable, the same parameter names, kinds and defaults-or-not as the signatures
PyO3 records (``__text_signature__``)."""

import ast
import inspect
from pathlib import Path

import pytest

from cnfmce import _core

STUB = Path(_core.__file__).with_name("_core.pyi")


def _params(args: ast.arguments, drop_self: bool):
    """[(name, kind, has_default)] of a stub's parameter list."""
    out = []
    pos = args.posonlyargs + args.args
    first_default = len(pos) - len(args.defaults)
    for k, a in enumerate(pos):
        kind = "POSITIONAL_ONLY" if k < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append((a.arg, kind, k >= first_default))
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", False))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append((a.arg, "KEYWORD_ONLY", d is not None))
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", False))
    if drop_self and out and out[0][0] in ("self", "cls"):
        out = out[1:]
    return out


def _runtime_params(obj, drop_self: bool):
    sig = inspect.signature(obj)
    out = [(p.name, p.kind.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]
    if drop_self and out and out[0][0] in ("self", "cls", "$self", "$cls"):
        out = out[1:]
    # PyO3 marks the receiver positional-only; the stub's self/cls is dropped above
    return [(n, "POSITIONAL_OR_KEYWORD" if k == "POSITIONAL_ONLY" else k, d) for n, k, d in out]


def _stub_params(fn: ast.FunctionDef, drop_self: bool):
    return [(n, "POSITIONAL_OR_KEYWORD" if k == "POSITIONAL_ONLY" else k, d)
            for n, k, d in _params(fn.args, drop_self)]


def _decorators(fn: ast.FunctionDef):
    return {d.id if isinstance(d, ast.Name) else ast.unparse(d) for d in fn.decorator_list}


def _stub_tree():
    return ast.parse(STUB.read_text(encoding="utf-8"))


def _public(names):
    return {n for n in names if not n.startswith("_") or n == "__version__"}


def stub_mismatches(module, tree) -> list:
    """Every disagreement between ``module`` and the parsed stub ``tree``."""
    problems = []
    stub_names = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            stub_names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub_names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    stub_names[t.id] = node
    runtime = _public(dir(module)) - {"__version__"} | {"__version__"}
    for name in sorted(_public(stub_names) - runtime):
        problems.append(f"{name}: in the stub, not in the module")
    for name in sorted(runtime - set(stub_names)):
        problems.append(f"{name}: in the module, not in the stub")
    for name in sorted(set(stub_names) & runtime):
        node, obj = stub_names[name], getattr(module, name)
        if isinstance(node, ast.FunctionDef):
            if not callable(obj) or isinstance(obj, type):
                problems.append(f"{name}: a function in the stub, {type(obj).__name__} in the module")
                continue
            want, got = _stub_params(node, False), _runtime_params(obj, False)
            if want != got:
                problems.append(f"{name}{tuple(want)}: the module has {tuple(got)}")
        elif isinstance(node, ast.ClassDef):
            if not isinstance(obj, type):
                problems.append(f"{name}: a class in the stub, {type(obj).__name__} in the module")
                continue
            problems += _class_mismatches(name, node, obj)
        elif callable(obj) or isinstance(obj, type):
            problems.append(f"{name}: a constant in the stub, callable in the module")
    return problems


def _class_mismatches(cname, node: ast.ClassDef, cls) -> list:
    problems = []
    members = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            members[item.name] = item
    runtime = {n for n in vars(cls) if not n.startswith("_")}
    # the dunders the stub should describe: __init__ (PyO3's __new__ signature), __len__, ...
    for d in ("__len__", "__reduce__", "__getnewargs__", "__repr__", "__eq__"):
        if d in vars(cls):
            runtime.add(d)
    if "__init__" in members or cls.__text_signature__ is not None:
        runtime.add("__init__")
    for n in sorted(set(m for m in members if not m.startswith("_") or m in runtime) - runtime):
        problems.append(f"{cname}.{n}: in the stub, not in the module")
    for n in sorted(runtime - set(members)):
        if n in ("__repr__", "__eq__"):
            continue  # inherited meaning; a stub need not restate them
        problems.append(f"{cname}.{n}: in the module, not in the stub")
    for n in sorted(set(members) & runtime):
        item = members[n]
        decos = _decorators(item)
        if n == "__init__":
            if cls.__text_signature__ is None:
                problems.append(f"{cname}.__init__: the module's class takes no arguments")
                continue
            # PyO3 records the constructor's signature on the class
            got = _runtime_params(eval(f"lambda {cls.__text_signature__[1:-1]}: None"), False)
            want = _stub_params(item, True)
            if want != got:
                problems.append(f"{cname}.__init__{tuple(want)}: the module has {tuple(got)}")
            continue
        raw = inspect.getattr_static(cls, n)
        kind = ("property" if isinstance(raw, property) or type(raw).__name__ == "getset_descriptor"
                else "staticmethod" if isinstance(raw, staticmethod) or type(raw).__name__ == "builtin_function_or_method"
                else "method")
        want_kind = "property" if "property" in decos else "staticmethod" if "staticmethod" in decos else "method"
        if kind != want_kind:
            problems.append(f"{cname}.{n}: a {want_kind} in the stub, a {kind} in the module")
            continue
        if kind == "property":
            continue
        got = _runtime_params(getattr(cls, n), kind == "method")
        want = _stub_params(item, kind == "method")
        if want != got:
            problems.append(f"{cname}.{n}{tuple(want)}: the module has {tuple(got)}")
    return problems


def test_stub_matches_module():
    problems = stub_mismatches(_core, _stub_tree())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("edit", [
    # a parameter renamed, a default dropped, a method missing, a name missing, a kind changed
    lambda s: s.replace("def add(self, docs: Sequence[str]) -> None: ...",
                        "def add(self, documents: Sequence[str]) -> None: ...", 1),
    lambda s: s.replace("def matcher(self, ids: Optional[Sequence[int]] = None)",
                        "def matcher(self, ids: Optional[Sequence[int]])", 1),
    lambda s: s.replace("        options: Optional[Options] = None,\n    ) -> None: ...",
                        "        algorithm: str = 'mce',\n    ) -> None: ...", 1),
    lambda s: s.replace("    def begin_round(self) -> None: ...\n", "", 1),
    lambda s: s.replace("def unit_starts(", "def unit_starts_renamed(", 1),
    lambda s: s.replace("    @property\n    def raw_size(self) -> int: ...",
                        "    def raw_size(self) -> int: ...", 1),
])
def test_check_fails_when_stub_and_module_disagree(edit):
    text = STUB.read_text(encoding="utf-8")
    changed = edit(text)
    assert changed != text, "the edit did not apply: update this test with the stub"
    assert stub_mismatches(_core, ast.parse(changed))
