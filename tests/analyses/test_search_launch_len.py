"""The --max-model-len a search's launch line carries where the model's default may not start (search/launch_len)."""

from __future__ import annotations

import pytest

from kvledger.analyses.search.spec import SearchSpec


def _plan(max_model_len=None):
    from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan

    return load_plan(SimRequestArgs(model="openai/gpt-oss-120b", gpu="nvidia_h100_sxm", tp=1,
                                    max_model_len=max_model_len))[0]


def _trace(tmp_path, longest_output):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n0,1000,200\n1,2000," + f"{longest_output}\n")
    return str(path)


def test_gpt_oss_on_one_h100_launches_at_what_starts_at_the_low_end(tmp_path):
    from kvledger.analyses.search.launch import launch_commands
    from kvledger.analyses.search.launch_len import launch_len_figures, low_end_len
    from kvledger.analyses.search.screen import plan_figures

    # gpt-oss-120b on one H100 at its default 131,072 tokens (a fresh user's search winner): the plan's range holds
    # 0.64x–1.73x of one full-length request, so the low end (5,904 blocks, 5,903 usable after vLLM's null block) may
    # refuse. vLLM's estimate there (advice_len.estimate_len_low, plan's --max-model-len remedy) is 77,920 tokens —
    # checked by the plan's own range: at 77,920 its low end holds 1.0002x, at 78,000 0.9993x — rounded down to a
    # multiple of 1,024: 76 × 1,024 = 77,824.
    plan = _plan()
    assert plan.memory.max_model_len == 131072
    assert low_end_len(plan) == 77824
    assert _plan("77920").memory.ranges["max_concurrency"][0] == pytest.approx(1.00017, abs=1e-5)
    assert _plan("78000").memory.ranges["max_concurrency"][0] == pytest.approx(0.99932, abs=1e-5)
    fig = plan_figures(plan)
    assert fig["max_concurrency_low"] == pytest.approx(0.64, abs=5e-3)
    # the trace's longest request is 2,000 + 3,000 = 5,000 tokens, within 77,824: the launch line is lowered
    spec = SearchSpec(model="openai/gpt-oss-120b", slo="ttft=1s,tpot=60ms", trace=_trace(tmp_path, 3000))
    extra = launch_len_figures(spec, plan, fig)
    assert extra == {"max_model_len_low_end": 77824, "longest_request_tokens": 5000, "launch_max_model_len": 77824}
    entry = {"tp": 1, "enable_prefix_caching": None, "plan": {**fig, **extra}}
    cmd = launch_commands("openai/gpt-oss-120b", "nvidia_h100_sxm", entry)
    for key in ("vllm", "check"):  # the launch line and the plan check agree
        assert "--max-model-len 77824 " in cmd[key]
    assert "--context-length 77824 " in cmd["sglang"]
    assert cmd["max_model_len_note"].startswith("--max-model-len 77,824, lowered from the model's default 131,072")
    assert "the trace's longest request is 5,000 tokens" in cmd["max_model_len_note"]
    from kvledger.analyses.search.frontier import caveats

    assert caveats({"gpu_id": "nvidia_h100_sxm", "plan": entry["plan"]}) == []  # lowered: nothing may refuse


def test_the_default_is_kept_when_a_request_needs_it_or_it_was_asked_for(tmp_path):
    from kvledger.analyses.search.frontier import caveats
    from kvledger.analyses.search.launch import launch_commands
    from kvledger.analyses.search.launch_len import launch_len_figures
    from kvledger.analyses.search.screen import plan_figures

    plan = _plan()
    fig = plan_figures(plan)
    # the longest request 2,000 + 90,000 = 92,000 tokens needs more than the 77,824 that starts at the low end
    spec = SearchSpec(model="openai/gpt-oss-120b", slo="ttft=1s,tpot=60ms", trace=_trace(tmp_path, 90000))
    extra = launch_len_figures(spec, plan, fig)
    assert extra == {"max_model_len_low_end": 77824, "longest_request_tokens": 92000}
    entry = {"tp": 1, "enable_prefix_caching": None, "plan": {**fig, **extra}}
    assert "--max-model-len 131072 " in launch_commands("openai/gpt-oss-120b", "nvidia_h100_sxm", entry)["vllm"]
    assert caveats({"gpu_id": "nvidia_h100_sxm", "plan": entry["plan"]}) == [
        "one 131,072-token request fits at the plan's figure but not at its range's low end (0.64x): vLLM may refuse "
        "to start (a lower --max-model-len: 77,824 starts even there, but the trace's longest request is 92,000 "
        "tokens)"]
    # --max-model-len 131072 given: kept as asked, the caveat names what starts
    spec = SearchSpec(model="openai/gpt-oss-120b", slo="ttft=1s,tpot=60ms", trace=_trace(tmp_path, 3000),
                      max_model_len=131072)
    assert "launch_max_model_len" not in launch_len_figures(spec, plan, fig)
    # a plan whose low end holds a full-length request: nothing added
    short = _plan("8192")
    assert launch_len_figures(spec, short, plan_figures(short)) == {}
