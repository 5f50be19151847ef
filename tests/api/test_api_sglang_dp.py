"""``kvledger.simulate``, ``kvledger.goodput`` and ``kvledger.cost`` take SGLang's DP attention (``policy="sglang"``,
``enable_dp_attention``, ``data_parallel_size``, ``ep_size``, ``moe_a2a_backend``) as their commands take it
(tests/cli/test_goodput_cost_sglang_dp.py): each result equal to the command's ``--json``. Before, the calls refused
it, as goodput --simulate and cost --simulate did."""

from __future__ import annotations

import pytest
from api_cli_json import cli_json, plain

import kvledger

DSV3 = "deepseek-ai/DeepSeek-V3"
SG = dict(policy="sglang", tp=8, ep_size=8, enable_dp_attention=True, data_parallel_size=8, num_requests=32, rate=20.0)
SG_FLAGS = ("--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8", "--enable-dp-attention",
            "--dp-size", "8", "--num-requests", "32", "--rate", "20")


def test_simulate_runs_the_dp_attention_ranks_as_the_command():
    d = kvledger.simulate(DSV3, "H200", cache=False, **SG).to_dict()
    # the plan's pool per DP rank, 191,924 tokens (tests/cli/test_sglang_dp_simulate.py); round robin, 32 / 8 = 4 each
    assert d["data_parallel"]["kv_tokens_per_rank"] == 191_924 and d["data_parallel"]["gpus"] == 8
    assert d["data_parallel"]["requests_routed_per_rank"] == [4] * 8
    assert plain(d) == cli_json("simulate", DSV3, *SG_FLAGS)


@pytest.mark.parametrize("backend", [None, "deepep"])
def test_goodput_runs_them_as_the_command(backend):
    g = kvledger.goodput(DSV3, "H200", slo="ttft=200ms", moe_a2a_backend=backend, cache=False, **SG).to_dict()
    assert g["num_gpus"] == 8  # DP attention 8 inside TP 8
    flags = ("--moe-a2a-backend", backend) if backend else ()
    assert plain(g) == cli_json("goodput", "--simulate", DSV3, *SG_FLAGS, *flags, "--slo", "ttft=200ms")
    if backend is None:  # 24 of the 32 first tokens within 200 ms (tests/cli/test_goodput_cost_sglang_dp.py)
        assert g["num_good"] == 24


def test_cost_prices_them_as_the_command():
    c = kvledger.cost(simulate=DSV3, gpu="H200", slo="ttft=200ms", at_offered_load=True, cache=False, **SG)
    d = c.to_dict()
    # 24 good requests over simulate's 6.6523 s on one 8-GPU node (decode steps at the CUDA-graph batch every DP rank
    # pads to: sglang_dp_cost.graph_padded)
    assert d["simulation"]["num_gpus"] == 8 and d["capacity"]["goodput_req_per_s"] == pytest.approx(3.6078, abs=1e-4)
    assert plain(d) == cli_json("cost", "--simulate", DSV3, *SG_FLAGS, "--slo", "ttft=200ms", "--at-offered-load")
