"""The vLLM server-log parser on real posted logs (tests/fixtures/vllm_logs, sources in its README): exact values,
tolerance, other engines.

Byte figures: vLLM prints GiB to 2 decimals and the parser stores round(x × 2**30) bytes, so each expected value
is written as the printed number times GiB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.errors import InputError
from kvledger.evidence.vllm_log import UnsupportedLogError, parse_vllm_log, read_vllm_log
from kvledger.units import GiB

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"


def log(name: str):
    return parse_vllm_log((LOGS / name).read_text(encoding="utf-8"), name)


def gib(x: float) -> int:
    return int(round(x * GiB))


def test_v0_064_profiling_results_line_and_gb_label():
    lg = log("v0.6.4_llama-3.1-8b_rtx3090_20k.log")
    st = lg.startup
    # L1 "Loading model weights took 14.9888 GB": GB label, GiB value
    assert st.weights_bytes == gib(14.9888) and st.lines["weights_bytes"] == 1
    assert any("is GiB despite the label" in n for n in st.notes)
    # L2 "Memory profiling results: total_gpu_memory=23.58GiB ... peak_torch_memory=17.06GiB ...
    # non_torch_memory=0.35GiB
    #     kv_cache_size=3.81GiB gpu_memory_utilization=0.90"
    assert (st.total_gpu_memory_bytes, st.peak_torch_memory_bytes, st.non_torch_bytes, st.available_kv_bytes) == (
        gib(23.58), gib(17.06), gib(0.35), gib(3.81))
    assert st.gpu_memory_utilization == 0.90
    # derived: activation = peak_torch − weights = 17.06 − 14.9888 GiB; requested = 23.58 × 0.90 = 21.222 GiB
    assert st.activation_peak_bytes == gib(17.06) - gib(14.9888)
    assert st.requested_memory_bytes == int(gib(23.58) * 0.9)
    # L3 "GPU blocks: 1952, # CPU blocks: 2048" (the poster dropped the leading '#')
    assert (st.num_gpu_blocks, st.num_cpu_blocks, st.lines["num_gpu_blocks"]) == (1952, 2048, 3)
    # L4 "Maximum concurrency for 20000 tokens per request: 1.56x" → max_model_len 20000
    assert (st.concurrency_context_tokens, st.max_concurrency, st.max_model_len) == (20000, 1.56, 20000)
    assert (lg.version, lg.generation, lg.rules_version) == ("0.6.4", "v0", "0.6.4")
    assert "inferred" in lg.version_source and lg.skipped_lines == 0


def test_v0_start_up_error_is_read():
    st = log("v0.6.4_llama-3.1-8b_rtx3090_29k_too_long.log").startup
    # L5 "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache
    # (23648)"
    assert (st.error_max_model_len, st.error_kv_capacity_tokens) == (29000, 23648)
    assert st.num_gpu_blocks == 1478 and st.max_concurrency == 0.82  # 1478 × 16 = 23,648; 23,648 / 29,000 = 0.8154
    assert st.startup_error.startswith("max seq len (29000)")


def test_early_v1_command_line_and_blocks_only_format():
    lg = log("v0.7-v1_llama-3.1-70b-w8a8.log")
    st = lg.startup
    # L1 "VLLM_USE_V1=1 vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 --max-model-len 2048
    # --gpu-memory-utilization 0.98"
    assert st.model == "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8"
    assert (st.max_model_len, st.gpu_memory_utilization) == (2048, 0.98)
    assert st.weights_bytes == gib(67.7229)  # L3 "Loading model weights took 67.7229 GB"
    assert (st.num_gpu_blocks, st.num_cpu_blocks, st.max_concurrency) == (1381, None, 10.79)  # L9, L10
    # 4 lines carry values (command, weights, blocks, concurrency); "...", 5 torch.compile lines are skipped
    assert (lg.total_lines, lg.vllm_lines, lg.skipped_lines) == (10, 4, 6)
    assert (lg.generation, lg.rules_version) == ("v1", "0.8.5") and lg.version is None


def test_v0_engine_of_08_inside_a_kubectl_pane():
    lg = log("v0.8-v0engine_llama-2-7b_h100.log")
    st = lg.startup
    # L3 "total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB" between '│' box characters
    assert (st.total_gpu_memory_bytes, st.gpu_memory_utilization, st.requested_memory_bytes) == (gib(79.19), 0.90,
        gib(71.27))
    # L4 "model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes 2.38GiB;
    #     the rest of the memory reserved for KV Cache is 56.18GiB."
    assert (st.weights_bytes, st.non_torch_bytes, st.activation_peak_bytes, st.available_kv_bytes) == (
        gib(12.55), gib(0.16), gib(2.38), gib(56.18))
    assert (st.num_gpu_blocks, st.num_cpu_blocks) == (7191, 512)  # L5 "# cuda blocks: 7191, # CPU blocks: 512"
    assert st.lines["available_kv_bytes"] == 4 and st.lines["num_gpu_blocks"] == 5
    assert (lg.generation, lg.rules_version) == ("v0", "0.7.3") and "V0 rules" in lg.rules_reason


def test_several_workers_print_the_same_profile():
    st = log("v0.8-v0engine_tp_workers.log").startup
    assert st.workers == ("VllmWorkerProcess pid=521", "VllmWorkerProcess pid=507", "VllmWorkerProcess pid=577")
    # 23.35 − 21.21 − 0.20 − 0.37 = 1.57 GiB on every worker; no "different" note
    assert st.available_kv_bytes == gib(1.57) and not any("different" in n for n in st.notes)
    assert st.requested_memory_bytes == gib(23.35) and st.gpu_memory_utilization == 0.99


def test_engine_config_echo_and_printed_version():
    lg = log("v0.8.1-v0engine_config_echo.log")
    st = lg.startup
    # L6 "Initializing a V0 LLM engine (v0.8.1) with config: model='meta-llama/Llama-3.2-1B-Instruct', ...
    #     dtype=torch.bfloat16, max_seq_len=131072, ..., tensor_parallel_size=1, pipeline_parallel_size=1,"
    assert (lg.version, lg.version_source, lg.generation) == ("0.8.1", "printed (line 6)", "v0")
    assert (st.model, st.dtype, st.max_model_len, st.tensor_parallel_size, st.pipeline_parallel_size) == (
        "meta-llama/Llama-3.2-1B-Instruct", "bfloat16", 131072, 1, 1)
    # L5 "Chunked prefill is enabled with max_num_batched_tokens=2048."
    assert (st.max_num_batched_tokens, st.enable_chunked_prefill) == (2048, True)
    assert lg.skipped_lines == 4  # platform, kserve, tasks and the chunked-prefill warning carry nothing read


def test_v1_0102_capacity_lines():
    lg = log("v0.10.2_qwen3-14b_lmcache.log")
    st = lg.startup
    assert st.available_kv_bytes == gib(6.51)  # L1 "Available KV cache memory: 6.51 GiB"
    assert st.kv_cache_tokens == 42656  # L2 "GPU KV cache size: 42,656 tokens"
    # L3 "... 32,768 tokens per request: 1.30x"
    assert (st.concurrency_context_tokens, st.max_concurrency) == (32768, 1.30)
    assert st.workers == ("EngineCore_DP0 pid=1133552",)
    assert lg.version == "0.10.2" and "kv_cache_utils.py:864" in lg.version_source  # docs/engine-model.md §1.9 O6


def test_banner_args_dict_behind_docker_compose_and_quote_prefixes():
    lg = log("v0.18.0_banner_docker_compose.log")
    st = lg.startup
    assert (lg.version, lg.version_source) == ("0.18.0", "printed (line 3)")  # banner "… version 0.18.0"
    assert st.model == "/models/unsloth/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf" and st.served_model_name == "Qwen/Qwen3-8B"
    # L7 non-default args: 'max_model_len': 16384, 'gpu_memory_utilization': 0.79, 'kv_cache_dtype': 'fp8',
    # 'max_num_seqs': 16
    assert (st.max_model_len, st.gpu_memory_utilization, st.kv_cache_dtype, st.max_num_seqs) == (16384, 0.79, "fp8", 16)
    assert st.lines["max_model_len"] == 7 and lg.skipped_lines == 5


def test_cudagraph_estimate_override_and_018_notice():
    lg = log("v0.18_cudagraph_estimate_override.log")
    st = lg.startup
    # L1 "Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512" comes before the KV budget (L4): 0.18's
    # CUDA-graph
    # profiling on a 512-block throw-away cache (512 = max_cudagraph_capture_size, L2 "largest=512"), not a user setting
    assert st.num_gpu_blocks_override is None and "num_gpu_blocks_override" not in st.lines
    assert any(
        n.startswith("line 1: 'Overriding num_gpu_blocks=0") and "CUDA-graph memory profiling" in n for n in st.notes
    )
    # L5 "In v0.19, CUDA graph memory profiling will be enabled by default": the estimate was not subtracted
    assert (st.cudagraph_estimate_applied, st.lines["cudagraph_estimate_applied"]) == (False, 5)
    assert st.cudagraph_estimate_bytes == gib(1.62)  # L3 "Estimated CUDA graph memory: 1.62 GiB total"
    assert st.available_kv_bytes == gib(6.9)  # L4 "Available KV cache memory: 6.9 GiB"
    assert st.gpu_memory_utilization == 0.9  # L5 "... increase --gpu-memory-utilization from 0.9000 to 0.9690 ..."
    assert (st.kv_cache_tokens, st.concurrency_context_tokens, st.max_concurrency) == (89760, 262144, 1.36)  # L6, L7
    # the notice is printed by 0.18 and by 0.19.x too (0.19.0's 40 start-ups in ../shared, a published 0.19.1 log): the
    # log is read under 0.19.0's rules and says that 0.18 is the other candidate (PR #39559 ran 0.18)
    assert lg.version == "0.19.0" and "In v0.19" in lg.version_source and "0.18 and 0.19.x" in lg.version_source


def test_capacity_line_pairs_name_the_release():
    # kv_cache_utils.py's (GPU KV cache size, Maximum concurrency) lines, each pair read in logs that print their
    # version: 1713/1718 in the 0.20.1rc1 issue log (club-3090 #46), 1710/1711 in 0.21.0 (LMCache #3430) and in the
    # May-2026 Windows build log; 1711 alone is the size line in 0.20.0 and the concurrency line in 0.21.0
    assert log("v0.20.1_tp2_worker_lines.log").version == "0.20.1"
    win = log("v0.2x_windows_cudagraph_pool.log")
    assert win.version == "0.21.0" and "kv_cache_utils.py:1710/1711" in win.version_source


def test_capacity_line_pair_of_0_19():
    # 1319/1324: the (size, concurrency) lines of all 24 started vLLM 0.19.0 H100 start-ups in ../shared (each prints
    # "version 0.19.0") and of the 0.19.1rc1 issue log (vllm#39734, banner in the same thread). Before the pair was
    # known the log was read under the 0.11.0 fallback rules ("not inferable from the line formats")
    lg = log("v0.19.1rc1_gemma-4-31b_pool_below_max_len.log")
    assert (lg.version, lg.rules_version) == ("0.19.0", "0.19.0") and "kv_cache_utils.py:1319/1324" in lg.version_source
    st = lg.startup  # L1 "Using max model len 262144", L2 37,392 tokens, L3 1.53x at 262,144
    assert (st.max_model_len, st.kv_cache_tokens, st.max_concurrency) == (262144, 37392, 1.53)


def test_v024_hybrid_fp8_args_and_printed_version():
    lg = log("v0.24.0_hybrid_fp8_rtx5090.log")
    st = lg.startup
    assert (lg.version, lg.generation, lg.rules_version) == ("0.24.0", "v1", "0.24.0")  # L5 "V1 LLM engine (v0.24.0)"
    assert (st.available_kv_bytes, st.kv_cache_tokens, st.max_concurrency) == (gib(5.98), 567978, 4.33)  # L1–L3
    # L4 args: 'max_model_len': 131072, 'kv_cache_dtype': 'fp8', 'max_num_batched_tokens': 8192, 'max_num_seqs': 1
    assert (st.max_model_len, st.kv_cache_dtype, st.max_num_batched_tokens, st.max_num_seqs) == (131072, "fp8", 8192, 1)
    assert (st.quantization, st.enable_prefix_caching, st.served_model_name) == ("modelopt", True, "qwen3.6-35b-a3b")


def test_cuda_graph_pool_lines():
    st = log("v0.2x_windows_cudagraph_pool.log").startup
    assert st.cudagraph_actual_bytes == gib(0.11)  # L6 "Graph capturing finished in 2 secs, took 0.11 GiB"
    # L7 "CUDA graph pool memory: 0.11 GiB (actual), 0.14 GiB (estimated)"
    assert st.cudagraph_estimate_bytes == gib(0.14)
    assert (st.kv_cache_tokens, st.max_concurrency) == (396928, 3.03)


def test_v0_metrics_and_swap_preemption_with_times():
    lg = log("v0.6.3_metrics_swap_preemption.log")
    a, b = lg.stats
    # L1 "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 7220.5 tokens/s, Running: 2 reqs, Swapped: 0
    # reqs,
    #     Pending: 98 reqs, GPU KV cache usage: 73.8%, CPU KV cache usage: 0.0%."
    assert (a.prompt_tokens_per_s, a.generation_tokens_per_s, a.running_reqs, a.swapped_reqs, a.waiting_reqs) == (0.0,
        7220.5, 2, 0, 98)
    assert (a.gpu_kv_usage_pct, a.cpu_kv_usage_pct, a.preemptions, a.engine) == (73.8, 0.0, None, None)
    assert (b.gpu_kv_usage_pct, b.t_s, a.t_s) == (86.1, 5.0, 0.0)  # 11:16:39 − 11:16:34
    # L3 "Sequence group chat-7e63… is preempted by PreemptionMode.SWAP mode because there is not enough KV cache space"
    (e,) = lg.preemptions
    assert (e.request_id, e.mode, e.kind, e.cumulative, e.t_s) == ("chat-7e630abf1a8b4c8a88775b1e98a54cf2", "SWAP",
                                                                   "preempted", None, 7.0)
    assert not lg.prints_preemption_counts


def test_recompute_preemption_with_cumulative_count():
    lg = log("v0.5_recompute_preemption.log")
    (e,) = lg.preemptions  # "... PreemptionMode.RECOMPUTE mode ... total_num_cumulative_preemption=1"
    assert (e.request_id, e.mode, e.cumulative, e.time_text) == ("147", "RECOMPUTE", 1, "08-20 10:18:39")
    assert (lg.vllm_lines, lg.skipped_lines) == (1, 5)  # the traceback is skipped


def test_glued_records_on_one_physical_line():
    lg = log("v0.10_metrics_glued_lines.log")
    assert [(s.line_no, s.gpu_kv_usage_pct, s.generation_tokens_per_s) for s in lg.stats] == [
        (1, 91.2, 239.2), (2, 91.6, 239.2), (2, 91.9, 240.0)]  # line 2 holds two records: "…0.0%INFO 07-28 06:41:19 …"
    assert [s.t_s for s in lg.stats] == [0.0, 10.0, 20.0] and all(s.engine == "000" for s in lg.stats)


def test_v1_metrics_behind_iso_stamps_and_prefix_hits():
    lg = log("v1_metrics_iso_timestamps.log")
    assert [s.t_s for s in lg.stats] == [0.0, 10.0, 20.0, 30.0]
    assert [(s.running_reqs, s.waiting_reqs, s.gpu_kv_usage_pct) for s in lg.stats][:2] == [(9, 0, 62.8), (9, 1, 68.8)]
    hits = [s.prefix_cache_hit_pct for s in log("v1_metrics_prefix_hits_rising.log").stats]
    assert hits == [0.0, 48.4, 64.6, 72.6, 77.5]  # "Prefix cache hit rate: …%" on lines 1–5


def test_v1_preemptions_field_constructed_log():
    # CONSTRUCTED fixture (README): V1 metrics lines with "Preemptions: N" (loggers.py format); start-up lines from a
    # real measurement
    lg = log("constructed_v1_preemptions_at_full_kv.log")
    assert [s.preemptions for s in lg.stats] == [None, None, None, 9, 14, 11]
    assert lg.prints_preemption_counts and lg.stats[3].gpu_kv_usage_pct == 99.6
    st = lg.startup
    # DEBUG "Total non KV cache memory: 19.88GiB; torch peak memory increase: 4.76GiB; non-torch forward increase
    # memory: 0.13GiB;
    #        weights memory: 14.99GiB." and "Model loading took 14.99 GiB and 12.430712 seconds"
    assert (st.non_kv_total_bytes, st.activation_peak_bytes, st.non_torch_bytes, st.weights_bytes) == (
        gib(19.88), gib(4.76), gib(0.13), gib(14.99))
    assert st.lines["weights_bytes"] == 4 and st.enable_prefix_caching is True


def test_one_line_capacity_format_of_033():
    # CONSTRUCTED from the 0.33 format in docs/engine-model.md §1.7 ("both values print on one line")
    text = ("(EngineCore pid=9) INFO 01-05 10:00:00 [kv_cache_utils.py:1400] GPU KV cache size: 440,704 tokens, "
            "Maximum concurrency for 131,072 tokens per request: 3.36x")
    lg = parse_vllm_log(text)
    assert (lg.startup.kv_cache_tokens, lg.startup.max_concurrency, lg.rules_version) == (440704, 3.36, "0.33.0")


def test_v0_separate_prefix_hit_line_attaches_to_the_previous_sample():
    # CONSTRUCTED from V0 engine/metrics.py's documented second line "Prefix cache hit rate: GPU: X%, CPU: Y%"
    text = ("INFO 05-01 10:00:00 metrics.py:351] Avg prompt throughput: 120.0 tokens/s, Avg generation throughput: "
            "30.0 tokens/s, "
            "Running: 3 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 5.0%, CPU KV cache usage: 0.0%.\n"
            "INFO 05-01 10:00:00 metrics.py:367] Prefix cache hit rate: GPU: 42.50%, CPU: 0.00%")
    (s,) = parse_vllm_log(text).stats
    assert s.prefix_cache_hit_pct == 42.5 and s.line_no == 1


def test_unknown_lines_are_skipped_not_fatal():
    text = "\n".join(["garbage \x00\x01 line", "INFO 01-01 00:00:00 [x.py:1] something unrelated", "",
                      "(EngineCore pid=1) INFO 01-01 00:00:01 [gpu_worker.py:1] Available KV cache memory: 1.50 GiB",
                      "Traceback (most recent call last):", "{ not json"])
    lg = parse_vllm_log(text)
    assert (lg.total_lines, lg.vllm_lines, lg.skipped_lines) == (6, 1, 5)
    assert lg.startup.available_kv_bytes == gib(1.5) and lg.engine == "vllm"


@pytest.mark.parametrize("name, engine, word", [
    ("sglang_server.log", "sglang", "SGLang"), ("tgi_launcher.log", "tgi", "TGI"),
    ("trtllm_engine.log", "trtllm", "TensorRT-LLM"), ("llamacpp_ollama.log", "llama.cpp", "llama.cpp")])
def test_other_engines_are_recognised_and_refused(name, engine, word):
    assert log(name).engine == engine
    with pytest.raises(UnsupportedLogError) as err:
        read_vllm_log(LOGS / name)
    assert word in str(err.value) and "vLLM server logs only" in str(err.value) and "line " in str(err.value)


def test_no_vllm_lines_and_missing_file(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("just some text\nno engine here\n")
    with pytest.raises(UnsupportedLogError, match="no vLLM log lines in 2 line"):
        read_vllm_log(p)
    with pytest.raises(InputError, match="no such file"):
        read_vllm_log(tmp_path / "absent.log")


def test_result_is_json_serializable():
    d = log("constructed_v1_preemptions_at_full_kv.log").to_dict()
    back = json.loads(json.dumps(d))
    assert back["startup"]["kv_cache_tokens"] == 420896 and back["stats"][3]["preemptions"] == 9


# CONSTRUCTED lines in vLLM 0.19's formats: kv_cache_utils.py::may_override_num_blocks, gpu_worker.py's budget line,
# entrypoints/utils.py's args echo and the API server's version line.
_V = "(APIServer pid=1) INFO 04-22 00:03:30 [entrypoints/openai/api_server.py:1] vLLM API server version {}"
_ARGS = ("(APIServer pid=1) INFO 04-22 00:03:35 [entrypoints/utils.py:233] non-default args: "
         "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'num_gpu_blocks_override': 1000}")
_OVERRIDE = ("(EngineCore pid=2) INFO 04-22 00:04:19 [v1/core/kv_cache_utils.py:829] "
             "Overriding num_gpu_blocks={} with num_gpu_blocks_override={}")
_AVAIL = "(EngineCore pid=2) INFO 04-22 00:04:20 [v1/worker/gpu_worker.py:436] Available KV cache memory: 58.11 GiB"


def test_cudagraph_profiling_override_is_not_a_setting_but_a_real_override_is():
    # 0.19: the profiling pass logs "num_gpu_blocks=0 … =512" before the budget; the user's override is logged after it
    # with floor(58.11 GiB / 2 MiB) = 29,752 computed blocks (get_kv_cache_configs → may_override_num_blocks)
    lines = [_V.format("0.19.0"), _OVERRIDE.format(0, 512), _AVAIL, _OVERRIDE.format(29752, 1000)]
    st = parse_vllm_log("\n".join(lines)).startup
    assert (st.num_gpu_blocks_override, st.lines["num_gpu_blocks_override"]) == (1000, 4)
    assert any(n.startswith("line 2: 'Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512'") for n in st.notes)
    # the args echo (line 2 here) is read first and wins
    st = parse_vllm_log("\n".join([_V.format("0.19.0"), _ARGS] + lines[1:])).startup
    assert (st.num_gpu_blocks_override, st.lines["num_gpu_blocks_override"]) == (1000, 2)
    # the profiling pass alone: no override
    assert parse_vllm_log("\n".join(lines[:3])).startup.num_gpu_blocks_override is None
    # a computed count of 0 never sets the pool (override.py): 0.24's real override logs available // bytes per
    # block, 0 only below one block, and the user's setting is the args echo's; a 0.19 profiling line in a log that
    # says 0.20 (relabelled) is not read as a 512-block pool either, against the printed KV cache size
    for version in ("0.24.0", "0.20.0"):
        st = parse_vllm_log("\n".join([_V.format(version), _AVAIL, _OVERRIDE.format(0, 64)])).startup
        assert st.num_gpu_blocks_override is None
        assert any(n.startswith("line 3: 'Overriding num_gpu_blocks=0 with num_gpu_blocks_override=64': a computed "
                                "count of 0 blocks is not read as the pool") for n in st.notes)
    st = parse_vllm_log("\n".join([_V.format("0.24.0"), _ARGS, _AVAIL, _OVERRIDE.format(0, 1000)])).startup
    assert (st.num_gpu_blocks_override, st.lines["num_gpu_blocks_override"]) == (1000, 2)


@pytest.mark.parametrize("computed, version, generation, profiling", [
    # _init_minimal_kv_cache_for_profiling logs through the helper
    (0, "0.18.0", "v1", True), (0, "0.19.1", "v1", True),
    # suppress_log=True / no such log
    (0, "0.20.0", "v1", False), (0, "0.24.0", "v1", False), (0, "0.33.0", "v1", False),
    (0, None, None, True),  # no version: a 0 is taken as the profiling pass (the only V1 source of 0 before 0.24)
    (0, "0.6.4", "v0", False),  # V0 executor_base.py: no profiling pass
    (29752, "0.19.0", "v1", False)])  # a computed count ≥ 1 is the real override
def test_override_rule_by_version(computed, version, generation, profiling):
    from kvledger.evidence.vllm_log.override import OverrideLine, is_cudagraph_profiling

    assert is_cudagraph_profiling(OverrideLine(1, computed, 512), version, generation) is profiling


def test_line_numbers_as_grep_counts_them(tmp_path):
    # only "\n" ends a line: a progress bar's bare "\r", a form feed and a CRLF ending stay inside their line (grep -n:
    # 2, 3)
    p = tmp_path / "crlf.log"
    p.write_bytes(("Capturing CUDA graphs:  50%|\rCapturing CUDA graphs: 100%|\n"
                   "\x0c" + _AVAIL + "\r\n"
                   "(EngineCore pid=2) INFO 04-22 00:04:20 [v1/core/kv_cache_utils.py:1319] GPU KV cache size: 476,016 "
                   "tokens\n"
                   ).encode("utf-8"))
    lg = read_vllm_log(p)
    assert (lg.startup.lines["available_kv_bytes"], lg.startup.lines["kv_cache_tokens"], lg.total_lines) == (2, 3, 3)
    assert lg.startup.available_kv_bytes == gib(58.11) and lg.startup.kv_cache_tokens == 476016


@pytest.mark.parametrize("line, applied", [
    # vLLM 0.20 gpu_worker.py::determine_available_memory, after the budget line (CONSTRUCTED from its format strings)
    ("CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9000 is "
     "equivalent to --gpu-memory-utilization=0.8894 without CUDA graph memory profiling.", True),
    ("CUDA graph memory profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph "
     "memory "
     "is not accounted for during KV cache allocation", False)])
def test_cudagraph_estimate_applied_or_not(line, applied):
    st = parse_vllm_log(
        _AVAIL + "\n(EngineCore pid=2) INFO 04-22 00:04:20 [v1/worker/gpu_worker.py:455] " + line
    ).startup
    assert (st.cudagraph_estimate_applied, st.lines["cudagraph_estimate_applied"]) == (applied, 2)


def test_019_debug_lines_give_the_device_total_and_the_budget():
    # vLLM 0.19's gpu_worker.py DEBUG lines, copied from the start-up corpus (../shared/data/vllm-startups-0.19):
    # the device total appears as total_memory=79.19GiB at worker start and as the 79.19 of "(78.68/79.19 GiB)"
    # after the pool is sized; the budget line gives 0.95 and 75.23 GiB
    head = ("(EngineCore pid=242) INFO 04-22 00:04:20 [v1/worker/gpu_worker.py:436] Available KV cache memory: 58.11 "
            "GiB\n"
            "(EngineCore pid=242) DEBUG 04-22 00:04:20 [v1/worker/gpu_worker.py:424] Initial free memory: 78.68 GiB; "
            "Requested memory: 0.950000 (util), 75.23 GiB\n")
    tail = ("(EngineCore pid=242) DEBUG 04-22 00:04:24 [v1/worker/gpu_worker.py:661] Free memory on device "
            "(78.68/79.19 GiB) "
            "on startup. Desired GPU memory utilization is (0.95, 75.23 GiB).\n")
    st = parse_vllm_log(head + tail, "x.log").startup
    assert (st.total_gpu_memory_bytes, st.lines["total_gpu_memory_bytes"]) == (gib(79.19), 3)
    assert (st.requested_memory_bytes, st.gpu_memory_utilization) == (gib(75.23), 0.95)
    snapshot = ("(EngineCore pid=242) DEBUG 04-22 00:03:47 [v1/worker/gpu_worker.py:284] worker init memory snapshot: "
                "torch_peak=0.0GiB, free_memory=78.68GiB, total_memory=79.19GiB, cuda_memory=0.51GiB, "
                "torch_memory=0.0GiB\n")
    st = parse_vllm_log(snapshot + head, "x.log").startup
    assert (st.total_gpu_memory_bytes, st.lines["total_gpu_memory_bytes"]) == (gib(79.19), 1)


def test_020_utilization_sentence_fp8_notice_and_wsl():
    # lines as vLLM 0.20–0.23 print them (published logs: a 0.22.0 run at 0.95, a 0.23.1 dev build with an fp8 cache
    # named only by cache.py's notice, a 0.20.0 run under WSL2)
    text = "\n".join([
        "(APIServer pid=1) INFO 07-02 21:27:25 [cache.py:280] Using fp8 data type to store kv cache. It reduces the "
        "GPU memory footprint and boosts the performance.",
        "(EngineCore pid=187) WARNING 05-01 20:45:03 [interface.py:686] Using 'pin_memory=False' as WSL is detected. "
        "This may slow down the performance.",
        "(EngineCore pid=1073) INFO 09-03 03:39:29 [gpu_worker.py:481] CUDA graph memory profiling is enabled (default "
        "since v0.21.0). The current --gpu-memory-utilization=0.9500 is equivalent to --gpu-memory-utilization=0.9417 "
        "without CUDA graph memory profiling.",
        "(EngineCore pid=1073) INFO 09-03 03:39:30 [kv_cache_utils.py:1733] GPU KV cache size: 492,912 tokens",
        "(EngineCore pid=1073) INFO 09-03 03:39:30 [kv_cache_utils.py:1734] Maximum concurrency for 4,096 tokens per "
        "request: 120.34x",
    ])
    lg = parse_vllm_log(text, "inline")
    st = lg.startup
    # the setting, not its equivalent without profiling; the estimate was applied ("is enabled")
    assert (st.gpu_memory_utilization, st.lines["gpu_memory_utilization"], st.cudagraph_estimate_applied) == (0.95, 3,
                                                                                                            True)
    assert (st.kv_cache_dtype, st.lines["kv_cache_dtype"]) == ("fp8", 1)
    assert any(n.startswith("line 2: the server ran under WSL2") and "--wddm" in n for n in st.notes)
    assert lg.version == "0.22.0" and "1733/1734" in lg.version_source  # the pair of 0.22.0 and 0.22.1


def test_vllms_debug_kv_cache_memory_suggestion_is_read_in_both_formats():
    # gpu_worker.py::compile_or_warm_up_model's DEBUG line after graph capture. vLLM 0.19.0 (real H100 start-up, line
    # 58): "`--kv-cache-memory=64959076352` (60.5 GiB) to fully utilize gpu memory. Current kv cache memory in use is
    # 58.11 GiB." → 64,959,076,352 B and round(58.11 × 2^30) = 62,395,137,393 B; vLLM 0.10.2 (real TP 2 log) prints
    # no GiB figure and the cache in use in bytes: 59,540,753,920 and 47,878,721,024 B
    st = read_vllm_log(str(LOGS.parent / "vllm_startups_0_19" / "logs"
                           / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")).startup
    assert (st.kv_memory_to_gpu_limit_bytes, st.kv_memory_in_use_bytes) == (64_959_076_352, 62_395_137_393)
    assert st.lines["kv_memory_to_gpu_limit_bytes"] == 58
    st = read_vllm_log(str(LOGS / "v0.10.2_qwen3-next-80b_h200_tp2.log")).startup
    assert (st.kv_memory_to_gpu_limit_bytes, st.kv_memory_in_use_bytes) == (59_540_753_920, 47_878_721_024)
