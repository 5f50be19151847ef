"""``kvledger search --engine sglang``: every candidate planned with SGLang's memory plan (the one ``plan --engine
sglang`` prints), simulated with SGLang's scheduler (the capacity ``cost --simulate --engine sglang`` finds), its axes
SGLang's knobs and its launch line SGLang's; vLLM-only flags refused (exit 2)."""

from __future__ import annotations

import json

import pytest
from cli_run import cli_json, refused, run_cli

# Llama-3.2-3B on one L4, TP 1, 8K context, 60 requests of the default trace: two candidates (KV auto and fp8_e4m3)
BASE = ("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4", "--tp", "1",
        "--max-model-len", "8K", "--num-requests", "60", "--rate", "5", "--engine", "sglang",
        "--max-running-requests", "32", "--chunked-prefill-size", "2048")


@pytest.fixture(scope="module")
def sg() -> dict:
    return cli_json(*BASE, "--kv-cache-dtype", "auto,fp8_e4m3")


def _entry(d: dict, cid: str) -> dict:
    return next(c for c in d["candidates"] if c["id"] == cid)


def test_winner_is_planned_launched_and_checked_as_sglang(sg):
    # `kvledger plan meta-llama/Llama-3.2-3B --gpu L4 --engine sglang --tp-size 1 --context-length 8192
    # --kv-cache-dtype fp8_e4m3 --max-running-requests 32 --chunked-prefill-size 2048` (SGLang 0.5.23 rules): the
    # fraction SGLang computes is 0.821; KV 2 (K,V) × 28 layers × 8 KV heads × 128 head_dim × 1 B = 57,344 B/token;
    # available KV 12,507,213,536 B → floor(12,507,213,536 ÷ 57,344) = 218,108 pages of 1 token. At KV auto (2 B):
    # 114,688 B/token, 109,054 tokens (half, as the bytes per token double).
    w = sg["winner"]
    assert w["id"] == "nvidia_l4:tp1:kv-fp8_e4m3:seqs-32:mnbt-2048" and sg["spec"]["engine"] == "sglang"
    p = _entry(sg, w["id"])["plan"]
    assert (p["engine"], p["mem_fraction_static"], p["num_gpu_blocks"], p["block_size"]) == ("sglang", 0.821, 218108, 1)
    assert p["kv_bytes_per_token_per_gpu"] == 57344 and "gpu_memory_utilization" not in p
    assert p["source"] == "kvledger.accounting.plan.build_plan (SGLang memory rules)"
    other = next(c for c in sg["candidates"] if c["kv_cache_dtype"] == "auto")
    assert other["plan"]["num_gpu_blocks"] == 109054
    assert w["launch"]["sglang"] == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.2-3B --tp-size 1 --context-length 8192 "
        "--mem-fraction-static 0.821 --kv-cache-dtype fp8_e4m3 --max-running-requests 32 --chunked-prefill-size 2048 "
        "--page-size 1")
    assert "vllm" not in w["launch"]  # vLLM's engine was not simulated
    assert "218,108 KV tokens per GPU (mem_fraction_static 0.821" in w["launch"]["note"]


def test_check_line_replans_the_same_pool(sg):
    # the winner's check line, run: plan --engine sglang with the fraction the search planned gives its 218,108 pages
    argv = sg["winner"]["launch"]["check"].split()[1:]
    d = cli_json(*argv)
    m = d["memory"]
    assert (m["fraction_name"], m["fraction"], m["num_gpu_blocks"], m["block_size"]) == (
        "mem_fraction_static", 0.821, 218108, 1)
    assert m["available_kv_bytes"] == 12507213536 and 218108 * 57344 <= 12507213536 < 218109 * 57344


def test_capacity_is_cost_simulate_sglang_s(sg):
    # the same capacity search cost --simulate --engine sglang runs: 3.90625 req/s for the fp8 winner (bisection on
    # request_rate, resolution 1/64 of the bracket), 3.59375 for KV auto
    cost = cli_json("cost", "--simulate", "meta-llama/Llama-3.2-3B", "--gpu", "L4", "--engine", "sglang",
                    "--max-model-len", "8K", "--num-requests", "60", "--slo", "ttft=2s,tpot=100ms", "--target", "0.9",
                    "--kv-cache-dtype", "fp8_e4m3", "--max-running-requests", "32", "--chunked-prefill-size", "2048")
    win = _entry(sg, sg["winner"]["id"])["capacity"]["slo_capacity_req_per_s"]
    assert cost["capacity"]["slo_capacity_req_per_s"] == win == 3.90625
    other = next(c for c in sg["candidates"] if c["kv_cache_dtype"] == "auto")
    assert other["capacity"]["slo_capacity_req_per_s"] == 3.59375


