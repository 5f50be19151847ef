"""What turns SGLang's prefill CUDA graphs off beyond the flags (accounting/sglang_prefill_off.py), from the wheels:
0.5.10/0.5.12 server_args.py _handle_piecewise_cuda_graph, 0.5.14 _disable_tc_piecewise_cudagraph_if_incompatible,
0.5.17 _disable_breakable_cudagraph_if_incompatible, 0.5.20–0.5.23 arg_groups/cuda_graph_hook.py, and each release's
configs/model_config.py architecture lists."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_prefill_off import prefill_off_for_model
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("h100")


def _note(model, gpu=H100, **kw):
    p = build_plan(load_model(model), gpu, make_settings(engine="sglang", **kw), with_roofline=False)
    return next(n for n in p.memory.notes if n.startswith("prefill CUDA graphs")), p.memory.fraction


@pytest.mark.parametrize("ver,off", [("0.5.10", True), ("0.5.12", True), ("0.5.14", True), ("0.5.17", False),
                                     ("0.5.23", False)])
def test_qwen3_next_is_on_the_piecewise_blacklist_until_the_breakable_graphs(ver, off):
    # Qwen3NextForCausalLM is on piecewise_cuda_graph_disabled_model_archs in 0.5.10, 0.5.12 and 0.5.14; the
    # breakable rules of 0.5.17 and 0.5.23 do not read that list (and its Gated DeltaNet is not KDA)
    note, _ = _note("Qwen/Qwen3-Next-80B-A3B-Thinking", tp=4, engine_version=ver)
    assert note.startswith("prefill CUDA graphs off (Qwen3NextForCausalLM is on") == off, note


@pytest.mark.parametrize("ver", ["0.5.12", "0.5.17", "0.5.23"])
def test_an_amd_gpu_captures_no_prefill_graphs(ver):
    # 0.5.12: is_hip() turns piecewise off; 0.5.17: tc_piecewise off CUDA, which the non-CUDA rule turns off; 0.5.23:
    # default_prefill_backend is DISABLED off CUDA
    note, _ = _note("meta-llama/Llama-3.1-8B", get_gpu("mi300x"), engine_version=ver)
    assert "on CUDA only: an AMD GPU runs HIP" in note


def test_a_multimodal_model_drops_the_prefill_term_from_the_fraction():
    # Llama4ForConditionalGeneration has a vision tower and is on no allowlist (0.5.23 breakable list): the reserve
    # loses the prefill term exactly as --disable-prefill-cuda-graph removes it, so the two fractions are equal; for
    # the text-only Llama-3.1-8B the flag changes the fraction
    note, f = _note("meta-llama/Llama-4-Scout-17B-16E-Instruct", tp=8)
    assert "a multimodal model" in note
    assert f == _note("meta-llama/Llama-4-Scout-17B-16E-Instruct", tp=8, disable_prefill_cuda_graph=True)[1]
    assert _note("meta-llama/Llama-3.1-8B")[1] != _note("meta-llama/Llama-3.1-8B", disable_prefill_cuda_graph=True)[1]


@pytest.mark.parametrize("ver,off", [("0.5.17", True), ("0.5.20", False), ("0.5.23", False)])
def test_nemotron_h_is_off_only_in_0_5_17(ver, off):
    # 0.5.17's breakable rules list NemotronH (hybrid Mamba2 prefill); 0.5.20's and 0.5.23's do not
    note, _ = _note("nvidia/Nemotron-H-56B-Base-8K", tp=4, engine_version=ver)
    assert ("NemotronH's hybrid Mamba2 prefill" in note) == off, note


@pytest.mark.parametrize("ver,off", [((0, 5, 9), False), ((0, 5, 12), True), ((0, 5, 17), False), ((0, 5, 20), True)])
def test_pipeline_parallelism_by_release(ver, off):
    # pp_size > 1 is on the piecewise (0.5.10–0.5.16) rules, not 0.5.17's breakable ones; 0.5.20 makes PP opt-in;
    # 0.5.9 captures no prefill graphs at all (opt-in)
    why = prefill_off_for_model(ver, load_model("meta-llama/Llama-3.1-8B"), H100, make_settings(pp=2))
    assert (why is not None and "--pp 2" in why) == off
