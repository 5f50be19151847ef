"""Fresh-user MoE trial leftovers: byte counts as ints in search and plan JSON, one data-parallel vocabulary, SGLang's
--ep-size named, and search saying which flag lets it consider layouts past one node."""

from __future__ import annotations

import json

from cli_run import cli_json, refused, run_cli

MODEL = "meta-llama/Llama-3.2-3B"


def _not_whole(doc, where=""):
    """(path, value) of every value under a key ``bytes`` or ending ``_bytes`` that is neither an int nor null (a list
    there: each of its items)."""
    bad = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "bytes" or k.endswith("_bytes"):
                items = v if isinstance(v, list) else [v]
                bad += [(f"{where}.{k}", x) for x in items if not (x is None or type(x) is int or isinstance(x, dict))]
            bad += _not_whole(v, f"{where}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            bad += _not_whole(v, f"{where}[{i}]")
    return bad


def test_search_and_plan_json_write_byte_counts_as_ints():
    # Llama-3.2-3B (bundled config): 3,212,749,824 params × 2 B (bfloat16) = 6,425,499,648 B of weights. Before,
    # search's candidates[].plan.weight_bytes_model was the float 6425499648.0 and the plan's ranges ±% floats
    # (low_bytes 6447750081.43…); now every byte count is an int.
    found = cli_json("search", MODEL, "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1",
                     "--num-requests", "50", "--rate", "5")
    weights = found["candidates"][0]["plan"]["weight_bytes_model"]
    assert weights == 6_425_499_648 and type(weights) is int
    assert _not_whole(found) == []
    plan = cli_json("plan", MODEL, "--gpu", "H100")
    assert type(plan["model"]["weight_bytes"]) is int and plan["model"]["weight_bytes"] == 3_212_749_824 * 2
    assert _not_whole(plan) == []


def test_plan_and_simulate_name_the_data_parallel_facts_alike():
    # DeepSeek-V3 on H200, TP 1 × DP 8 with EP: one rank's pool 25,387 blocks × 16 tokens = 406,192 tokens, 8 × 406,192
    # = 3,249,536 in all. Before, plan wrote them under "ranks"/"rule", simulate under "data_parallel_size"/
    # "rule_source"; now both use vLLM's --data-parallel-size word.
    flags = ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "8", "--enable-expert-parallel")
    plan = cli_json("plan", *flags)["data_parallel"]
    sim = cli_json("simulate", *flags, "--num-requests", "16")["data_parallel"]
    for dp in (plan, sim):
        assert (dp["data_parallel_size"], dp["gpus"], dp["kv_tokens_per_rank"], dp["kv_tokens_total"]) == (
            8, 8, 406_192, 3_249_536)
        assert dp["rule_source"].startswith("vLLM 0.33.0") and "ranks" not in dp and "rule" not in dp


def test_sglang_ep_size_that_does_not_divide_tp_is_refused_in_sglangs_words():
    # SGLang 0.5.23 takes --ep-size (srt/arg_groups/fields/parallel.py, aliases --expert-parallel-size, --ep) and lays
    # each MoE layer out as ep_size groups of moe_tp_size = tp_size // ep_size GPUs (runtime_context.py): an EP size
    # above or not dividing the TP size has no layout (parallel_hook.py: "ep_size * moe_dp_size must be equal to
    # tp_size"). Before this change every --ep-size above 1 was refused as not modelled; now only these.
    msg = refused("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--engine", "sglang", "--tp", "2", "--ep-size", "4")
    assert msg == ("--ep-size 4 with --tp 2: SGLang splits each MoE layer's tp_size GPUs into ep_size groups of "
                   "moe_tp_size = tp_size // ep_size (runtime_context.py), so ep_size must divide tp_size (\"ep_size * "
                   "moe_dp_size must be equal to tp_size\"); --ep-size 2 puts whole experts on every GPU")
    vllm = refused("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--enable-ep-moe")
    assert vllm.startswith("--enable-ep-moe is SGLang's flag") and "vLLM has no EP size" in vllm
    # 0.5.23 has no --enable-ep-moe (0.4.x's EP = TP switch): refused naming --ep-size = TP
    old = refused("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--engine", "sglang", "--tp", "2", "--enable-ep-moe")
    assert old == ("--enable-ep-moe is SGLang 0.4.x's switch for EP = TP; SGLang 0.5.23 (the rules kvledger plans "
                   "with) takes --ep-size instead: pass --ep-size 2 (with --tp 2)")


