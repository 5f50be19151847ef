"""TensorRT-LLM's sized terms (accounting/trtllm_terms.py): the CUDA-graph pool and the WDDM hold, worked by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.trtllm_terms import trtllm_graph_batch, trtllm_graph_pool_term
from kvledger.accounting.wddm import wddm_held_term
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SMOL = load_model(str(ROOT / "benchmarks" / "data" / "configs" / "SmolLM2-135M-Instruct.json"))
LLAMA8_FP8 = load_model(str(ROOT / "benchmarks" / "data" / "configs" / "Llama-3.1-8B-Instruct-FP8.json"))


def test_graph_batch_is_cuda_graph_configs_128_capped_by_the_max_batch_size():
    # CudaGraphConfig.max_batch_size 0 → 128 (llm_args.py); the executor never captures past its max_batch_size;
    # trtllm-bench passes its max_batch_size (4,096 in NVIDIA/TensorRT-LLM#6294).
    assert trtllm_graph_batch(2048, None) == 128
    assert trtllm_graph_batch(64, None) == 64
    assert trtllm_graph_batch(4096, 4096) == 4096


def test_graph_pool_is_the_largest_graphs_decode_step():
    # SmolLM2-135M at 128: activations 128 × (2·576 + (9 + 2·3)·64 + 3·1,536) × 2 B = 128 × 6,720 × 2 = 1,720,320 B,
    # logits 128 × 49,152 × 2 B = 12,582,912 B: 14,303,232 B (low: the logits; high: × 1.5 = 21,454,848 B).
    t = trtllm_graph_pool_term(SMOL, 1, 128)
    assert (t.bytes, t.low_bytes, t.high_bytes) == (14_303_232, 12_582_912, 21_454_848)
    # Llama-3.1-8B at trtllm-bench's 4,096: 4,096 × (2·4,096 + 48·128 + 3·14,336) × 2 B = 469,762,048 B (0.4375 GiB)
    # + 4,096 × 128,256 × 2 B = 1,050,673,152 B (0.9785 GiB) = 1,520,435,200 B = 1.416 GiB.
    assert trtllm_graph_pool_term(LLAMA8_FP8, 1, 4096).bytes == 1_520_435_200


def test_wddm_hold_and_whole_board_total():
    # The hold is fitted on the board size (wddm.WDDM_HOLD_FIT, benchmarks/data/wddm_holds.csv): 0.393 + 0.0283 ×
    # board GiB. RTX 4070 SUPER: nvidia-smi 12,282 MiB = 11.994140625 GiB → 0.393 + 0.339434180 = 0.732434180 GiB
    # = 786,445,212.06 B; low −0.30 GiB → 464,322,664.86 B; high +1.70 GiB → 2,611,806,312.86 B.
    g = get_gpu("nvidia_rtx_4070_super")
    t = wddm_held_term(g)
    assert (t.bytes, t.low_bytes, t.high_bytes) == pytest.approx((786_445_212.06, 464_322_664.86, 2_611_806_312.86))
    # no GPU: the corpus's median board, 24 GiB → 0.393 + 0.6792 = 1.0722 GiB = 1,151,265,983.69 B
    assert wddm_held_term().bytes == pytest.approx(1_151_265_983.69)
    # RTX 5090: 32,607 MiB = 31.8427734375 GiB → 0.393 + 0.901150 = 1.294150 GiB (TR03's card; not in the fit)
    assert wddm_held_term(get_gpu("nvidia_rtx_5090")).bytes / 2**30 == pytest.approx(1.294150, abs=1e-6)
    # under WDDM the RTX 4070 SUPER's total is its whole board, where Linux reports 12,282 − 450 = 11,832 MiB
    assert (g.nvidia_smi_mib, g.memory_bytes, g.arch) == (12_282, 11_832 * 2**20, "sm89")
    assert {get_gpu(n).gpu_id for n in ("rtx4070super", "4070super", "RTX 4070 SUPER")} == {g.gpu_id}  # as the 4090's
    s = make_settings(engine="trtllm", max_model_len=2049, wddm=True)
    p = build_plan(SMOL, g, s, with_roofline=False, with_advice=False).memory
    assert p.gpu_total_bytes == 12_878_610_432
    names = [d.name for d in p.deductions]
    assert "held by the display driver (WDDM: Windows, WSL2)" in names
    # without --wddm: the Linux total and no hold; the KV memory differs by (12,878,610,432 − 12,406,751,232 −
    # 786,445,212.06) × 0.9 = −283,127,410.85 B: a Windows desktop holds more than the 450 MiB Linux leaves out
    q = build_plan(SMOL, g, make_settings(engine="trtllm", max_model_len=2049), with_roofline=False,
                   with_advice=False).memory
    assert q.gpu_total_bytes == 12_406_751_232
    assert "held by the display driver (WDDM: Windows, WSL2)" not in [d.name for d in q.deductions]
    assert p.available_kv_bytes - q.available_kv_bytes == pytest.approx(-283_127_410.85, abs=2)


def test_trtllm_only_settings_are_refused_for_other_engines():
    # --cuda-graph-max-batch-size changes TensorRT-LLM's plan and, as --cuda-graph-max-bs, SGLang's
    # (tests/accounting/test_sglang_given_limits.py): with vLLM it would be ignored (--wddm is every engine's now:
    # tests/accounting/test_wddm_engines.py).
    with pytest.raises(InputError, match="--cuda-graph-max-batch-size: .*SGLang's: --cuda-graph-max-bs"):
        build_plan(SMOL, get_gpu("H100"), make_settings(engine="vllm", cuda_graph_max_batch_size=64),
                   with_roofline=False)


def test_wddm_refused_without_a_whole_board_figure_and_on_server_modules():
    # GH200 (superchip) and H100 SXM are server modules (gpus.csv form_factor): no Windows display driver. Before, the
    # GH200 (no nvidia-smi total) kept its Linux CUDA total 97,404 MiB and still lost the 450 MiB hold: KV 70.294 →
    # 69.898 GiB = 0.9 × 450 MiB less for Llama-3.1-8B.
    for name in ("gh200", "H100"):
        for engine in ("trtllm", "vllm", "sglang"):
            with pytest.raises(InputError, match="server module"):
                build_plan(SMOL, get_gpu(name), make_settings(engine=engine, wddm=True), with_roofline=False)
    # a PCIe card whose nvidia-smi total the catalog lacks: refused (the hold would come off a total that leaves it out)
    g = replace(get_gpu("rtx4070super"), nvidia_smi_mib=None)
    with pytest.raises(InputError, match="no nvidia-smi total"):
        build_plan(SMOL, g, make_settings(engine="trtllm", wddm=True), with_roofline=False)
    # ...unless the total CUDA reports is given (--gpu-memory: memory_basis "given")
    given = replace(g, memory_basis="given")
    p = build_plan(SMOL, given, make_settings(engine="trtllm", max_model_len=2049, wddm=True), with_roofline=False,
                   with_advice=False).memory
    assert p.gpu_total_bytes == 11_832 * 2**20


def test_cuda_graph_settings_refused_on_the_tensorrt_engine_runtime():
    # 0.12.0 runs the TensorRT-engine executor (before 1.0): it has no cuda_graph_config, so the flag would be ignored
    for kw in ({"cuda_graph_max_batch_size": 64}, {"no_cuda_graph": True}):
        with pytest.raises(InputError, match="TensorRT-engine executor"):
            build_plan(SMOL, get_gpu("H100"), make_settings(engine="trtllm", engine_version="0.12.0", **kw),
                       with_roofline=False)
    with pytest.raises(InputError, match="give one"):
        build_plan(SMOL, get_gpu("H100"), make_settings(engine="trtllm", cuda_graph_max_batch_size=64,
                                                        no_cuda_graph=True), with_roofline=False)


def test_no_cuda_graph_drops_the_graph_pool():
    # SmolLM2-135M, default largest graph 128: the pool is 14,303,232 B (test above). Without graphs it is not deducted,
    # so the KV memory grows by 14,303,232 × 0.9 = 12,872,908.8 B (the fraction takes 0.9 of the freed bytes).
    on = build_plan(SMOL, get_gpu("H100"), make_settings(engine="trtllm", max_model_len=2049), with_roofline=False,
                    with_advice=False).memory
    off = build_plan(SMOL, get_gpu("H100"), make_settings(engine="trtllm", max_model_len=2049, no_cuda_graph=True),
                     with_roofline=False, with_advice=False).memory
    assert not any(d.name.startswith("CUDA-graph pool") for d in off.deductions)
    assert off.available_kv_bytes - on.available_kv_bytes == pytest.approx(12_872_908.8, abs=2)


def test_trtllm_settings_are_dumped():
    # plan --json records them under settings, and model_dump() round-trips them (pd_disagg rebuilds settings so)
    s = make_settings(engine="trtllm", cuda_graph_max_batch_size=64, wddm=True)
    d = s.model_dump()
    assert (d["cuda_graph_max_batch_size"], d["no_cuda_graph"], d["wddm"]) == (64, False, True)
    assert make_settings(**d) == s


def test_starcoder2_plain_mlp_on_the_pytorch_backend_only():
    # StarCoder2 (transformers' default config: hidden 3,072, 24 heads, 2 KV heads of 128, MLP 12,288, vocab 49,152,
    # bf16) runs on the PyTorch backend as modeling_starcoder2.py → _torch/modules/mlp.py::MLP: up_proj's output and
    # GELU's, 2·12,288 per token. Dry run at 8,192 tokens: 8,192 × (2·3,072 + (24 + 2·2)·128 + 2·12,288) × 2 B =
    # 8,192 × 34,304 × 2 = 562,036,736 B (the gated 3·I gave 8,192 × 46,592 × 2 = 763,363,328). Graph pool at 128:
    # 128 × 34,304 × 2 + 128 × 49,152 × 2 = 8,781,824 + 12,582,912 = 21,364,736 B. The TensorRT-engine executor
    # (0.19.0) sizes its activations at build: the estimate keeps 3·I there.
    cfg = json.loads((ROOT / "benchmarks" / "data" / "oracle_configs" / "starcoder2.json").read_text())
    m = parse_config({**cfg, "architectures": ["Starcoder2ForCausalLM"]}, source="starcoder2")
    h100 = get_gpu("H100")
    torch_be = build_plan(m, h100, make_settings(engine="trtllm"), with_roofline=False).memory.deductions
    assert torch_be[1].bytes == 562_036_736 and "2·I/TP" in torch_be[1].source
    assert trtllm_graph_pool_term(m, 1, 128).bytes == 21_364_736
    engine = build_plan(m, h100, make_settings(engine="trtllm", engine_version="0.19.0"), with_roofline=False)
    assert engine.memory.deductions[1].bytes == 763_363_328
