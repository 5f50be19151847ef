"""The MLP's share of vLLM's forward peak: gated (3·I/TP) or plain (2·I/TP), by the model file vLLM runs
(derivations in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.accounting.vllm_mlp import mlp_peak
from kvledger.accounting.vllm_profile import ACTIVATION_FIXED_BYTES, activation_peak, forward_peak_bytes
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config

ROOT = Path(__file__).resolve().parents[2]
OPT_13B = str(ROOT / "src" / "kvledger" / "catalog" / "data" / "models" / "facebook--opt-13b.json")
LLAMA = str(ROOT / "tests" / "fixtures" / "vllm_startups_0_19" / "configs" / "meta-llama--Llama-3.1-8B-Instruct.json")
ORACLE = ROOT / "benchmarks" / "data" / "oracle_configs"
V19 = (0, 19, 0)


def _oracle(name: str):
    return parse_config(json.loads((ORACLE / f"{name}.json").read_text()), source=name)


def test_opt_13b_forward_holds_fc1_and_relu_outputs_not_three_widths():
    # OPT-13B: hidden 5,120, ffn_dim 20,480, 40 layers. vLLM opt.py OPTDecoderLayer: fc1 (I) → nn.ReLU out of
    # place (I) → fc2. At 8,192 tokens, TP 1: 8,192 × (4·5,120 + 2·20,480) × 2 B = 8,192 × 61,440 × 2
    # = 1,006,632,960 B = 0.9375 GiB (the gated form would give 8,192 × 81,920 × 2 = 1,342,177,280 B = 1.25 GiB).
    m = load_model(OPT_13B)
    assert (mlp_peak(m).copies, mlp_peak(m).width) == (2, 20_480)
    assert forward_peak_bytes(m, 8192, 1, V19) == 1_006_632_960
    # The forward is the peak here: the 0.19 sampler over 1,024 requests × 50,272 vocab × 14 B = 720,699,392,
    # + Triton buffer 132 × 50,272 × 4 = 26,543,616, + hidden 8,192 × 5,120 × 2 = 83,886,080: 831,129,088 B
    # (0.774 GiB) < 1,006,632,960. So the activation peak is 1,006,632,960 + 0.05 GiB fixed = 0.9875 GiB.
    peak, src = activation_peak(m, V19, 8192, 1024)
    assert peak == 1_006_632_960 + ACTIVATION_FIXED_BYTES
    assert "2·I/TP" in src and "models/opt.py" in src


def test_opt_13b_tp2_shards_fc1_and_its_activation():
    # ColumnParallelLinear fc1 at TP 2: each rank holds 20,480 / 2 = 10,240 per token, and its ReLU output the same.
    # 2,048 tokens: 2,048 × (4·5,120 + 2·10,240) × 2 B = 2,048 × 40,960 × 2 = 167,772,160 B.
    assert forward_peak_bytes(load_model(OPT_13B), 2048, 2, V19) == 167_772_160


def test_gpt2_without_n_inner_gets_four_hidden_per_gpt2_py():
    # GPT-2 (hidden 768, n_inner null): vLLM gpt2.py GPT2Block takes 4 × hidden = 3,072. 1,000 tokens, TP 1:
    # 1,000 × (4·768 + 2·3,072) × 2 B = 1,000 × 9,216 × 2 = 18,432,000 B. The config has no architectures: matched
    # by model_type; the catalog fills the absent width with the 4 × 768 = 3,072 gpt2.py builds (mlp_kind).
    m = _oracle("gpt2")
    assert not m.architectures and m.intermediate_size == 3_072
    assert forward_peak_bytes(m, 1000, 1, V19) == 18_432_000


def test_falcon_width_is_four_hidden_and_plain():
    # Falcon-7B (hidden 4,544): vLLM falcon.py FalconMLP, dense_h_to_4h of 4 × 4,544 = 18,176, GELU, bias added in
    # place. 100 tokens: 100 × (4·4,544 + 2·18,176) × 2 B = 100 × 54,528 × 2 = 10,905,600 B.
    assert forward_peak_bytes(_oracle("falcon"), 100, 1, V19) == 10_905_600


def test_llama_stays_gated():
    # Llama-3.1-8B (hidden 4,096, intermediate 14,336): LlamaMLP gate_up (2·I) + SiluAndMul (I). 8,192 tokens:
    # 8,192 × (4·4,096 + 3·14,336) × 2 B = 8,192 × 59,392 × 2 = 973,078,528 B.
    m = load_model(LLAMA)
    assert mlp_peak(m).copies == 3
    assert forward_peak_bytes(m, 8192, 1, V19) == 973_078_528


def test_phi2_startup_is_sampler_bound_so_the_plain_mlp_leaves_it_as_logged():
    # phi-2 (hidden 2,560, MLP 10,240, vocab 51,200), vLLM 0.19.0 on H100, 8,192 tokens, 1,024 requests: the only
    # plain-MLP start-up in the corpus logs "torch peak memory increase" 0.79 GiB. Forward: 8,192 × (4·2,560 +
    # 2·10,240) × 2 = 503,316,480 B (gated: 671,088,640); sampler 1,024 × 51,200 × 14 + 132 × 51,200 × 4 + hidden
    # 8,192 × 2,560 × 2 = 802,979,840 B, larger either way: 802,979,840 + 0.05 GiB = 0.798 GiB.
    m = load_model("microsoft/phi-2")
    assert forward_peak_bytes(m, 8192, 1, V19) == 503_316_480
    peak, src = activation_peak(m, V19, 8192, 1024)
    assert peak == 802_979_840 + ACTIVATION_FIXED_BYTES and src.startswith("sampler")
