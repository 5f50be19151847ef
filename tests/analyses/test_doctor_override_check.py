"""doctor on a start-up with --num-gpu-blocks-override whose max_model_len the override's pool cannot hold, by
version: vLLM V1 before 0.21 checks max_model_len against the profiled memory and applies the override after
(0.19.0 ``v1/core/kv_cache_utils.py : get_kv_cache_configs``: ``_check_enough_kv_cache_memory(avail_mem, …)`` then
``may_override_num_blocks``), so it starts and prints a concurrency below 1; from 0.21.0 the same function sizes the
check from override × bytes per block and refuses.

The log is the real vLLM 0.19.0 start-up of Llama-3.1-8B-Instruct on one H100 (tests/fixtures/vllm_startups_0_19/
logs/), with the user's override added as 0.19.0 prints it: the args echo, ``may_override_num_blocks``'s "Overriding
num_gpu_blocks=%d with num_gpu_blocks_override=%d" (29,751 computed, the log's own pool) and
``_report_kv_cache_config``'s lines from the 400 overridden blocks: 400 // 1 group × 16 = 6,400 tokens and
400 / (8,192 / 16 = 512 blocks a request) = 0.78x."""

from __future__ import annotations

from pathlib import Path

from kvledger.analyses.doctor.diagnose import diagnose_file

REAL = (Path(__file__).parents[1] / "fixtures/vllm_startups_0_19/logs"
        / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")


def _with_override(tmp_path: Path, version: str) -> Path:
    out = []
    for line in REAL.read_text().splitlines():
        if "non-default args" in line:
            line = line.replace("'enable_prefix_caching': False}",
                                "'enable_prefix_caching': False, 'num_gpu_blocks_override': 400}")
        if "GPU KV cache size" in line:
            out.append(line.split("[v1/core")[0] + "[v1/core/kv_cache_utils.py:829] Overriding num_gpu_blocks=29751 "
                       "with num_gpu_blocks_override=400")
            line = line.replace("476,016", "6,400")
        out.append(line.replace("58.11x", "0.78x").replace("0.19.0", version))
    path = tmp_path / f"override_{version}.log"
    path.write_text("\n".join(out) + "\n")
    return path


def test_019_started_and_the_long_request_never_finishes(tmp_path):
    rep = diagnose_file(_with_override(tmp_path, "0.19.0"))
    assert rep.override_started.startswith("vLLM 0.19.0 started although one request of max_model_len needs more "
                                           "blocks than --num-gpu-blocks-override 400 gives (max concurrency 0.78x")
    assert "--max-model-len 6384" in rep.override_started  # (400 − the null block) × 16


def test_021_is_left_to_the_refused_start_up(tmp_path):
    assert diagnose_file(_with_override(tmp_path, "0.21.0")).override_started == ""
