"""``--quantization fp8`` (``-q fp8``, vLLM's online FP8 weights) on the commands that size and price a deployment:
``plan`` suggests it, and ``simulate``, ``goodput``/``cost --simulate``, ``search``, ``report`` and ``offload`` carry it
into the memory plan that sizes the KV pool and into the roofline that prices each step, and say so, as do the
judgment calls (``fp8-kv``, ``spec-decode``, ``kv-eviction``, ``disagg``); it is refused
where ``plan`` refuses it, in ``plan``'s words.

Worked by hand for Llama-3.1-8B on one H100 SXM (vLLM 0.33.0 rules, gpu_memory_utilization 0.92 of 85,029,027,840 B;
KV 131,072 B per token, 2,097,152 B per 16-token block):

* the weights term (``kvledger plan``): BF16 16,094,076,928 B (16,060,522,496 B of tensors + the 33,554,432 B RoPE
  cos/sin buffer); under ``-q fp8`` 9,114,820,608 B: 6,979,256,320 B freed. The other terms (activation peak
  2,027,193,139 B, non-torch 268,435,456 B, CUDA graphs 780,140,544 B) do not change, so the KV pool grows by exactly
  those bytes: 59,056,859,546 → 66,036,115,866 B, ⌊÷ 2,097,152⌋ = 28,160 → 31,488 blocks — `plan -q fp8`'s figures.
* a decode step of one sequence at 1,024 cached tokens, flat matmuls (``--gemm-efficiency flat``: no measured BF16
  GEMM curve and no layer-kernel term, so both runs take the one formula), bandwidth-bound at 80% of 3.35 TB/s =
  2.68e12 B/s: weight bytes read + 1,024 × 131,072 = 134,217,728 B of KV, ÷ 2.68e12 B/s. The weights a step reads
  (``roofline.py``: all but the embedding): BF16 7,504,924,672 params × 2 B = 15,009,849,344 B → 5.650780 ms; FP8
  6,979,321,856 linear weights × 1 B + (525,336,576 LM head + 266,240 norm) params × 2 B + 224 per-tensor fp32 scales
  (32 layers × 7 linears) × 4 B = 8,030,528,384 B → 3.046547 ms (the matmul FLOPs, 2 × 7.5e9 at 70% of the FP8
  peak, take 0.011 ms: far under the byte term).
"""

from __future__ import annotations

import json

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.errors import InputError, KvLedgerError

KV_BF16, KV_FP8 = 59_056_859_546, 66_036_115_866  # available KV bytes per GPU (module docstring)
BLOCKS_BF16, BLOCKS_FP8 = 28_160, 31_488
FREED = 16_094_076_928 - 9_114_820_608  # 6,979,256,320 B: the weights term's difference
BW = 0.8 * 3.35e12  # B/s
KV_1024 = 1024 * 131_072  # 134,217,728 B


def test_simulate_plans_the_pool_as_plan_does_with_the_bytes_fp8_frees():
    run = ("simulate", MODEL, "--gpu", "H100", "--num-requests", "40", "--seed", "3", "--json")
    bf16, fp8 = cli_json(*run), cli_json(*run, "-q", "fp8")
    plan = cli_json("plan", MODEL, "--gpu", "H100", "-q", "fp8", "--json")
    assert (plan["memory"]["available_kv_bytes"], plan["memory"]["num_gpu_blocks"]) == (KV_FP8, BLOCKS_FP8)
    assert KV_FP8 - KV_BF16 == FREED
    assert (bf16["engine"]["num_gpu_blocks"], fp8["engine"]["num_gpu_blocks"]) == (BLOCKS_BF16, BLOCKS_FP8)
    # the same requests (seed 3), served faster: every step reads about half the weight bytes
    assert fp8["summary"]["num_finished"] == bf16["summary"]["num_finished"] == 40
    assert fp8["summary"]["tpot_s"]["mean"] < 0.6 * bf16["summary"]["tpot_s"]["mean"]
    # every figure says it: the step cost's line and source, the KV pool's note; nothing of it without the flag
    words = "weights FP8, quantized on load (vLLM --quantization fp8)"
    assert fp8["step_cost"]["weights"] == words and "Fp8LinearMethod" in fp8["step_cost"]["source"]
    assert any(n.startswith(words + ": the memory plan's weights term is 8.49 GiB per GPU") for n in fp8["notes"])
    assert "weights" not in bf16["step_cost"] and not any("--quantization" in n for n in bf16["notes"])
    text = run_cli(*run[:-1], "-q", "fp8").output
    assert "step cost: roofline (its source under the figures); " + words in text


