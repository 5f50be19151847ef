"""Test modules import their helpers by module name (``from cli_run import …``, as pytest's rootdir-relative
``sys.path`` insertion provides), never through a ``tests`` package: a clean clone's ``.ci/run`` has no ``tests``
package on the path, so ``from tests.cli.cli_run import …`` passed here and failed to import there (three modules)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_test_module_imports_the_tests_package():
    pattern = re.compile(r"^\s*(from|import)\s+tests(\.|\s|$)", re.M)
    bad = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py") if pattern.search(p.read_text(encoding="utf-8"))]
    assert bad == []