def test_sglang_ep_flags_refused_by_simulate_and_goodput_as_by_plan():
    # The same layout check runs in the simulating commands (the memory plan sizes their pool), exit 2, one line.
    sim = refused("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--engine", "sglang", "--tp", "2",
                  "--ep-size", "4")
    assert sim.startswith("--ep-size 4 with --tp 2: SGLang splits each MoE layer's tp_size GPUs") and "\n" not in sim
    good = refused("goodput", "--simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--slo", "ttft=1s",
                   "--engine", "sglang", "--tp", "2", "--ep-size", "4")
    assert good == sim
    vllm = refused("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--enable-ep-moe")
    assert vllm.startswith("--enable-ep-moe is SGLang's flag") and "vLLM has no EP size" in vllm


def test_search_says_which_flags_consider_two_nodes_when_one_cannot_hold_the_model():
    # DeepSeek-V3 (FP8): 673,150,582,112 B of weights = 626.92 GiB; an H100 gives 0.92 × 85,029,027,840 B
    # (79.19 GiB) = 78,226,705,612.8 B, so the weights alone need ⌈8.605⌉ = 9 GPUs: more than one 8-GPU node, and the
    # default TP axis (1, 2, 4, 8) stops at one node. Before: "more TP or bigger GPUs" only.
    slo = ("--slo", "ttft=2s,tpot=100ms", "--num-requests", "50", "--rate", "5")
    res = run_cli("search", "deepseek-ai/DeepSeek-V3", "--gpus", "H100", *slo, "--json")
    found = json.loads(res.stdout)
    why = found["no_winner_reason"]
    assert ("nvidia_h100_sxm: the widest tried, TP 8, fills one 8-GPU node (an 8-GPU SXM5 baseboard), and the weights "
            "alone (626.92 GiB) need 9 GPUs at 0.92 × 79.19 GiB") in why
    assert "--tp 16 (one TP group on 2 nodes, launched with --nnodes 2) with --gpu-usd-per-hour" in why
    # the flags it names do give the candidate: TP 16 on 2 nodes, planned and held to the SLO
    wide = cli_json("search", "deepseek-ai/DeepSeek-V3", "--gpus", "H100", "--tp", "16", "--gpu-usd-per-hour", "3",
                    *slo)
    cand = wide["candidates"][0]
    assert cand["tp"] == 16 and cand["plan"]["nnodes"] == 2 and cand["reason"] != "does not fit"


def test_sglang_ep_size_1_is_its_default_and_plans_as_without_it():
    # SGLang's --ep-size defaults to 1 (0.4.6 server_args.py, 0.5.23 arg_groups/fields/parallel.py): no expert
    # parallelism, the experts TP-sliced as kvledger's SGLang plan has them; a launch line that spells it out plans the
    # same (before: refused, exit 2). --ep-size 4 at --tp 2 is refused, and any --ep-size under vLLM (not its flag).
    base = ("Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--engine", "sglang", "--tp", "2")
    with_one = cli_json("plan", *base, "--ep-size", "1")
    without = cli_json("plan", *base)
    assert with_one["memory"] == without["memory"] and with_one["kv"] == without["kv"]
    assert refused("plan", *base, "--ep-size", "4").startswith("--ep-size 4 with --tp 2: SGLang splits")
    assert refused("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--ep-size", "1").startswith(
        "--ep-size 1 is SGLang's flag")