def test_vllm_only_flags_are_refused_together():
    msg = refused(*BASE, "--gpu-memory-utilization", "0.9", "--quantization", "fp8", "--disagg")
    assert msg.startswith("search --engine sglang plans and simulates SGLang, so it refuses vLLM's flags: "
                          "--gpu-memory-utilization is vLLM's (SGLang's pool is sized by --mem-fraction-static: give "
                          "that, or leave both out for SGLang's default); --quantization is vLLM's (SGLang's online "
                          "quantization is not modelled); --disagg is vLLM's")
    assert msg.endswith("; drop them, or search vLLM (--engine vllm, the default)")
    for extra in (["--enable-expert-parallel"], ["--offload", "cpu:64GiB"], ["--mamba-ssm-cache-dtype", "float32"],
                  ["--data-parallel-size", "2"], ["--all2all-backend", "naive"]):
        assert f"{extra[0]}" in refused(*BASE, *extra)


def test_fp8_api_row_note_does_not_ask_for_the_refused_quantization_flag():
    # Llama-3.1-8B's cheapest API row, DeepInfra's Turbo, serves FP8 weights (catalog notes); vLLM's search says
    # "unless --quantization fp8", a flag search --engine sglang refuses (above): SGLang's note asks for an FP8
    # checkpoint instead
    d = cli_json("search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L40S", "--tp", "1",
                 "--max-model-len", "8K", "--num-requests", "50", "--rate", "5", "--engine", "sglang")
    assert d["api"]["key"] == "DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    fp8 = next(n for n in d["api"]["notes"] if "FP8-quantized" in n)
    assert "--quantization" not in fp8 and fp8.endswith("(the checkpoint's own: SGLang's online quantization is not "
                                                        "modelled): compare quality separately, or price self-hosting "
                                                        "an FP8 checkpoint of the model too")
    # cost --simulate --engine sglang (which refuses --quantization too) says the same under its answer
    head = cli_json("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "--engine", "sglang",
                    "--max-model-len", "8K", "--num-requests", "50", "--slo", "ttft=2s,tpot=100ms")["headline"]
    assert any(line.strip() == "note: " + fp8 for line in head)


def test_mem_fraction_static_sizes_every_candidates_pool_and_launch_line():
    # `plan ... --engine sglang --mem-fraction-static 0.85` for the fp8 candidate: free before the weights load
    # 23,230,068,817 B (L4), × 0.85 − weights 6,425,499,648 − RoPE 67,108,864 − segment tails 2,271,232 − load
    # overhead 69,793,219 = 13,180,885,532 B → floor(÷ 57,344 B/token) = 229,856 tokens: (0.85 − 0.821) × 23,230,068,817
    # = 673,671,996 B, 11,748 tokens more than the 218,108 at SGLang's own 0.821 (test above)
    d = cli_json(*BASE, "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.85")
    assert d["spec"]["mem_fraction_static"] == 0.85
    w = d["winner"]
    p = _entry(d, w["id"])["plan"]
    assert (p["mem_fraction_static"], p["available_kv_bytes"], p["num_gpu_blocks"]) == (0.85, 13180885532, 229856)
    assert "--mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3" in w["launch"]["sglang"]
    assert cli_json(*w["launch"]["check"].split()[1:])["memory"]["num_gpu_blocks"] == 229856
    # the default run's spec has no such key (a ledger written before the flag still resumes)
    assert "mem_fraction_static" not in cli_json(*BASE, "--kv-cache-dtype", "fp8_e4m3")["spec"]


def test_each_engines_fraction_is_refused_under_the_other(cli_entry):
    code, out, _ = cli_entry(*BASE[:-6], "--mem-fraction-static", "0.85", "--json")
    assert code == 2 and json.loads(out)["error"]["message"] == (
        "--mem-fraction-static 0.85 is SGLang's fraction, and this search plans and simulates vLLM: give "
        "--gpu-memory-utilization for vLLM's, or add --engine sglang")
    assert refused(*BASE, "--gpu-memory-utilization", "0.9") == (
        "search --engine sglang plans and simulates SGLang, so it refuses vLLM's flags: --gpu-memory-utilization is "
        "vLLM's (SGLang's pool is sized by --mem-fraction-static: give that, or leave both out for SGLang's default); "
        "drop them, or search vLLM (--engine vllm, the default)")
    assert "--mem-fraction-static 1.5 is out of range" in refused(*BASE, "--mem-fraction-static", "1.5")


