"""SGLang's prefill CUDA graphs in the default mem_fraction_static's reserve, worked by hand from the wheels read
(0.5.9/0.5.10/0.5.12 ``server_args.py``, 0.5.14/0.5.17 ``server_args.py``, 0.5.20–0.5.23 ``arg_groups/``;
accounting/sglang_prefill_graphs.py)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_prefill_graphs import prefill_capture_sizes, sglang_prefill_graphs
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

H100 = get_gpu("h100")  # nvidia-smi 81,559 MiB
L8 = load_model("meta-llama/Llama-3.1-8B")


def _s(**kw):
    return make_settings(engine="sglang", **kw)


def test_the_capture_list_up_to_the_chunk():
    # 4–32 by 4 (8) + 48–256 by 16 (14) + 288–512 by 32 (8) + 576–1,024 by 64 (8) + 1,280–4,096 by 256 (12) = 50
    # up to 4,096; 4,608–8,192 by 512 adds 8 (58); to 16,384 another 16 (74); 2,048 keeps 1,280–2,048 of the fifth (4)
    assert len(prefill_capture_sizes(4096)) == 50 and prefill_capture_sizes(4096)[-3:] == (3584, 3840, 4096)
    assert len(prefill_capture_sizes(8192)) == 58 and len(prefill_capture_sizes(16384)) == 74
    assert len(prefill_capture_sizes(2048)) == 42
    assert prefill_capture_sizes(100) == (4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96)


@pytest.mark.parametrize("ver,on", [((0, 5, 9), False), ((0, 5, 10), True), ((0, 5, 12), True), ((0, 5, 23), True)])
def test_on_by_default_from_0_5_10(ver, on):
    # 0.5.9 server_args.py: enable_piecewise_cuda_graph = False (opt-in); 0.5.10: disable_piecewise_cuda_graph = False
    p = sglang_prefill_graphs(ver, _s(), 8192, False, "meta-llama/Llama-3.1-8B")
    assert (p.enabled, p.reserve_mib) == (on, 58 * 8.0 if on else 0.0)


def test_the_off_switches_by_release():
    # --disable-cuda-graph leaves 0.5.12's piecewise graphs on (its own flag is --disable-piecewise-cuda-graph); from
    # 0.5.14 it sets both phases to disabled (parse_cuda_graph_config)
    off = _s(no_cuda_graph=True)
    assert sglang_prefill_graphs((0, 5, 12), off, 8192, False, "x").enabled
    assert not sglang_prefill_graphs((0, 5, 14), off, 8192, False, "x").enabled
    assert not sglang_prefill_graphs((0, 5, 12), _s(disable_prefill_cuda_graph=True), 8192, False, "x").enabled
    # DP attention turns the piecewise graphs off up to 0.5.16, not the breakable ones from 0.5.17
    dp = _s(tp=8, data_parallel_size=8, enable_dp_attention=True)
    assert not sglang_prefill_graphs((0, 5, 14), dp, 8192, False, "x").enabled
    assert sglang_prefill_graphs((0, 5, 17), dp, 8192, False, "x").enabled


def test_mla_reserves_a_flat_1_5_gib_and_0_5_17_turns_it_off():
    # reserve_for_graph_mb: 1.5 × 1,024 = 1,536 MiB whatever the sizes; MLA captures up to 8,192 tokens in 0.5.23
    # (58 sizes), 2,048 before (42); 0.5.17's breakable backend is off for MLA, 0.5.20's is not
    p = sglang_prefill_graphs((0, 5, 23), _s(), 16384, True, "deepseek-ai/DeepSeek-V3")
    assert (p.enabled, p.reserve_mib, len(p.sizes)) == (True, 1536.0, 58)
    assert len(sglang_prefill_graphs((0, 5, 22), _s(), 16384, True, "d").sizes) == 42
    assert not sglang_prefill_graphs((0, 5, 17), _s(), 8192, True, "d").enabled
    assert sglang_prefill_graphs((0, 5, 20), _s(), 8192, True, "d").reserve_mib == 1536.0


def test_a_llama_2_path_caps_the_capture_at_4096():
    # "llama-2" in the model path: max_bs min(chunk, 4,096) → 50 sizes, 400 MiB
    p = sglang_prefill_graphs((0, 5, 23), _s(), 8192, False, "meta-llama/Llama-2-7b-hf")
    assert (len(p.sizes), p.reserve_mib) == (50, 400.0)


def test_an_older_release_takes_the_term_into_its_fraction():
    # 0.5.12 on the H100, Llama-3.1-8B: 512 + 1.5 × 8,192 + 2 × 256 + 464 + 1/8 × 1,024 = 13,904 MiB →
    # round(67,655 / 81,559, 3) = 0.83; 0.5.9: 13,440 MiB → round(68,119 / 81,559, 3) = 0.835
    new = build_plan(L8, H100, _s(engine_version="0.5.12"), with_roofline=False)
    old = build_plan(L8, H100, _s(engine_version="0.5.9"), with_roofline=False)
    assert (new.memory.fraction, old.memory.fraction) == (0.83, 0.835)
    assert any(n.startswith("prefill CUDA graphs on by default in SGLang 0.5.12 (piecewise; off with "
                            "--disable-piecewise-cuda-graph): 58 sizes") for n in new.memory.notes)
    assert "prefill CUDA graphs opt-in in SGLang 0.5.9 (--enable-piecewise-cuda-graph, not planned); none in the " \
           "reserve" in old.memory.notes


def test_the_flag_is_refused_with_another_engine():
    with pytest.raises(InputError, match="--disable-prefill-cuda-graph is an SGLang flag"):
        build_plan(L8, H100, make_settings(engine="vllm", disable_prefill_cuda_graph=True), with_roofline=False)
