"""`kvledger doctor` on a data-parallel start-up: each engine core (EngineCore_DP0, EngineCore_DP1) profiles its own
GPU and sizes its own KV pool (vLLM 0.19 v1/engine/core.py::_initialize_kv_caches, nothing reduced across DP ranks),
then prints its capacity lines (v1/core/kv_cache_utils.py:1319/1324, "GPU KV cache size: %s tokens", "Maximum
concurrency for %s tokens per request: %.2fx", info_once scoped to the process). Ranks whose pools differ are named,
with both lines."""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json

# the real head of a vLLM 0.19.0 DP 2 start-up on H100s (banner, args, both engine cores' init lines), before its
# DP 1 failed on a one-GPU node (line 229)
DP_LOG = (Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "failed"
          / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp2--8192.FAILED.log")
_CAP = ("(EngineCore_DP{k} pid={pid}) INFO 04-22 01:42:2{s} [v1/core/kv_cache_utils.py:1319] GPU KV cache size: {t} "
        "tokens\n(EngineCore_DP{k} pid={pid}) INFO 04-22 01:42:2{s} [v1/core/kv_cache_utils.py:1324] Maximum "
        "concurrency for 8,192 tokens per request: {c}x\n")
# the last line of the single-engine 0.19 start-up (uvicorn's), so the log shows the server started
_SERVING = "(APIServer pid=1) INFO:     Application startup complete.\n"


def _head() -> str:
    return "".join(DP_LOG.read_text().splitlines(keepends=True)[:132])


def _dp(tmp_path: Path, dp1_tokens: str, dp1_conc: str) -> dict:
    path = tmp_path / "dp2.log"
    path.write_text(_head() + _CAP.format(k=0, pid=437, s=0, t="476,016", c="58.11")
                    + _CAP.format(k=1, pid=438, s=1, t=dp1_tokens, c=dp1_conc) + _SERVING)
    d = cli_json("doctor", str(path), "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100")
    return next(f for f in d["findings"] if f["name"] == "dp_startup")


def test_dp_ranks_with_different_kv_pools_are_flagged_with_both_lines(tmp_path):
    # DP 0 prints the 0.19 H100 pool of 29,751 blocks × 16 = 476,016 tokens (58.11x at 8,192); DP 1 27,500 blocks ×
    # 16 = 440,000 tokens (53.71x): (476,016 − 440,000) ÷ 476,016 = 7.6 % less. Lines 133–136 after the 132 head lines
    f = _dp(tmp_path, "440,000", "53.71")
    assert f["triggered"] and f["verdict"] == "ranks_differ"
    assert f["message"].startswith("2 DP ranks sized different KV caches: GPU KV cache size: DP1 440,000 tokens (line "
                                   "135) against DP0 476,016 tokens (line 133), 7.6% less.")
    assert [(e["line"], e["value"]) for e in f["evidence"]] == [(133, "476,016 tokens"), (135, "440,000 tokens")]


def test_dp_ranks_with_the_same_pool_agree(tmp_path):
    f = _dp(tmp_path, "476,016", "58.11")
    assert not f["triggered"] and f["verdict"] == "ranks_agree"
    assert f["message"] == ("2 DP ranks sized the same KV cache: DP0 476,016 tokens (line 133); DP1 476,016 tokens "
                            "(line 135)")