def test_exit_status_and_engine_word(cli_entry):
    code, out, _ = cli_entry(*BASE, "--quantization", "fp8", "--json")
    assert code == 2 and "refuses vLLM's flags: --quantization" in json.loads(out)["error"]["message"]
    # SGLang's release: an FP8 KV name it lacks (fp8_inc, vLLM's Intel one) is refused in SGLang's words
    assert "fp8_inc" in refused(*BASE, "--kv-cache-dtype", "fp8_inc")


def test_default_engine_ledger_has_no_engine_key():
    d = cli_json(*BASE[:-6], "--max-num-seqs", "32", "--engine", "vllm")
    assert "engine" not in d["spec"] and "gpu_memory_utilization" in _entry(d, d["winner"]["id"])["plan"]
    assert d["winner"]["launch"]["vllm"].startswith("vllm serve meta-llama/Llama-3.2-3B --tensor-parallel-size 1")


def test_dp_attention_applies_sglangs_layout_to_each_candidate_at_tp_2():
    # DeepSeek-V2-Lite (MLA, 64 routed experts) on 2 L40S, as `kvledger report ... --engine sglang --tp 2 --ep-size 2
    # --enable-dp-attention --dp-size 2` plans it (tests/cli/test_report_sglang_dp.py): each rank's pool
    # available_kv_bytes // 31,104 B per token (27 layers × (512 + 64) × 2 B) = 703,057 tokens, 2 ranks
    d = cli_json("search", "deepseek-ai/DeepSeek-V2-Lite", "--slo", "ttft=5s,tpot=200ms", "--gpus", "L40S", "--tp",
                 "2", "--engine", "sglang", "--enable-dp-attention", "--prompt-lengths", "fixed:1024",
                 "--output-lengths", "fixed:128", "--num-requests", "50", "--rate", "1")
    assert d["spec"]["enable_dp_attention"] is True
    e = _entry(d, "nvidia_l40s:tp2:kv-auto")
    p = e["plan"]
    assert (p["enable_dp_attention"], p["dp_size"], p["ep_size"], p["num_gpu_blocks"]) == (True, 2, 2, 703057)
    assert e["num_gpus_per_unit"] == 2  # DP attention runs inside the TP group: no more GPUs
    launch = e["launch"]
    # SGLang 0.5.23 (the newest read) takes --attn-dp-size 2; --enable-dp-attention --dp-size 2 is deprecated there
    assert launch["sglang"].endswith("--page-size 1 --attn-dp-size 2 --ep-size 2")
    assert launch["check"].endswith("--attn-dp-size 2 --ep-size 2")
    assert "703,057 KV tokens per DP rank (2 ranks, attention TP 1, experts at EP 2;" in launch["note"]
    # each rank's limits: max_running_requests min(clamp(int(703,057 / 163,840 × 512) = 2,197, 2,048, 4,096),
    # 703,057 // 2) = 2,197 and the L40S's default chunk 4,096 (< 60 GB: memory_hook.py) ÷ 2 = 2,048; the line carries
    # the server-wide 2 × 2,197 = 4,394 and 2 × 2,048 = 4,096, which SGLang 0.5.23 divides back: max(1, 4,394 // 2)
    # (resolve_max_num_reqs) and 4,096 // 2 (handle_data_parallelism). Before, it carried 2,197 and 2,048: 1,098 and
    # 1,024 per rank, half what was simulated.
    assert (p["max_num_seqs"], p["max_num_batched_tokens"]) == (2197, 2048)
    assert "--max-running-requests 4394 --chunked-prefill-size 4096 " in launch["sglang"]
    assert "--max-running-requests 4394 --chunked-prefill-size 4096 " in launch["check"]
    assert "each rank's max_running_requests 2,197 and prefill chunk 2,048, the line's ÷ 2" in launch["note"]
    m = cli_json(*launch["check"].split()[1:])["memory"]
    assert (m["num_gpu_blocks"], m["max_num_seqs"], m["max_num_batched_tokens"]) == (703057, 2197, 2048)


