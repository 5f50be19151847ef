"""vLLM 0.10.2–0.14.1's MLA block on Blackwell-generation GPUs (accounting/vllm_mla_blackwell.py).

Read in platforms/cuda.py ``CudaPlatform.check_and_update_config``: 0.10.2, 0.11.0, 0.11.2 and 0.12.0 default MLA to
CUTLASS_MLA and force 128-token blocks under ``is_device_capability(100)``, SM 10.0 exactly; elsewhere the FlashMLA
branch forces 64 only where ``get_device_capability()[0] == 9`` (attention/ops/flashmla.py), so SM 10.3 (B300) and
12.0 (RTX PRO 6000) keep 16. 0.13.0–0.14.1 test ``is_device_capability_family(100)``: SM 10.3 gets 128 too.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_mla_blackwell import blackwell_mla_block
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


@pytest.mark.parametrize("ver,capability,block", [
    ((0, 10, 2), 100, 128), ((0, 11, 0), 100, 128), ((0, 12, 0), 100, 128),  # SM 10.0: CUTLASS_MLA
    ((0, 11, 0), 103, 16), ((0, 12, 0), 103, 16),  # SM 10.3 fails is_device_capability(100) and FlashMLA's major 9
    ((0, 13, 0), 103, 128), ((0, 14, 1), 103, 128),  # the family test admits 10.3
    ((0, 11, 0), 120, 16), ((0, 14, 1), 120, 16),  # SM 12.0: neither test, nor FlashMLA
])
def test_the_capability_tests_by_release(ver, capability, block):
    assert blackwell_mla_block(ver, capability)[0] == block


@pytest.mark.parametrize("ver,capability", [((0, 10, 1), 100), ((0, 15, 0), 100), ((0, 12, 0), 90), ((0, 12, 0), None)])
def test_outside_the_releases_and_gpus_read_it_says_nothing(ver, capability):
    assert blackwell_mla_block(ver, capability) is None


@pytest.mark.parametrize("gpu,version,block", [("b200", "0.11.0", 128), ("b300", "0.11.0", 16), ("b300", "0.13.0", 128),
                                               ("rtx-pro-6000", "0.12.0", 16), ("h100", "0.12.0", 64)])
def test_the_plan_takes_the_block(gpu, version, block):
    s = make_settings(engine_version=version, max_model_len=8_192)
    p = build_plan(load_model("deepseek-ai/DeepSeek-V2-Lite"), get_gpu(gpu), s, with_roofline=False)
    assert p.memory.block_size == block
