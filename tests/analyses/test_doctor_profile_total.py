"""doctor's GPU from a log that prints no device total: vLLM V1 sizes the KV cache as device total ×
gpu_memory_utilization − non-KV (v1/worker/gpu_worker.py determine_available_memory), so the log's "Total non KV cache
memory" and "Available KV cache memory" give the total, (non-KV + KV) ÷ utilization, to ± 2 × 0.005 GiB ÷ utilization
(each printed to 2 decimals). One measured catalog GPU within that (of the FlashAttention version's architecture where
the log prints one): that GPU; else a stand-in of that total, said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.analyses.doctor.context import build_context
from kvledger.analyses.doctor.stand_in import profile_gpu, profile_total, stand_in_gpu
from kvledger.evidence.vllm_log import parse_vllm_log
from kvledger.units import GiB

FIXTURES = Path(__file__).parents[1] / "fixtures"
CONSTRUCTED = FIXTURES / "vllm_logs" / "constructed_v1_preemptions_at_full_kv.log"
H100_019 = FIXTURES / "vllm_startups_0_19" / "logs" / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"


def test_the_profile_total_of_an_h100_style_log_does_not_tell_a100_from_h100():
    # the constructed 0.11.0 log: non-KV 19.88 GiB (line 5), KV 51.38 GiB (line 6), utilization unprinted: vLLM 0.11's
    # default 0.9. (19.88 + 51.38) / 0.9 = 79.178 GiB ± 0.01 / 0.9 = 0.011 GiB: [79.167, 79.189] meets the H100 SXM's
    # measured range (79.185–79.219 GiB) and the A100 80GB's (79.182–79.318), and the log prints no FlashAttention
    # version to choose: a stand-in of 79.18 GiB (before: (51.38 KV + 14.99 weights) / 0.9 = 73.74 GiB)
    log = parse_vllm_log(CONSTRUCTED.read_text())
    kw = {"engine_version": "0.11.0", "gpu_memory_utilization": None}
    pt = profile_total(log, kw)
    assert pt.total_bytes / GiB == pytest.approx(79.1778, abs=1e-4) and pt.tolerance_bytes / GiB == pytest.approx(
        0.01 / 0.9)
    g, words = profile_gpu(log, kw)
    assert g is None
    assert words.startswith("no --gpu and the log prints no device total; its memory profile gives one, (non-KV 19.88 "
                            "+ KV 51.38 GiB, lines 5, 6) ÷ gpu_memory_utilization 0.9 (vLLM's default) = 79.18 GiB")
    assert "NVIDIA A100 80GB SXM4 and NVIDIA H100 80GB SXM5, which it does not tell apart" in words
    assert stand_in_gpu(log, None, kw).memory_bytes / GiB == pytest.approx(79.1778, abs=1e-4)
    ctx = build_context(log)
    assert ctx.gpu is None and not ctx.gpu_known and "which sizes a stand-in GPU" in ctx.gpu_source


def test_a_real_h100_log_without_its_total_line_is_the_h100_sxm():
    # vLLM 0.19 Llama-3.1-8B on an H100 at --gpu-memory-utilization 0.95 (line 4): non-KV 17.12 GiB (line 51), KV
    # 58.11 GiB (line 52): (17.12 + 58.11) / 0.95 = 79.189 GiB ± 0.0105, the total its line 16 prints (79.19 GiB).
    # With the two lines that print it removed (16 and 58, "Free memory on device (78.68/79.19 GiB)"), FlashAttention 3
    # (Hopper) leaves one measured row within it: the H100 SXM (79.185–79.219 GiB)
    lines = H100_019.read_text().splitlines(keepends=True)
    assert "total_memory=79.19GiB" in lines[15] and "78.68/79.19 GiB" in lines[57]
    log = parse_vllm_log("".join(lines[:15] + lines[16:57] + lines[58:]))
    assert log.startup.total_gpu_memory_bytes is None and log.startup.flash_attn_version == 3
    ctx = build_context(log)
    assert ctx.gpu_known and ctx.gpu.gpu_id == "nvidia_h100_sxm"
    assert "(non-KV 17.12 + KV 58.11 GiB, lines 50, 51) ÷ gpu_memory_utilization 0.95 = 79.19 GiB" in ctx.gpu_source
    # FlashAttention 3 rules the A100 out; the H100 PCIe's total is derived (80 GiB board), named beside it
    assert "NVIDIA A100" not in ctx.gpu_source and ctx.gpu_source.endswith(
        "the catalog gives NVIDIA H100 80GB PCIe the same total (derived): --gpu if that ran")
