"""validate says when the run's recorded engine release is not the one the GPU profile pricing it was fitted on: the
fractions carry that release's per-step host time."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.accounting.platforms import engine_release
from kvledger.cli.main import app

PUB = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs"


def test_engine_release_in_words():
    assert engine_release("vllm", "0.19.0") == "vLLM 0.19.0"
    assert engine_release("sglang", "0.5.2") == "SGLang 0.5.2"
    assert engine_release("vllm", None) is None and engine_release(None, "0.19.0") is None


def test_validate_names_the_release_the_profile_was_fitted_on_where_the_record_states_another():
    # LLMServingSim's DeepSeek-V3.2-Exp-16L64E run records vLLM 0.28.0 (vllm/meta.json "vllm_version"); the bundled
    # RTX PRO 6000 profile was fitted on its Llama-3.1-8B run, which records vLLM 0.19.0
    ds = PUB / "llmservingsim-rtxpro6000-deepseek-v32-16l64e"
    res = CliRunner().invoke(app, ["validate", str(ds / "vllm"), "--model", str(ds / "model" / "config.json"),
                                   "--gpu", "RTX PRO 6000 Blackwell Server Edition", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["step_cost"]["engine_mismatch"] in d["notes"]
    assert d["step_cost"]["engine_mismatch"].startswith(
        "this run's engine (vLLM 0.28.0) is not the engine release the GPU profile was fitted on (vLLM 0.19.0)")
    # the Qwen3-32B TP 2 run of the same machine records vLLM 0.19.0: no such note
    qwen = PUB / "llmservingsim-rtxpro6000-qwen3-32b"
    d = json.loads(CliRunner().invoke(app, ["validate", str(qwen / "vllm"), "--gpu",
                                            "RTX PRO 6000 Blackwell Server Edition", "--json"]).output)
    assert "engine_mismatch" not in d["step_cost"] and not any("release the GPU profile" in n for n in d["notes"])
