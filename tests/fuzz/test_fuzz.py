"""Property: whatever a user feeds kvledger — a mutated real benchmark file of any format, a mutated engine log, a
mutated price table, any combination of flags — it answers with a result whose invariants hold or a clean error
(exit 2, or 3 for plan's "does not fit"): never a traceback, NaN/Infinity in JSON, or an impossible number.

The cases are ``cases.py``'s, drawn by seed; ``benchmarks/fuzz.py`` runs the same ones by the thousand. A failing
seed replays with ``python benchmarks/fuzz.py --replay "KIND:SEED"``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from cases import run_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# examples per kind: files, logs and price tables take milliseconds; a command line up to a small simulation
EXAMPLES = {"benchmark file": 400, "vllm log": 150, "price table": 150, "command line": 60, "trace file": 150,
            "model config": 150, "gpu file": 60}


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_no_traceback_and_no_impossible_result(kind):
    @settings(max_examples=EXAMPLES[kind], deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(seed=st.integers(0, 2**32 - 1))
    def prop(seed):
        with tempfile.TemporaryDirectory() as d:
            assert run_case(kind, seed, Path(d)) in ("ok", "clean error")

    prop()
