"""SGLang's prefill CUDA-graph rules for settings kvledger has no flag for, and HiCache, by release (read in the
wheels): 0.5.10's server_args.py _handle_piecewise_cuda_graph turns the graphs off for speculative decoding (rule 2),
LoRA (rule 8) and HiCache (rule 12, "cpu_offload_gb > 0 or enable_hierarchical_cache"); 0.5.12's has no speculative
rule; 0.5.14's _disable_tc_piecewise_cudagraph_if_incompatible keeps LoRA and "CPU offload / hierarchical cache"; the
breakable backend's rules (0.5.17 server_args.py _disable_breakable_cudagraph_if_incompatible, 0.5.20 and 0.5.23
arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible) have "two-batch overlap" and neither LoRA
("breakable/full support LoRA"), speculative decoding nor HiCache."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def _plan(version: str, **kw):
    return build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("h100"),
                      make_settings(engine="sglang", engine_version=version, **kw), with_roofline=False)


def _graph_note(p) -> str:
    return next(n for n in p.memory.notes if n.startswith("prefill CUDA graphs"))


@pytest.mark.parametrize("version", ["0.5.10", "0.5.14"])
def test_hicache_turns_the_prefill_graphs_off_up_to_0_5_16(version):
    # off: the default fraction's reserve loses its 58 sizes × 8 MiB = 464 MiB term, as --disable-prefill-cuda-graph
    # does (0.83 → 0.835 on this H100, the fraction rounded to 3 decimals by _handle_gpu_memory_settings)
    on, hicache = _plan(version), _plan(version, enable_hierarchical_cache=True)
    off = _plan(version, disable_prefill_cuda_graph=True)
    assert on.memory.fraction == 0.83 and hicache.memory.fraction == off.memory.fraction == 0.835
    assert hicache.memory.num_gpu_blocks == off.memory.num_gpu_blocks > on.memory.num_gpu_blocks
    assert _graph_note(hicache).startswith("prefill CUDA graphs off (HiCache, --enable-hierarchical-cache")


def test_hicache_leaves_the_breakable_graphs_on():
    on, hicache = _plan("0.5.23"), _plan("0.5.23", enable_hierarchical_cache=True)
    assert hicache.memory.fraction == on.memory.fraction == 0.83
    assert "58 sizes captured" in _graph_note(hicache)


@pytest.mark.parametrize("version, assumed", [
    ("0.5.10", "no speculative decoding (--speculative-algorithm) and no LoRA (--enable-lora, --lora-paths)"),
    ("0.5.12", "no LoRA (--enable-lora, --lora-paths), which turns"),
    ("0.5.14", "no LoRA (--enable-lora, --lora-paths), which turns"),
    ("0.5.17", "no two-batch overlap (--enable-two-batch-overlap)"),
    ("0.5.23", "no two-batch overlap (--enable-two-batch-overlap)")])
def test_the_plan_says_which_unflagged_settings_it_assumes_off(version, assumed):
    assert f"; assumed: {assumed}" in _graph_note(_plan(version))


def test_no_assumption_where_the_graphs_are_opt_in():
    # 0.5.9: --enable-piecewise-cuda-graph is off by default, so nothing can turn them off
    assert "assumed" not in _graph_note(_plan("0.5.9"))
