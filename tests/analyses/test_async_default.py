"""vLLM's default async scheduling by version (analyses/serving/from_plan.py: default_async_scheduling)."""

import json
from pathlib import Path

import pytest

from kvledger.analyses.serving.from_plan import default_async_scheduling

LSS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "measured-runs" / "llmservingsim" / "bench"


@pytest.mark.parametrize("version, on", [("0.11.0", False), ("0.13.0", False), ("0.14.0", True), ("0.19.0", True),
                                         ("0.20.0", True), ("0.33.0", True)])
def test_on_from_0_14(version, on):
    # read in the wheels: 0.11.0–0.13.0 config/scheduler.py SchedulerConfig.async_scheduling: bool = False;
    # 0.14.0 and 0.19.0 default None, which config/vllm.py VllmConfig.__post_init__ turns on (no spec decoding here)
    assert default_async_scheduling("vllm", version, "continuous")[0] is on


def test_not_for_other_batching_or_engines():
    assert default_async_scheduling("vllm", "0.19.0", "vllm_v0")[0] is False
    assert default_async_scheduling("sglang", "0.19.0", "continuous")[0] is False


def test_a_0_19_run_resolved_it_on_with_no_flag():
    # the real record behind the boundary: LLMServingSim's RTX 4090 run of vLLM 0.19.0 gives no async flag in its
    # engine_kwargs and its resolved config says async_scheduling True
    meta = LSS / "examples" / "RTX4090" / "Llama-3.1-8B" / "vllm" / "meta.json"
    if not meta.exists():
        pytest.skip("../shared measured runs not present")
    d = json.loads(meta.read_text(encoding="utf-8"))
    assert d["vllm_version"] == "0.19.0" and "async_scheduling" not in d["engine_kwargs"]
    assert d["resolved_config"]["scheduler_config"]["async_scheduling"] is True
    assert default_async_scheduling("vllm", d["vllm_version"], "continuous")[0] is True


def test_every_help_text_names_the_release_the_rule_turns_async_scheduling_on_from():
    # validate/calibrate's --async-scheduling help said "on from vLLM 0.33" while the rule (from_plan.py,
    # ASYNC_DEFAULT_FROM, read in the 0.11.0–0.14.0 and 0.19.0 wheels) turns it on from 0.14 (fresh-user trial)
    import re

    from kvledger.analyses.serving.from_plan import ASYNC_DEFAULT_FROM
    from kvledger.cli import calib_opts, flag_groups

    want = ".".join(map(str, ASYNC_DEFAULT_FROM[:2]))
    for mod in (calib_opts, flag_groups):
        text = open(mod.__file__, encoding="utf-8").read()
        said = re.findall(r"on from (?:vLLM )?(\d+\.\d+)", text)
        assert said and set(said) == {want}, (mod.__name__, said)


def test_the_async_note_says_what_it_does_to_a_light_loads_ttft():
    # a fresh-user trial saw TTFT p50 41.1 ms with async scheduling (the 0.33 default) against 27.8 ms without, and
    # nothing said why: under async the scheduler plans step k + 1 while step k runs, so an arrival joins at step
    # k + 2 (docs/engine-model.md §2.9); the synchronous note says nothing of it
    from kvledger.analyses.serving import notes as N

    on = N.async_scheduling(True, "vLLM 0.33.0 default")
    assert on.startswith("async scheduling on: vLLM 0.33.0 default; the scheduler plans step k + 1 while step k runs, "
                         "so an arrival joins at step k + 2, a step later than a synchronous engine's")
    assert N.async_scheduling(False, "vLLM 0.13.0: off by default before 0.14") == (
        "async scheduling off: vLLM 0.13.0: off by default before 0.14")
