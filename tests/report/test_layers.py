"""Presentation lives in ``kvledger.report``: no layer below imports it or the CLI, and only it draws tables or
figures."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "kvledger"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_report_and_cli_import_presentation():
    bad = []
    for path in PKG.rglob("*.py"):
        layer = path.relative_to(PKG).parts[0]
        for name in _imports(path):
            # kvledger.api is the Python entry beside the CLI: it takes the commands' flag groups and documents
            if name.startswith("kvledger.cli") and layer not in ("cli", "api"):
                bad.append(f"{path.relative_to(PKG)} imports {name}")
            if name.startswith("kvledger.report") and layer not in ("cli", "api", "report"):
                bad.append(f"{path.relative_to(PKG)} imports {name}")
            if name.split(".")[0] == "matplotlib" or name == "rich.table" or name.split(".")[0] in ("fastapi",
                "uvicorn"):
                if layer not in ("report",) and not (layer == "cli" and name == "uvicorn"):
                    bad.append(f"{path.relative_to(PKG)} imports {name} (rendering belongs in kvledger.report)")
    assert not bad, "\n".join(sorted(bad))