def test_dp_attention_launch_line_divides_back_to_a_given_limit():
    # --max-running-requests 101 --chunked-prefill-size 3001 at DP 2: each rank max(1, 101 // 2) = 50 (below its
    # 703,057 // 2 tokens) and 3,001 // 2 = 1,500, as SGLang 0.5.23 divides them (resolve_max_num_reqs,
    # handle_data_parallelism); the line carries 2 × 50 = 100 and 2 × 1,500 = 3,000, which divide back to the same
    d = cli_json("search", "deepseek-ai/DeepSeek-V2-Lite", "--slo", "ttft=5s,tpot=200ms", "--gpus", "L40S", "--tp",
                 "2", "--engine", "sglang", "--enable-dp-attention", "--prompt-lengths", "fixed:1024",
                 "--output-lengths", "fixed:128", "--num-requests", "50", "--rate", "1", "--max-running-requests",
                 "101", "--chunked-prefill-size", "3001")
    e = d["candidates"][0]
    assert (e["plan"]["max_num_seqs"], e["plan"]["max_num_batched_tokens"]) == (50, 1500)
    assert "--max-running-requests 100 --chunked-prefill-size 3000 " in e["launch"]["sglang"]


def test_dp_attention_refusals():
    assert refused("search", "deepseek-ai/DeepSeek-V2-Lite", "--slo", "ttft=5s", "--gpus", "L40S",
                   "--enable-dp-attention").startswith(
        "--enable-dp-attention is SGLang's DP attention, and this search plans and simulates vLLM: add --engine "
        "sglang")
    assert refused(*BASE, "--enable-dp-attention").startswith(
        "--enable-dp-attention: meta-llama/Llama-3.2-3B is dense (no MoE layers)")
    assert refused("search", "deepseek-ai/DeepSeek-V2-Lite", "--slo", "ttft=5s", "--gpus", "L40S", "--tp", "1",
                   "--engine", "sglang", "--enable-dp-attention").startswith(
        "--enable-dp-attention needs a candidate at TP ≥ 2")


def test_ledger_is_the_same_with_one_worker_and_the_pool(tmp_path, monkeypatch):
    # the SGLang candidates run in process and in a 2-process pool write the same ledger, byte for byte (no store)
    monkeypatch.setenv("KVLEDGER_NO_CACHE", "1")
    args = (*BASE, "--gpus", "L4,L40S", "--kv-cache-dtype", "auto,fp8_e4m3", "--mem-fraction-static", "0.8")
    serial, pool = tmp_path / "serial.jsonl", tmp_path / "pool.jsonl"
    a = cli_json(*args, "--backend", "serial", "--ledger", str(serial))
    b = cli_json(*args, "--backend", "pool", "--workers", "2", "--ledger", str(pool))
    assert serial.read_bytes() == pool.read_bytes() and a == b and len(a["ranking"]) == 4


def test_table_says_sglang_and_prints_no_vllm_line():
    out = run_cli(*BASE).stdout
    assert out.startswith("kvledger search: meta-llama/Llama-3.2-3B (SGLang: its memory plan, scheduler and launch "
                          "lines), SLO ttft=2s,tpot=100ms")
    assert "  SGLang: python -m sglang.launch_server --model-path meta-llama/Llama-3.2-3B --tp-size 1" in out
    assert "vLLM: " not in out and "vllm serve" not in out


def test_nothing_fits_exits_3_with_sglangs_budget(cli_entry):
    # Llama-3.1-70B at TP 8 on L4, SGLang 0.5.23 (`kvledger plan ... --engine sglang --tp-size 8 --context-length
    # 8192`): free before load 22.05 − 0.42 = 21.63 GiB against weights 16.43 + RoPE 0.06 + weight-load overhead 0.07
    # + reserve (1 − 0.635) × 21.63 = 7.90 GiB = 24.46 GiB: short by 2.82 GiB
    code, out, _ = cli_entry("search", "meta-llama/Llama-3.1-70B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4",
                             "--tp", "8", "--max-model-len", "8K", "--num-requests", "60", "--rate", "5", "--engine",
                             "sglang", "--json")
    c = json.loads(out)["candidates"][0]
    assert code == 3 and c["reason"] == "does not fit" and c["plan"]["mem_fraction_static"] == 0.635
    assert c["detail"].startswith("SGLang's 21.63 GiB (free before the weights load (device total − the memory held "
                                  "before it, sglang_rules.SGLANG_PRELOAD_GIB)) is short by 2.82 GiB before any KV "
                                  "cache, per GPU at TP 8 (weights 16.43 GiB")
