"""doctor's GPU from a log that names no device: the one catalog GPU whose measured CUDA total holds the log's device
total, among those of the architecture its FlashAttention version implies (FA3: Hopper)."""

from __future__ import annotations

from kvledger.analyses.doctor.log_gpu import measured_total_device, resolve_log_gpu
from kvledger.evidence.vllm_log import parse_vllm_log
from kvledger.units import GiB

# the two lines vLLM 0.19's H100 TP 2 start-ups print that say which GPU ran (../shared vllm-startups-0.19, Llama-3.1-8B
# TP 2: line 139 and line 158); the log names no device (no fused-MoE or block-FP8 kernel config looked up)
SNAPSHOT = ("(Worker pid=445) DEBUG 04-22 01:35:55 [v1/worker/gpu_worker.py:284] worker init memory snapshot: "
            "torch_peak=0.01GiB, free_memory=77.66GiB, total_memory={total}GiB, cuda_memory=1.53GiB, "
            "torch_memory=0.02GiB, non_torch_memory=1.51GiB, timestamp=1776821755.3217318, auto_measure=True\n")
FA = ("(Worker_TP0 pid=444) INFO 04-22 01:35:55 [v1/attention/backends/flash_attn.py:596] Using FlashAttention "
      "version {v}\n")


def _log(total: str, fa: int | None):
    return parse_vllm_log(SNAPSHOT.format(total=total) + (FA.format(v=fa) if fa else ""))


def test_an_h100_total_with_flashattention_3_is_the_h100_sxm_that_gpu_h100_sxm_plans():
    log = _log("79.19", 3)
    assert log.startup.flash_attn_version == 3 and log.startup.lines["flash_attn_version"] == 2
    g, src, known = resolve_log_gpu(log, None)
    assert known and g.gpu_id == "nvidia_h100_sxm" and g.nvlink_all_to_all and g.arch == "sm90"
    assert g.memory_bytes == round(79.19 * GiB)  # the log's total, not the catalog's 81,090 MiB
    assert src == ("the log names no device, but its device total 79.19 GiB (line 1) with FlashAttention 3 (line 2: "
                   "Hopper) is NVIDIA H100 80GB SXM5's measured CUDA total → NVIDIA H100 80GB SXM5; the catalog gives "
                   "NVIDIA H100 80GB PCIe the same total (derived): --gpu if that ran")


def test_no_architecture_or_another_one_leaves_the_generic_gpu():
    # 79.19 GiB is inside the A100 80GB's measured range too (81,082–81,222 MiB): without FA3 it is not singled out
    assert measured_total_device(_log("79.19", None)) is None
    assert measured_total_device(_log("79.19", 2)) is None
    g, src, known = resolve_log_gpu(_log("79.19", None), None)
    assert not known and g.gpu_id == "custom" and "non-torch memory is planned for a generic GPU" in src
    # a Hopper total no measured row holds (an H200's 139.8 GiB is derived, not measured): generic
    assert measured_total_device(_log("139.80", 3)) is None
