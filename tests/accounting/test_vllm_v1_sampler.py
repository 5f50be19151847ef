"""The V1 model runner's dummy sampler run, 0.20–0.33 (gpu_model_runner.py, topk_topp_sampler.py; derivations below)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_profile import PPStage, sampler_peak_bytes
from kvledger.accounting.vllm_sampler import sampler_backends, v1_profile_backend
from kvledger.accounting.vllm_terms import activation_item
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

QWEN05 = str(Path(__file__).parents[2] / "benchmarks" / "data" / "configs" / "Qwen2.5-Coder-0.5B-Instruct.json")

# Qwen2.5-0.5B shapes: vocabulary 151,936, hidden 896, intermediate 4,864, bf16 (2 B), 24 layers; H100: 132 SMs.
# 1,024 dummy requests × 151,936 = 155,582,464 logits.
#   V1 PyTorch sampler: × (2 bf16 logits + 4 fp32 copy + 4 probs + 4 noise) = 2,178,154,496 B
#   + Triton buffer 132 × 151,936 × 4 = 80,222,208 B + hidden states 16,384 × 896 × 2 = 29,360,128 B
#   + the fixed 0.05 GiB (int: 53,687,091 B) = 2,341,423,923 B; the forward, 16,384 × (4·896 + 3·4,864) × 2 =
#   595,591,168 B, is smaller. FlashInfer (fp32 logits, masked logits, probs: the same 2 + 12 B, no Triton buffer)
#   = 2,341,423,923 − 80,222,208 = 2,261,201,715 B.
PYTORCH_PEAK = 2_178_154_496 + 80_222_208 + 29_360_128 + 53_687_091
FLASHINFER_PEAK = PYTORCH_PEAK - 80_222_208


def _peak(ver: str, backend: str = "auto", gpu: str = "H100", v2: bool = False):
    m = load_model(QWEN05)
    v = tuple(int(x) for x in ver.split("."))
    s = make_settings(engine_version=ver, sampler_backend=backend)
    return activation_item(m, get_gpu(gpu), s, v, 16384, 1024, PPStage(0, 1, 0, m.num_layers), v2)


def test_second_seeded_pass_profiles_flashinfer_as_pytorch_from_0_21():
    # 0.20.0's _dummy_sampler_run samples once: with VLLM_USE_FLASHINFER_SAMPLER=1, FlashInfer's bytes.
    assert _peak("0.20.0", "flashinfer").bytes == FLASHINFER_PEAK == 2_261_201_715
    # 0.21.0–0.33.0 sample again with a seeded generator; forward_cuda hands generators to forward_native (Triton),
    # so the profile's peak is the PyTorch sampler's whichever backend serves.
    for ver in ("0.21.0", "0.26.0", "0.33.0"):
        d = _peak(ver, "flashinfer")
        assert d.bytes == _peak(ver, "pytorch").bytes == PYTORCH_PEAK, ver
        assert "seeded generator" in d.range_source and "from 0.21" in d.range_source


def test_v2_runner_keeps_its_greedy_sampler():
    # V2 up to 0.32 profiles the bf16 logits alone (gpu/sample/sampler.py): 155,582,464 × 2 = 311,164,928 B + hidden
    # 29,360,128 B = 340,525,056 B < the forward 595,591,168 B, so forward + fixed = 649,278,259 B, any backend.
    assert _peak("0.26.0", "flashinfer", v2=True).bytes == 595_591_168 + 53_687_091


def test_rocm_auto_loses_the_aiter_end_from_0_21():
    # ROCm ≥0.12 'auto': AITER (d + 8 B, no buffer) or PyTorch. 0.20: the range reaches down to AITER's peak
    # (155,582,464 × 10 + 29,360,128 + 53,687,091 = 1,638,871,859 B) less 10 % of the point; from 0.21 forward_hip
    # also hands the seeded pass to forward_native, so the range is the point ± 10 %.
    aiter = 155_582_464 * 10 + 29_360_128 + 53_687_091
    # The MI300X's Triton buffer: min(304 CUs, 1,024) × 151,936 × 4 = 184,754,176 B where the H100's 132 SMs give
    # 80,222,208 B.
    mi300x_peak = PYTORCH_PEAK - 80_222_208 + 184_754_176
    old, new = _peak("0.20.0", gpu="MI300X"), _peak("0.21.0", gpu="MI300X")
    assert old.bytes == new.bytes == mi300x_peak
    assert old.low_bytes == pytest.approx(aiter - 0.1 * mi300x_peak)
    assert new.low_bytes == pytest.approx(0.9 * mi300x_peak)
    assert sampler_backends((0, 21, 0), "auto", True)[:2] == ("pytorch", "aiter")  # the serving choice is unchanged
    assert v1_profile_backend((0, 21, 0), "pytorch", "aiter", "")[:2] == ("pytorch", None)


def test_triton_buffer_at_every_batch_from_0_30():
    # topk_topp_sampler.py::apply_top_k_top_p: Triton only from 8 rows up to 0.29 ("logits.shape[0] >= 8"), at any
    # batch from 0.30. 4 requests × 151,936 × 14 B = 8,508,416 B; from 0.30 + 4 rows × 151,936 × 4 B = 2,430,976 B.
    m = load_model(QWEN05)
    assert sampler_peak_bytes(m, (0, 29, 0), 4)[0] == 8_508_416
    assert sampler_peak_bytes(m, (0, 30, 0), 4)[0] == 8_508_416 + 2_430_976


def test_gb202_parts_have_their_own_sm_counts():
    # the Triton top-k/top-p buffer has min(SMs, requests) rows: the RTX 5090 has 170 SMs (21,760 CUDA cores / 128 per
    # SM) and the RTX PRO 6000 Blackwell 188, where the sm120 fallback took Hopper's 132; a part the table lacks still
    # takes its architecture's count
    from kvledger.accounting.vllm_profile import sm_count

    assert sm_count("nvidia_rtx_5090", "sm120") == 170
    assert sm_count("nvidia_rtx_pro_6000_server", "sm120") == sm_count("nvidia_rtx_pro_6000_workstation") == 188
    assert sm_count("nvidia_unknown_part", "sm90") == 132