def test_a_decode_step_at_batch_one_reads_the_fp8_weights():
    def step_s(q: str | None) -> float:
        setup = prepare(SimRequestArgs(model=MODEL, gpu="H100", num_requests=20, quantization=q,
                                       gemm_efficiency="flat"))
        return setup.cost.step_time_s(StepShape(num_decode_seqs=1, decode_kv_tokens=1024))

    assert step_s(None) == pytest.approx((15_009_849_344 + KV_1024) / BW, rel=1e-9)  # 5.650780 ms
    assert step_s("FP8") == pytest.approx((8_030_528_384 + KV_1024) / BW, rel=1e-9)  # 3.046547 ms; case as vLLM's


def test_goodput_and_cost_name_it_in_the_memory_plan_source():
    d = cli_json("goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "40", "--slo", "ttft=1s,tpot=50ms",
              "-q", "fp8", "--json")
    text = json.dumps(d)
    assert "kvledger.accounting.plan.build_plan (the KV-cache ledger); weights FP8, quantized on load" in text
    assert f'"num_gpu_blocks": {BLOCKS_FP8}' in text
    assert refused("cost", "tests/evidence/data/aiperf/run1_profile_export.jsonl", "--slo", "ttft=1s", "--gpu",
                   "H100", "--utilization", "0.5", "-q", "fp8").startswith("--quantization describes a simulation")


def test_refused_where_plan_refuses_it_in_plans_words():
    awq = refused("plan", MODEL, "--gpu", "H100", "-q", "awq")
    # an unquantized checkpoint: AWQ quantizes nothing on load; vLLM reads its settings from the checkpoint
    # (weight_utils.py::get_quant_config, awq.py's config files) and refuses it without them; fp8 and bitsandbytes
    # quantize on load and are named
    assert awq.startswith("--quantization awq: meta-llama/Llama-3.1-8B (config of meta-llama/Meta-Llama-3.1-8B) is "
                          "unquantized, and awq does not quantize weights on load: vLLM reads its settings from a "
                          "checkpoint already quantized with it (config.json's quantization_config, or "
                          "quant_config.json or quantize_config.json), and with neither refuses at start-up (\"Cannot "
                          "find the config file for awq\"); on an unquantized checkpoint --quantization fp8")
    # 0.33: bitsandbytes is gone (removed in 0.28.0: quantization/bitsandbytes.py in 0.27.0, not in 0.28.0)
    assert "--quantization fp8 (FP8 weights, quantized on load) works (bitsandbytes, removed in vLLM 0.28.0, up to " \
           "0.27)" in awq and "not modelled" not in awq
    old = refused("plan", MODEL, "--gpu", "H100", "-q", "awq", "--engine-version", "0.27.0")
    assert "or bitsandbytes (4-bit, quantized in flight) works" in old
    with pytest.raises(KvLedgerError) as gptq:  # an InputError: exit 2 from the console script (main.run)
        run_cli("plan", MODEL, "--gpu", "H100", "-q", "gptq")
    assert type(gptq.value) is InputError and "(\"Cannot find the config file for gptq\")" in str(gptq.value)
    search = ("search", MODEL, "--slo", "ttft=1s,tpot=50ms", "--gpus", "H100", "--tp", "1", "--utilization", "0.5")
    for cmd in (("simulate", MODEL, "--gpu", "H100"), ("offload", MODEL, "--gpu", "H100", "--kv-offloading-size", "8")):
        assert refused(*cmd, "--quantization", "awq") == awq
    # search refuses every candidate with the plan's reason, in the same words (exit 2: a flag every candidate shares)
    r = run_cli(*search, "--quantization", "awq")
    assert r.exit_code == 2 and awq in r.output
    sglang = refused("plan", MODEL, "--gpu", "H100", "-q", "fp8", "--engine", "sglang")
    assert sglang.startswith("--quantization fp8 is modelled for vLLM only (its online FP8 weights)")
    # simulate chooses the engine with --policy, and its refusal says so in the same words
    assert refused("simulate", MODEL, "--gpu", "H100", "-q", "fp8", "--policy", "sglang") == sglang.replace(
        "--engine", "--policy")
    assert refused("offload", MODEL, "--gpu", "H100", "-q", "fp8", "--engine", "sglang",
                   "--enable-hierarchical-cache") == sglang
    # search --engine sglang plans SGLang's candidates, so it refuses vLLM's --quantization (an InputError: exit 2);
    # --policy is simulate's word, not search's (a usage error, exit 2)
    with pytest.raises(KvLedgerError) as sg:
        run_cli(*search, "-q", "fp8", "--engine", "sglang")
    assert type(sg.value) is InputError and "--quantization is vLLM's" in str(sg.value)
    r = run_cli(*search, "-q", "fp8", "--policy", "sglang")
    assert r.exit_code == 2 and "No such option: --policy" in r.output  # the console script adds: use --engine


