"""The fix for requests the engine refuses never names a --max-model-len past the model's own limit, which the engine
(and kvledger's plan) refuses at start-up: Qwen3-8B's config supports 40,960 tokens (max_position_embeddings, no
rope_scaling), so a 50,000-token prompt is served by no --max-model-len vLLM starts with."""

from __future__ import annotations

from kvledger.analyses.serving.rejections import count_rejections
from kvledger.analyses.serving.sim_ledgers import SyntheticSpec, prepare_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs

MODEL = "Qwen/Qwen3-8B"  # bundled; config max_position_embeddings 40,960, no rope_scaling


def _rej(prompt: str, output: str, **kw):
    args = SimRequestArgs(model=MODEL, gpu="H100", rate=1.0, num_requests=4, **kw)
    return count_rejections(prepare_run(args, SyntheticSpec(prompt, output)))


def test_a_prompt_past_the_models_limit_is_not_told_to_raise_max_model_len():
    # vLLM V1 refuses a prompt ≥ max_model_len (40,960, the model's own): every 50,000-token prompt is refused, and
    # even at the model's limit (40,960) all 4 are: the old words said "raise --max-model-len to at least 50,010"
    # (50,000 + 10), which plan and simulate then refuse ("exceeds the 40,960 tokens … supports")
    rej = _rej("fixed:50000", "fixed:10")
    assert (rej.num_rejected, rej.model_limit_tokens, rej.num_past_model_limit) == (4, 40960, 4)
    words = rej.fix_words()
    assert "raise --max-model-len" not in words and "50,010" not in words
    assert words.startswith("4 need more than the 40,960 tokens the model's config supports (the engine refuses a "
                            "longer --max-model-len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    assert rej.to_dict()["model_limit_tokens"] == 40960


def test_below_the_limit_it_names_what_raising_to_the_limit_serves():
    # --max-model-len 16,384 with 20,000-token prompts (V1: 20,000 ≥ 16,384, refused): the longest prompt + 1 =
    # 20,001 ≤ 40,960 serves them, outputs capped; the whole request, 20,000 + 30,000 = 50,000, is past the limit, so
    # that figure is not offered as the fix
    rej = _rej("fixed:20000", "fixed:30000", max_model_len=16384)
    assert (rej.num_rejected, rej.num_past_model_limit, rej.least_max_model_len) == (4, 0, 20001)
    assert rej.fix_words().startswith("raise --max-model-len to at least 20,001 (the workload's longest prompt + 1")
    assert "50,000, is past the 40,960 tokens the model's config supports" in rej.fix_words()


def test_within_the_limit_the_words_are_unchanged():
    # 20,000 + 100 = 20,100 ≤ 40,960: the old fix, the whole longest request first
    rej = _rej("fixed:20000", "fixed:100", max_model_len=16384)
    assert rej.num_past_model_limit == 0
    assert rej.fix_words().startswith("raise --max-model-len to at least 20,100 (the workload's longest prompt + "
                                      "output; 20,001, its longest prompt + 1")


def test_sglang_counts_what_the_models_limit_would_still_refuse_by_its_own_max_req_len():
    # SGLang at --max-model-len 16,384: max_req_len 16,383, so every 20,000–40,000-token prompt is refused. At the
    # model's 40,960, max_req_len is 40,959 (the H100 pool holds more): only prompt + 4,000 > 40,960 (a prompt over
    # 36,960: 4 of seed 0's 40 draws, 37,201 to 37,900) or a prompt ≥ 40,954 stays refused; it counted them with the
    # 16,383 of the current length, so all 40
    from kvledger.analyses.serving.rejections import _lengths

    args = SimRequestArgs(model=MODEL, gpu="H100", rate=1.0, num_requests=40, max_model_len=16384, policy="sglang")
    setup = prepare_run(args, SyntheticSpec("uniform:20000:40000", "fixed:4000"))
    rej = count_rejections(setup)
    prompt, output = _lengths(setup.workload)
    still = int(((prompt + output > 40960) | (prompt >= 40959 - 5)).sum())
    assert rej.num_rejected == 40 and rej.num_past_model_limit == still == 4
    assert rej.fix_words().startswith(f"raising --max-model-len to 40,960 serves {40 - still} of them; {still} need "
                                      "more than the 40,960 tokens")
