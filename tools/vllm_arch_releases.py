"""Fill ``vllm_architectures.csv``'s ``added_in`` column from the model registry tables of vLLM's release wheels.

Usage: ``python tools/vllm_arch_releases.py DIR`` — DIR holds one file per release read, ``VERSION.registry.py``
(``vllm/model_executor/models/registry.py``) or ``VERSION.init.py`` (``vllm/model_executor/models/__init__.py``, where
0.5.0–0.6.2 keep the tables), unzipped from ``pip download vllm==VERSION --no-deps``. A release lists an architecture
when one of its module-level ``*_MODELS`` dict literals has it as a key, the previously-supported, out-of-tree and ROCm
tables excepted. ``added_in``: the first release read from which the architecture is listed in every release read up
to the last that lists it; empty for one no release read lists. The script checks that the 0.19.0 and 0.33.0 tables
give the csv's ``in_0_19`` and ``in_0_33`` columns, and reads names only: no vLLM code is copied.
"""

from __future__ import annotations

import ast
import csv
import sys
from pathlib import Path

CSV = Path(__file__).parents[1] / "src" / "kvledger" / "accounting" / "data" / "vllm_architectures.csv"
_NOT_SERVED = {"_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS", "_ROCM_PARTIALLY_SUPPORTED_MODELS",
               "_ROCM_UNSUPPORTED_MODELS"}


def _listed(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(
            node, "target", None)
        value = getattr(node, "value", None)
        if (isinstance(target, ast.Name) and target.id.endswith("_MODELS") and target.id not in _NOT_SERVED
                and isinstance(value, ast.Dict)):
            names |= {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return names


def releases(folder: Path) -> dict[tuple[int, ...], set[str]]:
    """Release (as a tuple) → the architectures its registry lists."""
    out: dict[tuple[int, ...], set[str]] = {}
    for f in folder.glob("*.py"):
        ver = tuple(int(x) for x in f.name.split(".")[:3])
        out.setdefault(ver, set()).update(_listed(f))
    return dict(sorted(out.items()))


def added_in(arch: str, rel: dict[tuple[int, ...], set[str]]) -> str:
    """The start of the last unbroken run of releases that list ``arch`` ("" when none does)."""
    vers = list(rel)
    last = max((i for i, v in enumerate(vers) if arch in rel[v]), default=None)
    if last is None:
        return ""
    first = last
    while first > 0 and arch in rel[vers[first - 1]]:
        first -= 1
    return ".".join(map(str, vers[first]))


def main(folder: str) -> None:
    rel = releases(Path(folder))
    rows = list(csv.DictReader(CSV.read_text().splitlines()))
    for r in rows:
        for ver, col in (((0, 19, 0), "in_0_19"), ((0, 33, 0), "in_0_33")):
            if ver in rel and (r["architecture"] in rel[ver]) != (r[col] == "1"):
                sys.exit(f"{r['architecture']}: {col} is {r[col]} but the {ver} registry says otherwise")
        r["added_in"] = added_in(r["architecture"], rel)
    fields = [*(k for k in rows[0] if k != "added_in"), "added_in"]
    with CSV.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows; releases read: {', '.join('.'.join(map(str, v)) for v in rel)}")


if __name__ == "__main__":
    main(sys.argv[1])