def test_search_plans_every_candidate_with_it_and_its_launch_lines_carry_it():
    d = cli_json("search", MODEL, "--slo", "ttft=1s,tpot=50ms", "--gpus", "H100", "--tp", "1", "--utilization", "0.5",
              "-q", "fp8", "--show-command", "H100:tp1:kv-auto", "--json")
    assert (d["plan"]["num_gpu_blocks"], d["plan"]["quantization"]) == (BLOCKS_FP8, "fp8")
    for line in ("vllm", "sglang", "check"):
        assert d["launch"][line].endswith("--quantization fp8")


def test_report_carries_it_into_its_plan_its_simulations_and_its_commands():
    from kvledger.analyses.serving.decision_data import build_plan_section, sim_args
    from kvledger.analyses.serving.report_workload import report_commands
    from kvledger.cli.report_flags import ReportBillFlags, ReportEngineFlags, ReportRunFlags, report_request

    req = report_request(MODEL, "H100", "ttft=1s,tpot=50ms", ReportRunFlags(), ReportEngineFlags(quantization="fp8"),
                         ReportBillFlags(), None)
    assert sim_args(req).quantization == "fp8"
    assert build_plan_section(req)["memory"]["num_gpu_blocks"] == BLOCKS_FP8
    cmds = report_commands(req, "")
    assert all("--quantization fp8" in cmds[k] for k in ("plan", "cost", "capacity", "sweep_point"))


def test_offload_plans_and_prices_its_runs_with_it():
    d = cli_json("offload", MODEL, "--gpu", "H100", "--kv-offloading-size", "8", "--sessions", "10", "-q", "fp8",
              "--json")
    assert d["step_cost"]["weights"] == "weights FP8, quantized on load (vLLM --quantization fp8)"
    hbm = next(t for t in d["kv_tiers"]["tiers"] if t["name"] == "hbm")
    # usable blocks: 31,488 less block 0, vLLM's null block; × 2,097,152 B = 66,033,025,024 B
    assert (hbm["capacity_blocks"], hbm["capacity_bytes"]) == (BLOCKS_FP8 - 1, (BLOCKS_FP8 - 1) * 2_097_152)


def test_the_judgment_calls_plan_and_price_with_it():
    # fp8-kv's BF16-KV pool is plan -q fp8's (28,160 → 31,488 blocks; its FP8-KV pool twice the tokens: 62,976 blocks
    # of 1,048,576 B in the same 66,036,115,866 B)
    cap = cli_json("fp8-kv", MODEL, "--gpu", "H100", "-q", "fp8", "--json")["capacity"]
    assert (cap["bf16"]["num_gpu_blocks"], cap["bf16"]["available_kv_bytes"]) == (BLOCKS_FP8, KV_FP8)
    assert cap["fp8"]["num_gpu_blocks"] == KV_FP8 // 1_048_576 == 62_976
    assert cli_json("fp8-kv", MODEL, "--gpu", "H100", "--json")["capacity"]["bf16"]["num_gpu_blocks"] == BLOCKS_BF16
    ev = cli_json("kv-eviction", MODEL, "--gpu", "H100", "--evict", "0.5", "-q", "fp8", "--json")
    assert ev["settings"]["quantization"] == "fp8"
    for argv in (["spec-decode", MODEL, "--gpu", "H100", "-k", "4", "--acceptance", "0.7"],
                 ["disagg", MODEL, "--gpu", "H100", "--rate", "2", "--num-requests", "20"]):
        res = run_cli(*argv, "-q", "fp8")
        assert res.exit_code == 0, res.output
        assert "weights FP8, quantized on load (vLLM --quantization fp8)" in res.output, argv[0]


def test_a_measured_step_cost_is_warned_that_it_prices_the_checkpoints_weights():
    # Llama-2-7B on the H100 has bundled Vidur step times, measured on its BF16 weights
    setup = prepare(SimRequestArgs(model="meta-llama/Llama-2-7b-hf", gpu="H100", num_requests=20,
                                   quantization="fp8", step_cost="calibrated"))
    assert setup.cost_info["warnings"][-1].startswith("--quantization fp8: the KV pool is planned with the FP8 weights")
    assert "weights" not in setup.cost_info


def test_the_quick_simulate_path_leaves_the_short_flag_to_typer():
    from kvledger.cli.quick_argv import parse_simulate

    assert parse_simulate(["m", "--gpu", "H100", "-q", "fp8"]) is None
    assert parse_simulate(["m", "--gpu", "H100", "--quantization", "fp8"])["quantization"] == "fp8"
