"""What the fifth new-user trial found, each pinned: inputs that were silently accepted (--chrome-trace without --out,
an empty list item, a family GPU name that picks one variant), and wording and number format in the output."""

from __future__ import annotations

import json

import pytest
from cli_run import MODEL
from cli_run import refused as _refused
from cli_run import run_cli as _run

from kvledger.catalog.gpus import gpu_alias_note


def test_chrome_trace_without_out_is_refused():
    # trace.json is written into the --out folder only; without one the flag did nothing
    assert "--chrome-trace writes trace.json into the --out folder" in _refused(
        "simulate", MODEL, "--gpu", "H100", "--chrome-trace")


@pytest.mark.parametrize("cmd", [("plan", MODEL, "--gpu", "H100"),
                                 ("fp8-kv", MODEL, "--gpu", "H100", "--contexts")])
@pytest.mark.parametrize("value", ["8K,,32K", "8K,"])
def test_an_empty_list_item_is_refused(cmd, value):
    if cmd[0] == "plan":
        cmd = (*cmd, "--context")
    assert f"{value!r} has an empty item" in _refused(*cmd, value)


def test_a_family_gpu_name_says_which_variant_it_picked():
    # catalog rows whose every name word set includes {"a100"}: 80GB SXM4 (picked, the alias "a100"), 40GB SXM4,
    # 80GB PCIe, 40GB PCIe, in gpus.csv order
    assert gpu_alias_note("A100") == (
        "--gpu A100 → NVIDIA A100 80GB SXM4 (also: A100 40GB SXM4 (--gpu a100-40gb-sxm), A100 80GB PCIe "
        "(--gpu a100-80gb-pcie), A100 40GB PCIe (--gpu a100-40gb-pcie); name one to choose)")
    # a name that picks one row says nothing: "h100-sxm" (no other H100 answers to "sxm"), "l40" (L40S is another word)
    assert gpu_alias_note("H100-SXM") is None and gpu_alias_note("l40") is None
    assert gpu_alias_note("a100-40gb-sxm") is None
    text = " ".join(_run("plan", MODEL, "--gpu", "A100", "--verbose").stdout.split())
    assert "note: --gpu A100 → NVIDIA A100 80GB SXM4 (also: A100 40GB SXM4" in text
    # the short plan names the others by --gpu name alone (its 26 lines at 80 columns)
    assert gpu_alias_note("A100", brief=True) == ("--gpu A100 → NVIDIA A100 80GB SXM4 (also --gpu a100-40gb-sxm, "
                                                  "a100-80gb-pcie, a100-40gb-pcie)")
    short = " ".join(_run("plan", MODEL, "--gpu", "A100").stdout.split())
    assert f"note: {gpu_alias_note('A100', brief=True)}" in short


def _host_rule(*args: str) -> str:
    res = _run("plan", MODEL, "--gpu", "H100", *args, "--json")
    assert res.exit_code == 0, res.output
    return {t["name"]: t for t in json.loads(res.stdout)["kv_tiers"]["tiers"]}["host_dram"]["capacity_rule"]


def test_tier_capacity_rules_write_the_size_once_with_its_unit():
    # vLLM 0.33.0: 64 GiB = 64 × 2^30 B, in 2,097,152 B blocks (8B: 131,072 B/token × 16) on 1 rank, page-aligned to
    # 4096 B: 2^36 // 2^21 = 32,768 chunks. The size was written "64 GiB × 2^30" (the unit twice) and "1 ranks".
    rule = _host_rule("--kv-offloading-size", "64")
    assert rule.startswith("num_chunks = 64 × 2^30 B // round_up(2,097,152 B × 1 rank, 4096 B) = 32,768 ")
    # SGLang --hicache-size 10 (GB): 10 × 10^9 B // 131,072 B/token = 76,293 tokens
    rule = _host_rule("--engine", "sglang", "--enable-hierarchical-cache", "--hicache-size", "10")
    assert rule.startswith("--hicache-size 10 × 10^9 B // 131,072 B/token = 76,293;")


def test_simulate_names_sglang_pool_in_its_own_terms():
    # SGLang 0.5.x allocates size + page_size slots and hands out pages from 1: page 0 is the padded slot (dummy writes
    # of padded tokens). The plan's 411,993 usable slots (8B on H100, mem_fraction_static 0.83 with the prefill
    # graphs' 464 MiB; test_other_engines.py works it) + that page = 411,994; it read "× 1 tokens".
    text = " ".join(_run("simulate", MODEL, "--gpu", "H100", "--policy", "sglang").stdout.split())
    assert "engine: 411,994 KV token slots (slot 0 reserved: SGLang's padded slot)," in text
    assert "411,993 token slots in 411,993 pages of 1 token" in text and "× 1 tokens" not in text
    # vLLM: blocks of 16 tokens, as before
    text = " ".join(_run("simulate", MODEL, "--gpu", "H100").stdout.split())
    assert "KV blocks × 16 tokens," in text


def test_errors_group_their_numbers_as_the_rest_of_the_output_does():
    # pydantic's bound on max_num_batched_tokens is 2^26 = 67,108,864; the value came back ungrouped ("got 999999999")
    assert _refused("simulate", MODEL, "--gpu", "H100", "--max-num-batched-tokens", "999999999").endswith(
        "--max-num-batched-tokens must be ≤ 67,108,864, got 999,999,999")
    # 8B on L4 (vLLM 0.33.0): 1,947 blocks of 16 tokens, less the null block = 1,946 usable = 31,136 tokens, against
    # 131,072 / 16 = 8,192 blocks for one request of the config's max_model_len
    msg = _refused("simulate", MODEL, "--gpu", "L4")
    assert msg.startswith("the KV pool has 1,946 usable blocks of 16 tokens (block 0 is the null block), but one "
                          "request of max_model_len 131,072 tokens needs 8,192 blocks")
    assert "lower max_model_len to ≤ 31,136" in msg
