"""The block size vLLM 0.10.2–0.14.1 force for a dense MLA model on Blackwell-generation GPUs when ``--block-size`` is
not given: CUTLASS_MLA's 128 on the capabilities its test admits, else the default 16.

Read in ``platforms/cuda.py::CudaPlatform.check_and_update_config`` (MLA, no attention backend given):

* 0.10.2, 0.11.0, 0.11.2, 0.12.0: ``if cls.is_device_capability(100)`` (exactly SM 10.0: B200, GB200) → CUTLASS_MLA,
  block forced to 128 ("Forcing kv cache block size to 128 for CUTLASS_MLA backend"); any other GPU takes the FlashMLA
  branch, which forces 64 only where ``is_flashmla_supported`` (0.12.0: ``is_flashmla_dense_supported``) holds, and it
  requires ``get_device_capability()[0] == 9`` (``attention/ops/flashmla.py``): B300 / GB300 (10.3) and the RTX 50 /
  RTX PRO 6000 (12.0) keep 16 (the selector then finds no CUTLASS or FlashInfer MLA, both gated on SM 10.0 in 0.11.0,
  nor FlashMLA: TRITON_MLA or another backend that takes 16).
* 0.13.0, 0.14.0, 0.14.1: ``is_device_capability_family(100) and not use_sparse``: the whole SM 10.x family (10.3
  included) → 128; 12.0 keeps 16.
* 0.15.0–0.17.1 test the family and ``qk_nope_head_dim == 128`` for FLASHINFER_MLA (16 forced to 64) before
  CUTLASS_MLA: not modelled here (the catalog keeps no ``qk_nope_head_dim`` on the layer); ``vllm_rules.
  default_block_size`` rules them.

Where ``use_sparse`` (DeepSeek-V3.2's ``index_topk``) the block is 64 (``vllm_sparse_mla``), so only dense MLA reaches
this rule. Releases before 0.10.2 were not read.
"""

from __future__ import annotations

__all__ = ["CUTLASS_MLA_BLOCK_TOKENS", "BLACKWELL_MLA_READ", "blackwell_mla_block"]

CUTLASS_MLA_BLOCK_TOKENS = 128
"""CUTLASS_MLA's forced block size, tokens."""
BLACKWELL_MLA_READ = ((0, 10, 2), (0, 15, 0))
"""[first, end) of the releases this rule was read for."""
_FAMILY_FROM = (0, 13, 0)  # is_device_capability_family(100) replaces is_device_capability(100)


def blackwell_mla_block(ver: tuple[int, int, int], capability: int | None) -> tuple[int, str] | None:
    """(block size, why) for dense MLA on a GPU of compute capability ``capability`` (major × 10 + minor) whose major
    is 10 or 12, in vLLM 0.10.2–0.14.1; None elsewhere (other releases and GPUs: ``vllm_rules.default_block_size``)."""
    first, end = BLACKWELL_MLA_READ
    if capability is None or capability // 10 not in (10, 12) or not first <= ver < end:
        return None
    v = ".".join(map(str, ver))
    family = ver >= _FAMILY_FROM
    if capability == 100 or (family and capability // 10 == 10):
        test = "is_device_capability_family(100), the SM 10.x family" if family else "is_device_capability(100)"
        return CUTLASS_MLA_BLOCK_TOKENS, (f"vLLM {v} on SM {capability // 10}.{capability % 10}: MLA defaults to "
                                          f"CUTLASS_MLA ({test}), block forced to {CUTLASS_MLA_BLOCK_TOKENS} "
                                          "(platforms/cuda.py check_and_update_config)")
    test = "the SM 10.x family" if family else "SM 10.0 exactly"
    return 16, (f"vLLM {v} on SM {capability // 10}.{capability % 10}: CUTLASS_MLA's default is for {test} and "
                "FlashMLA needs SM 9.x (attention/ops/flashmla.py), so no MLA backend forces a block: the default 16 "
                "(platforms/cuda.py check_and_update_config)")
