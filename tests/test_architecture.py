"""The house rules, read from the source with ``ast``: imports point down the layers and never in a circle, the engine
rules stand alone, no module reads another's private names, no module is over 300 lines and no function over 60."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "kvledger"

# bottom to top; a module may import its own layer and the ones below it
LAYERS = {"catalog": 1, "accounting": 2, "dynamics": 3, "evidence": 3, "ledgers": 4, "analyses": 5, "calibration": 5,
          "report": 6, "cli": 7, "api": 7}  # api: the Python API's calls, beside the CLI (both call analyses, report)
BASE = {"records", "units", "token_counts", "errors", "ranges", "names", "strict_json", "record_columns", "invariants",
        "jsonable", "outputs", "argtypes"}  # layer 0, top-level (outputs: file checks and atomic writes, issue 22)
SIBLINGS_APART = {("dynamics", "evidence"), ("evidence", "dynamics")}  # same layer, neither imports the other
ENGINE_MAY_NOT_IMPORT = ("kvledger.dynamics.fast", "kvledger.dynamics.outputs", "kvledger.dynamics.workload")
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60  # from the ``def`` line to the body's last line (decorators not counted)


@cache
def _modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of the package (a package by its ``__init__``)."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@cache
def _tree(name: str) -> ast.Module:
    return ast.parse(_modules()[name].read_text(encoding="utf-8"))


def _owner(name: str) -> str:
    """The module a dotted import name loads: itself or its nearest enclosing module (``a.mod.attr`` → ``a.mod``)."""
    mods = _modules()
    while name not in mods:
        name = name.rpartition(".")[0]
    return name


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (annotations only: they never run, so they are no import)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


@cache
def _imports(name: str) -> tuple[tuple[str, int], ...]:
    """(imported kvledger module, line) for every import the module runs, at module level or inside a function."""
    mods, path = _modules(), _modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    tree = _tree(name)
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update((_owner(a.name), node.lineno) for a in node.names if a.name.split(".")[0] == "kvledger")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "kvledger":
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add((full if full in mods else _owner(base), node.lineno))
    return tuple(sorted((m, line) for m, line in out if m != name))


def _layer(name: str) -> tuple[int, str]:
    """(layer rank, room) of a module; the package root and the top-level base modules are layer 0."""
    parts = name.split(".")
    if len(parts) == 1 or parts[1] in BASE:
        return 0, "base"
    return LAYERS.get(parts[1], len(LAYERS)), parts[1]  # unknown rooms: test_every_module_is_in_a_known_layer


def test_every_module_is_in_a_known_layer():
    unknown = sorted({n.split(".")[1] for n in _modules() if "." in n} - set(LAYERS) - BASE)
    assert not unknown, f"modules outside the layers (add them to LAYERS or BASE): {unknown}"


def test_no_import_climbs_a_layer():
    bad = []
    for name in _modules():
        rank, room = _layer(name)
        for target, line in _imports(name):
            t_rank, t_room = _layer(target)
            if t_rank > rank or (room, t_room) in SIBLINGS_APART:
                bad.append(f"{name}:{line} imports {target} ({room} → {t_room})")
    assert not bad, "\n".join(bad)


def test_the_engine_rules_import_no_speed_output_or_workload_code():
    bad = [f"{name}:{line} imports {target}" for name in _modules() if name.startswith("kvledger.dynamics.engine")
           for target, line in _imports(name) if target.startswith(ENGINE_MAY_NOT_IMPORT)]
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative), each sorted."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_even_through_function_level_imports():
    cycles = _cycles({name: [t for t, _ in _imports(name)] for name in _modules()})
    assert not cycles, "\n".join(" ⇄ ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles_and_only_them():
    # a → b → c → a is one cycle, d → a only leads into it, e ⇄ f is a second one, g stands alone
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": ["f"], "f": ["e", "g"], "g": []}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e", "f"]]


def _private_names(name: str) -> set[str]:
    """Private names a module defines: its ``_functions``/``_Classes``, ``self._attrs`` it sets, module-level ``_names``
    and ``__slots__`` entries."""
    own = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) \
                and node.value.id in ("self", "cls"):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            own.add(node.value)  # __slots__ entries
    return {n for n in own if n.startswith("_") and not n.startswith("__")}


def _is_private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


# stdlib names with a leading underscore that the library reference documents as public API
DOCUMENTED_STDLIB = {"os._exit"}  # https://docs.python.org/3/library/os.html#os._exit (cli/main.py: _exit_now)


def test_no_module_reads_another_modules_private_names():
    bad = []
    for name in _modules():
        own = _private_names(name)
        for node in ast.walk(_tree(name)):
            if isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr not in own:
                if ast.unparse(node) in DOCUMENTED_STDLIB:
                    continue
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    bad.append(f"{name}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvledger"):
                bad.extend(f"{name}:{node.lineno} imports {node.module}.{a.name}" for a in node.names
                           if _is_private(a.name))
    assert not bad, "private names read outside their module:\n" + "\n".join(bad)


def test_no_module_is_over_300_lines():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_over_60_lines():
    long = [f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)" for name in _modules()
            for node in ast.walk(_tree(name)) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_no_merge_conflict_markers_left_in_the_tree():
    # A merge left "<<<<<<< HEAD … >>>>>>> branch" inside a docstring and a docs table once; ruff does not see
    # markers inside strings or Markdown. Lines that start with the markers Git writes, in every tracked text file.
    root = Path(__file__).resolve().parents[1]
    files = [p for d in ("src", "tests", "docs", "benchmarks") for p in (root / d).rglob("*")
             if p.suffix in {".py", ".md", ".json", ".yaml", ".toml", ".txt"} and "__pycache__" not in p.parts]
    files.append(root / "README.md")
    hits = [f"{p.relative_to(root)}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
            if line.startswith(("<<<<<<< ", ">>>>>>> "))]
    assert hits == []
