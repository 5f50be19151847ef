"""vLLM's CUDA-graph capture sizes under --max-cudagraph-capture-size (config/vllm.py::_set_cudagraph_sizes: the cap,
else min(2 × max_num_seqs, 512), then at most max_num_batched_tokens), and the 0.20+ estimate they size."""

from __future__ import annotations

from kvledger.accounting.overheads import cudagraph_capture_sizes
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.evidence.vllm_log import parse_vllm_log
from kvledger.units import MiB


def test_capture_sizes_follow_the_cap():
    # default at 256 sequences: [1, 2, 4] + 8…248 step 8 (31) + 256…512 step 16 (17) = 51 sizes
    assert len(cudagraph_capture_sizes(256, 8192)) == 51
    # --max-cudagraph-capture-size 256: [1, 2, 4] + 31 + [256] = 35 (a published vLLM 0.22.0 log echoes these 35)
    assert len(cudagraph_capture_sizes(256, 8192, 256)) == 35
    assert cudagraph_capture_sizes(256, 8192, 4) == [1, 2, 4]
    assert cudagraph_capture_sizes(256, 8192, 100)[-1] == 96  # the grid's largest under the cap
    assert cudagraph_capture_sizes(256, 64, 512)[-1] == 64  # max_num_batched_tokens caps the cap


def test_the_cap_sizes_the_plan_estimate():
    # vLLM 0.33 on an H100 subtracts the estimate: 244 MiB first capture + 2 modes × (3 − 1) graphs × 5 MiB = 264 MiB
    # with the cap at 4 (sizes 1, 2, 4), against 244 + 2 × 50 × 5 = 744 MiB with the default 51 sizes
    def cg(**kw):
        plan = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(**kw))
        return next(d.bytes for d in plan.memory.deductions if d.name.startswith("CUDA graphs"))
    assert cg(max_cudagraph_capture_size=4) == 264 * MiB and cg() == 744 * MiB
    # the cap's price is named where the estimate is: larger decode batches run without graphs
    plan = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"),
                      make_settings(max_cudagraph_capture_size=4))
    src = next(d.source for d in plan.memory.deductions if d.name.startswith("CUDA graphs"))
    assert "--max-cudagraph-capture-size 4: decode batches above 4 run without CUDA graphs" in src


def test_the_log_echo_gives_the_cap():
    line = ("(EngineCore pid=1073) INFO 09-03 03:38:47 [core.py:112] Initializing a V1 LLM engine (v0.22.0) with "
            "config: model='/model/Qwen2.5-7B-Instruct', compilation_config={'mode': 3, "
            "'max_cudagraph_capture_size': 256, 'cudagraph_capture_sizes': [1, 2, 4, 8]}")
    assert parse_vllm_log(line, "inline").startup.max_cudagraph_capture_size == 256
