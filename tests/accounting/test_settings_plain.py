"""PlanSettings takes a plain value as it is and sends any other through pydantic: the same settings and the same
errors either way, and no pydantic import for plain values."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from kvledger.accounting import settings as S
from kvledger.accounting.settings import BOUNDS, PlanSettings, make_settings
from kvledger.errors import InputError, command_named


@pytest.mark.parametrize("kw", [
    {}, {"tp": 8, "pp": 2, "max_model_len": 8192, "gpu_memory_utilization": 0.9, "engine": "sglang"},
    {"contexts": (1024, 8192), "kv_cache_dtype": "fp8", "enable_prefix_caching": False, "cpu_overhead_s": 0.002},
    {"cudagraph_bytes": -(1 << 40), "weights_bytes": 1 << 45, "achievable_flops_fraction": 1.0, "nnodes": 1024},
])
def test_plain_values_are_taken_as_pydantic_would_take_them(kw):
    assert all(S._plain(k, v) for k, v in kw.items())
    assert vars(PlanSettings(**kw)) == S._validated(kw)


@pytest.mark.parametrize(("kw", "expected"), [
    ({"tp": "4"}, {"tp": 4}),  # text → int, as pydantic's lax mode
    ({"gpu_memory_utilization": 1}, {"gpu_memory_utilization": 1.0}),  # an int for a float field becomes a float
    ({"contexts": [5, 6]}, {"contexts": (5, 6)}),  # a list → a tuple
    ({"engine": "TensorRT-LLM"}, {"engine": "trtllm"}),  # the engine's spellings (engine_name)
    ({"enable_prefix_caching": "yes"}, {"enable_prefix_caching": True}),
])
def test_other_values_are_converted_by_pydantic(kw, expected):
    s = PlanSettings(**kw)
    assert {k: getattr(s, k) for k in expected} == expected
    assert type(getattr(s, next(iter(expected)))) is type(next(iter(expected.values())))


def test_bounds_are_inclusive_or_exclusive_as_declared_and_refused_with_the_flag_named():
    # gpu_memory_utilization: (0, 1] (BOUNDS: 0 excluded, 1 included); tp: [1, 1024]
    assert BOUNDS["gpu_memory_utilization"] == (0, True, 1) and BOUNDS["tp"] == (1, False, 1024)
    assert not S._plain("gpu_memory_utilization", 0.0) and S._plain("gpu_memory_utilization", 1.0)
    assert S._plain("tp", 1024) and not S._plain("tp", 1025) and not S._plain("tp", True)
    with command_named("plan"):  # inside a command: the flags
        with pytest.raises(InputError, match=r"^invalid setting: --gpu-memory-utilization must be > 0, got 0.0$"):
            make_settings(gpu_memory_utilization=0.0)
        with pytest.raises(InputError, match=r"^invalid setting: --tp must be ≤ 1,024, got 1,025; --bogus is not a "):
            make_settings(tp=1025, bogus=1)
    # called from Python: the fields, an unknown one with no close field named alone
    with pytest.raises(InputError, match=r"^invalid setting: tp must be ≤ 1,024, got 1,025; bogus is not a setting$"):
        make_settings(tp=1025, bogus=1)


def test_the_dataclass_behaves_as_the_frozen_model_did():
    s = PlanSettings(tp=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.tp = 3  # type: ignore[misc]
    assert s == PlanSettings(tp=2) and hash(s) == hash(PlanSettings(tp=2)) and s != PlanSettings()
    assert s.model_copy(update={"tp": 3}).tp == 3 and s.tp == 2
    assert str(PlanSettings()).startswith("engine='vllm' engine_version=None tp=1 pp=1 ")


def test_plain_settings_do_not_import_pydantic():
    code = ("import sys\nfrom kvledger.accounting.settings import make_settings\n"
            "make_settings(engine='vllm', tp=2, max_model_len=4096, gpu_memory_utilization=0.9)\n"
            "print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
