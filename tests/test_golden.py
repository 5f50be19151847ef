"""The fast golden outputs stay byte-identical (benchmarks/golden.py holds the commands; `--write` renews them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("golden", ROOT / "benchmarks" / "golden.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

FAST = [name for name, (_, fast) in golden.COMMANDS.items() if fast]


@pytest.mark.parametrize("name", FAST)
def test_golden_output_unchanged(name: str) -> None:
    argv, _ = golden.COMMANDS[name]
    rc, out = golden.run(argv)
    want = (golden.GOLDEN / f"{name}.out").read_text()
    assert f"# rc={rc}\n{out}" == want, f"{name}: output differs; see python benchmarks/golden.py --only {name}"
