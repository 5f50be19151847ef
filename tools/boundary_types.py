"""Count what issue 19 item 4 asks to replace: hand-written ``to_dict`` methods and plain dicts returned across rooms.

    python tools/boundary_types.py           # the counts
    python tools/boundary_types.py --list    # and every hand-written to_dict and boundary dict function, by file
    python tools/boundary_types.py --src /tmp/old/src   # another checkout's src/ (e.g. before a change)

A ``to_dict`` is hand-written unless its body (after a docstring) is one ``return to_jsonable(self, ...)``.
A function returns a plain dict when its return annotation is ``dict[...]`` (``| None`` allowed). It is at a
boundary when another room uses it: a module-level function imported by name (``from kvledger.x import f``) or
called as ``module.f``; a method called as ``.f(`` in another room's source. Rooms: ``kvledger.<pkg>``, and
``kvledger.<pkg>.<sub>`` for the sub-packages of ``analyses`` and ``dynamics``; top-level modules are one room.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "kvledger"
SPLIT = {"analyses", "dynamics"}


def room(path: Path) -> str:
    parts = path.relative_to(PKG).with_suffix("").parts
    if len(parts) == 1:
        return "base"
    if parts[0] in SPLIT and len(parts) > 2:
        return f"{parts[0]}/{parts[1]}"
    return parts[0]


def _returns_dict(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if fn.returns is None:
        return False
    text = ast.unparse(fn.returns).replace(" ", "")
    return bool(re.fullmatch(r"(dict|Dict)(\[.*\])?(\|None)?", text))


def _generated(fn: ast.FunctionDef) -> bool:
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value,
                                                                                       ast.Constant) else fn.body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return False
    call = body[0].value
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    first = call.args[0] if call.args else None
    return name == "to_jsonable" and isinstance(first, ast.Name) and first.id == "self"


def scan() -> dict[str, list[tuple[str, int, str]]]:
    files = sorted(PKG.rglob("*.py"))
    sources = {f: f.read_text() for f in files}
    to_dicts, hand, dict_fns = [], [], []
    for f, src in sources.items():
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "to_dict":
                        to_dicts.append((f, item.lineno, node.name))
                        if not _generated(item):
                            hand.append((f, item.lineno, node.name))
                    elif isinstance(item, ast.FunctionDef) and _returns_dict(item):
                        dict_fns.append((f, item.lineno, item.name, "method"))
        for item in tree.body:
            if isinstance(item, ast.FunctionDef) and _returns_dict(item):
                dict_fns.append((f, item.lineno, item.name, "function"))
    boundary = []
    for f, line, name, kind in dict_fns:
        if name.startswith("_") or name == "to_dict":
            continue
        home, mod = room(f), ".".join(("kvledger", *f.relative_to(PKG).with_suffix("").parts))
        if kind == "function":
            pat = re.compile(rf"from {re.escape(mod)} import \(?[^)\n]*(\n[^)\n]*)*?\b{name}\b|"
                             rf"\b{re.escape(mod.rsplit('.', 1)[1])}\.{name}\(")
        else:
            pat = re.compile(rf"\.{name}\(")
        if any(room(g) != home and pat.search(s) for g, s in sources.items()):
            boundary.append((f, line, f"{name} ({kind})"))
    rel = lambda rows: [(str(r[0].relative_to(PKG)), r[1], r[2]) for r in rows]  # noqa: E731
    return {"to_dict": rel(to_dicts), "hand_written_to_dict": rel(hand),
            "dict_returning": rel([(f, line, n) for f, line, n, _ in dict_fns]),
            "boundary_dict_returning": rel(boundary)}


def main() -> None:
    global PKG
    if "--src" in sys.argv:
        PKG = Path(sys.argv[sys.argv.index("--src") + 1]) / "kvledger"
    found = scan()
    for key, rows in found.items():
        print(f"{key}: {len(rows)}")
    if "--list" in sys.argv:
        for key in ("hand_written_to_dict", "boundary_dict_returning"):
            print(f"\n# {key}")
            by = defaultdict(list)
            for path, line, what in found[key]:
                by[path].append(f"{what}:{line}")
            for path in sorted(by):
                print(f"{path}: {', '.join(by[path])}")


if __name__ == "__main__":
    main()
