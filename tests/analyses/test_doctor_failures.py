"""``kvledger doctor`` on a server that did not start: every failed start-up log names its cause and exits non-zero.

The logs: the two failed start-ups of the vLLM 0.19.0 campaign (tests/fixtures/vllm_startups_0_19/failed, copied from
../shared/data/vllm-startups-0.19/logs; every ``*.FAILED.log`` under ../shared/data is also run when that folder is
beside the checkout) and gpt-oss-120b on one H100 printing a negative KV memory (vLLM issue 23278;
tests/fixtures/vllm_logs/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.evidence.vllm_log import parse_vllm_log

ROOT = Path(__file__).parents[2]
FAILED = ROOT / "tests" / "fixtures" / "vllm_startups_0_19" / "failed"
SHARED = ROOT.parent / "shared" / "data"
GPT_OSS = ROOT / "tests" / "fixtures" / "vllm_logs" / "v0.10.1_gpt-oss-120b_h100_negative_kv.log"
runner = CliRunner()

# the cause each log shows, read by hand from the log (line numbers as `grep -n` counts them)
EXPECTED = {
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp2--8192.FAILED.log":
        ("dp_rank_out_of_bounds", "line 229: AssertionError: DP adjusted local rank 1 is out of bounds."),
    "qwen-qwen3-14b--h100-80gb--tp5pp1dp1--8192.FAILED.log":
        ("not_divisible", "line 323: AssertionError: 151936 is not divisible by 5"),
}


def _doctor_json(path: Path, *extra: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["doctor", str(path), "--json", *extra])
    return res.exit_code, json.loads(res.output)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_failed_startups_name_the_cause_and_exit_non_zero(name):
    code, d = _doctor_json(FAILED / name)
    kind, cause = EXPECTED[name]
    f = d["findings"][0]
    assert code == 1 and d["failed"] is True
    assert (f["name"], f["triggered"], f["verdict"]) == ("startup_failure", True, kind)
    assert cause in f["message"] and "Fix:" in f["message"]
    # the wrapping lines are evidence too: the worker's and the engine core's failure to start
    whats = {e["what"] for e in f["evidence"]}
    assert {"worker_init_failed", "engine_core_init_failed", "traceback"} <= whats


def test_tp5_fix_lists_the_tp_degrees_that_divide_the_vocabulary():
    # 151,936 = 2^7 × 1,187: TP 1, 2, 4 and 8 divide it, 5 does not
    _, d = _doctor_json(FAILED / "qwen-qwen3-14b--h100-80gb--tp5pp1dp1--8192.FAILED.log")
    # 151,936 = 2^7 × 1,187: every TP size of 1, 2, 4 and 8 divides it (the ones listed: not all its divisors)
    assert ("(valid TP sizes, those of 1, 2, 4 and 8 that divide 151,936: 1, 2, 4, 8; TP 5 does not divide it)"
            in d["findings"][0]["message"])


def test_every_failed_log_in_the_shared_data_is_diagnosed():
    logs = sorted(SHARED.rglob("*.FAILED.log")) if SHARED.exists() else []
    if not logs:
        pytest.skip("../shared/data is not beside this checkout (the copies in tests/fixtures are tested above)")
    for log in logs:
        code, d = _doctor_json(log)
        assert code == 1 and d["findings"][0]["name"] == "startup_failure", log
        assert d["findings"][0]["verdict"] not in ("traceback",), f"{log}: only a bare traceback, no cause named"


def test_negative_available_kv_memory_is_a_failure_with_the_ledger_figures():
    # vLLM issue 23278: gpt-oss-120b on one H100 prints "Available KV cache memory: -2.14 GiB" then fails to start
    log = parse_vllm_log(GPT_OSS.read_text(), str(GPT_OSS))
    neg = [f for f in log.failures if f.kind == "negative_kv_memory"]
    assert len(neg) == 1 and neg[0].line_no == 4 and neg[0].value_bytes == pytest.approx(-2.14 * 2**30)
    code, d = _doctor_json(GPT_OSS, "--model", "openai/gpt-oss-120b", "--gpu", "H100", "--engine-version", "0.10.1")
    f = d["findings"][0]
    assert code == 1 and f["verdict"] == "negative_kv_memory"
    assert "line 4: Available KV cache memory: -2.14 GiB" in f["message"]
    assert "The ledger for these settings:" in f["message"] and "left for the KV cache per GPU" in f["message"]
    assert d["log"]["vllm_lines"] >= 3  # the negative line and the failure lines are read, not skipped
    # under 0.10.1's rules the ledger's weights are the log's (65.95 vs 65.97 GiB: MXFP4 experts on Marlin on Hopper,
    # hidden 2,880 → 3,072, intermediate 2,880 → 2,944), so what it leaves for the KV cache is the log's figure
    assert "weights 65.95 GiB" in f["message"] and "-2.18 GiB left for the KV cache per GPU" in f["message"]
    assert "(the log: -2.14 GiB, line 4)" in f["message"] and "Why:" not in f["message"]
    assert not any(n.startswith("the log prints no vLLM version") for n in d["notes"])
    # gpt-oss-120b's experts are MXFP4 (4 bits a weight): no "quantized checkpoint" to offer
    assert "quantized checkpoint" not in f["message"] and "4-bit checkpoint" not in f["message"]
    # without --model the remedy is hedged, not offered as if the weights were 16-bit
    code, bare = _doctor_json(GPT_OSS)
    assert "a quantized checkpoint (if it is not one already: pass --model to know)" in bare["findings"][0]["message"]


def test_a_log_without_a_version_gets_the_weights_it_logged():
    # the same log with no --engine-version: the ledger applies 0.11.0's rules (V1 lines, version not printed). A stock
    # 0.11.0 has no triton_kernels (no dependency of the wheel), so get_mxfp4_backend takes Marlin on Hopper, as 0.10.1
    # did (torch 2.7.1): per layer 128 experts × (5,888 × 1,536 + 3,072 × 1,472) B of FP4 + their E8M0 scales (÷ 16)
    # + bf16 biases, against 2,880 × 2,880 unpadded: 5.51e9 B = 5.13 GiB more over 36 layers, 65.95 GiB, the log's
    # 65.97 GiB; so no note that another release's rules give it
    code, d = _doctor_json(GPT_OSS, "--model", "openai/gpt-oss-120b", "--gpu", "H100")
    assert not [n for n in d["notes"] if n.startswith("the log prints no vLLM version")]
    f = d["findings"][0]
    # the ledger alone leaves −2.18 GiB beside the log's −2.14 GiB: it would not have started this server either
    assert "-2.18 GiB left for the KV cache per GPU" in f["message"]
    assert ("With the log's own weights 65.97 GiB (line 1; ledger 65.95) in the ledger: -2.20 GiB left (the log: "
            "-2.14 GiB, line 4).") in f["message"]
    assert "The ledger alone would have started this server" not in f["message"]
    # --engine-version 0.11.0 given: the same rules, the same ledger
    code, t = _doctor_json(GPT_OSS, "--model", "openai/gpt-oss-120b", "--gpu", "H100", "--engine-version", "0.11.0")
    assert "-2.18 GiB left" in t["findings"][0]["message"]


def test_human_output_marks_the_traffic_findings_as_not_diagnosed():
    res = runner.invoke(app, ["doctor", str(GPT_OSS)])
    assert res.exit_code == 1
    out = " ".join(res.output.split())
    assert "FOUND startup_failure (negative_kv_memory)" in out
    assert "capacity: not diagnosed (the server did not start)" in out and "ok capacity" not in out


@pytest.mark.parametrize("line, kind", [
    # the messages as vLLM / PyTorch / NCCL print them (vLLM v1/core/kv_cache_utils.py; torch; NCCL)
    ("(EngineCore_DP0 pid=1) ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine.", "no_kv_memory"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.10 GiB",
     "cuda_oom"),
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error",
     "nccl_error"),
    ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
     "KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len`",
     "max_model_len_too_large"),
])
def test_each_kind_of_failure_line_is_recognised(line, kind):
    log = parse_vllm_log("INFO 03-21 20:15:45 [gpu_worker.py:267] Available KV cache memory: 1.00 GiB\n" + line + "\n")
    assert [f.kind for f in log.failures] == [kind]


def test_a_healthy_log_has_no_failure_and_exits_zero():
    # a whole start-up to "Starting vLLM API server" (line 30); a start-up excerpt exits 1 (test_doctor_startup_ends)
    healthy = ROOT / "tests" / "fixtures" / "vllm_logs" / "v0.10.2_qwen3-next-80b_h200_tp2.log"
    code, d = _doctor_json(healthy)
    assert code == 0 and d["failed"] is False and d["unfinished"] is False
    assert all(f["name"] != "startup_failure" for f in d["findings"])


def test_the_release_note_words_each_set_of_matching_releases():
    # RELEASES = 0.6.6, 0.8.5, 0.10.1, 0.11.0, 0.19.0, 0.28.0, 0.33.0: a run from the first is "… or earlier", one to
    # the last "… or later", any other set listed, and none matching says so; a plan that errors counts as no match
    from types import SimpleNamespace

    from kvledger.analyses.doctor.version_from_weights import RELEASES, _releases, weights_release_note
    from kvledger.units import GiB

    assert _releases(["0.6.6", "0.8.5", "0.10.1"]) == "0.10.1 or earlier releases"
    assert _releases(["0.28.0", "0.33.0"]) == "0.28.0 or later releases"
    assert _releases(["0.10.1", "0.19.0"]) == "0.10.1, 0.19.0" and _releases(["0.11.0"]) == "0.11.0"

    def plan(w_gib: float, version: str = "0.11.0"):
        return SimpleNamespace(memory=SimpleNamespace(engine_version=version,
                                                      deductions=[SimpleNamespace(name="weights", bytes=w_gib * GiB)]))

    log = SimpleNamespace(version=None, startup=SimpleNamespace(weights_bytes=20 * GiB, lines={"weights_bytes": 7}))
    # 0.19.0 and later give 20.05 GiB (within 0.5% of 20), the rest 18: "0.19.0 or later releases"
    late = {"0.19.0", "0.28.0", "0.33.0"}
    note = weights_release_note(log, plan(18.0), lambda v: plan(20.05 if v in late else 18.0, v)
                                if v != "0.6.6" else "the model does not fit")
    assert "but what the rules of 0.19.0 or later releases give (20.05 GiB)" in note and len(RELEASES) == 7
    none = weights_release_note(log, plan(18.0), lambda v: plan(18.0, v))
    assert none.endswith("no release kvledger has rules for (0.6.6, 0.8.5, 0.10.1, 0.11.0, 0.19.0, 0.28.0, 0.33.0) "
                         "gives them within 0.5%")
    # within 1% of the log already, or a version printed: no note
    assert weights_release_note(log, plan(19.9), lambda v: plan(20.0, v)) is None
    printed = SimpleNamespace(version="0.10.1", startup=log.startup)
    assert weights_release_note(printed, plan(18.0), lambda v: plan(20.0, v)) is None


def test_the_weight_format_remedy_follows_the_checkpoint():
    from types import SimpleNamespace as NS

    from kvledger.analyses.doctor.failure_notes import fix_words

    def model(method, bits):
        return NS(quant=NS(method=method, bits=bits))
    # 16-bit weights: FP8 is half the bytes; an FP8 checkpoint (8 bits): only a 4-bit one is smaller; MXFP4 (4
    # bits a value (the catalog's bits; plus an E8M0 scale per 32) and int4 AWQ: nothing smaller to offer, the clause
    # is dropped
    assert fix_words("cuda_oom", model("none", 16)).endswith(
        "more --tensor-parallel-size, or a quantized checkpoint (FP8 halves the weights' bytes)")
    assert fix_words("no_kv_memory", model("fp8", 8)).startswith(
        "raise --gpu-memory-utilization, more --tensor-parallel-size, lower --max-num-batched-tokens, or a 4-bit "
        "checkpoint (this one is already fp8, 8-bit); ")
    assert fix_words("cuda_oom", model("mxfp4", 4)).endswith("else more --tensor-parallel-size")
    assert "checkpoint" not in fix_words("negative_kv_memory", model("awq", 4))


VLLM_LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"
# a vLLM 0.19.0 start-up whose KV pool holds 40,704 tokens (2,544 blocks of 16) against max_model_len 131,072: the
# lines as 0.19 prints them (the version banner, the V1 engine config, the pool, the concurrency below 1)
POOL_ONLY = """\
(APIServer pid=1) INFO 04-22 01:36:59 [entrypoints/utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.19.0
(EngineCore pid=244) INFO 04-22 01:37:11 [v1/engine/core.py:105] Initializing a V1 LLM engine (v0.19.0) with config: \
model='meta-llama/Llama-3.1-8B-Instruct', max_seq_len=131072, tensor_parallel_size=1
(EngineCore pid=244) INFO 04-22 01:38:03 [v1/worker/gpu_worker.py:436] Available KV cache memory: 4.97 GiB
(EngineCore pid=244) INFO 04-22 01:38:04 [v1/core/kv_cache_utils.py:1319] GPU KV cache size: 40,704 tokens
(EngineCore pid=244) INFO 04-22 01:38:04 [v1/core/kv_cache_utils.py:1328] Maximum concurrency for 131,072 tokens per \
request: 0.31x
"""


def _doctor_text(path: Path) -> str:
    return " ".join(runner.invoke(app, ["doctor", str(path)], env={"COLUMNS": "200"}).output.split())


def test_the_max_model_len_fix_is_a_number_derived_as_vllms_check_does(tmp_path):
    # the pool the log prints: 40,704 tokens = 2,544 blocks of 16; vLLM's check (from 0.29) reserves the null block,
    # so the longest that starts and runs is 2,543 × 16 = 40,688 (0.19's check passes 40,704, one block short at run)
    log = tmp_path / "pool_only.log"
    log.write_text(POOL_ONLY, encoding="utf-8")
    out = _doctor_text(log)
    assert ("--max-model-len at most the pool's tokens (--max-model-len 40688: the 40,704-token pool on line 4 is "
            "2,544 blocks of 16 tokens (vLLM's default block size); less vLLM's null block, 2,543 × 16 = 40,688") in out
    assert "this release's check would pass 40,704, but a request that long never gets its last block" in out
    # V1's error prints vLLM's own estimate (line 28: 77056); V0's prints the KV cache's tokens (line 5: 1,478 blocks
    # × 16 = 23,648): the fix takes each as printed
    v1 = _doctor_text(VLLM_LOGS / "constructed_v1_restart_then_failed.log")
    assert ("lower --max-model-len to what the pool holds (--max-model-len 77056: vLLM's own estimate of the longest "
            "that fits, line 28)") in v1
    v0 = _doctor_text(VLLM_LOGS / "v0.6.4_llama-3.1-8b_rtx3090_29k_too_long.log")
    assert "(--max-model-len 23648: the tokens the KV cache holds, line 5; V0 refuses a max_model_len above" in v0
