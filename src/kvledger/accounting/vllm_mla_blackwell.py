"""The block size vLLM (from 0.10.2) gives a dense MLA model on Blackwell-generation GPUs when ``--block-size`` is not
given: CUTLASS_MLA's 128 or FLASHINFER_MLA's 64 on the capabilities their tests admit, else the default 16; from 0.18
CUTLASS_MLA's 128 where FLASHINFER_MLA refuses the model's ``qk_nope_head_dim``.

Read in ``platforms/cuda.py::CudaPlatform.check_and_update_config`` (MLA, no attention backend given):

* 0.10.2, 0.11.0, 0.11.2, 0.12.0: ``if cls.is_device_capability(100)`` (exactly SM 10.0: B200, GB200) → CUTLASS_MLA,
  block forced to 128 ("Forcing kv cache block size to 128 for CUTLASS_MLA backend"); any other GPU takes the FlashMLA
  branch, which forces 64 only where ``is_flashmla_supported`` (0.12.0: ``is_flashmla_dense_supported``) holds, and it
  requires ``get_device_capability()[0] == 9`` (``attention/ops/flashmla.py``): B300 / GB300 (10.3) and the RTX 50 /
  RTX PRO 6000 (12.0) keep 16 (the selector then finds no CUTLASS or FlashInfer MLA, both gated on SM 10.0 in 0.11.0,
  nor FlashMLA: TRITON_MLA or another backend that takes 16).
* 0.13.0, 0.14.0, 0.14.1: ``is_device_capability_family(100) and not use_sparse``: the whole SM 10.x family (10.3
  included) → 128; 12.0 keeps 16.
* 0.15.0, 0.16.0, 0.17.1: first ``is_device_capability_family(100) and not use_sparse and qk_nope_head_dim == 128``
  (``getattr(hf_text_config, "qk_nope_head_dim", 1)``: "FlashInfer MLA ... only if qk_nope_head_dim == 128 (kernel
  constraint)") → FLASHINFER_MLA, whose check (``block_size != 32 and block_size % 64 != 0``) forces the default 16 to
  64 ("Forcing kv cache block size to 64 for FlashInferMLA backend"); the family with another ``qk_nope_head_dim``
  falls back to CUTLASS_MLA → 128; 12.0 still keeps 16 (FlashMLA's dense test is ``is_device_capability_family(90)``
  in ``v1/attention/ops/flashmla.py``).
* 0.18.0 and 0.18.1 (the files read are the same) drop this forcing: ``_get_backend_priorities`` lists FLASHINFER_MLA
  then CUTLASS_MLA on major 10, and ``Platform.update_block_size_for_backend`` takes the chosen backend's
  ``AttentionBackend.get_preferred_block_size`` (the default 16 if supported, else the smallest kernel size):
  FLASHINFER_MLA (kernel sizes [32, 64]; ``supports_combination`` admits ``qk_nope_head_dim`` 64 or 128) → 32, the
  value ``vllm_rules.default_block_size`` gives; another width falls to CUTLASS_MLA (kernel size [128]) → 128, which
  this module gives. 0.19.0's FLASHINFER_MLA admits 64, 128 and 192 ("FlashInfer MLA kernel requires
  qk_nope_head_dim in [64, 128, 192]", ``v1/attention/backends/mla/flashinfer_mla.py::supports_combination``), and
  another width still falls to CUTLASS_MLA's 128 (the major-10 list FLASHINFER_MLA, CUTLASS_MLA, … in 0.19.0; 0.33.0
  puts TOKENSPEED_MLA between them, which takes DeepSeek-R1's widths only: qk_nope_head_dim 128, so it refuses the
  same widths; CUTLASS_MLA's kernel block is [128] in both). Read in 0.19.0 and 0.33.0; the releases between are
  taken as those two.

Where ``use_sparse`` (DeepSeek-V3.2's ``index_topk``) the block is 64 (``vllm_sparse_mla``), so only dense MLA reaches
this rule. Releases before 0.10.2 were not read.
"""

from __future__ import annotations

__all__ = ["CUTLASS_MLA_BLOCK_TOKENS", "FLASHINFER_MLA_BLOCK_TOKENS", "BLACKWELL_MLA_READ", "blackwell_mla_block"]

CUTLASS_MLA_BLOCK_TOKENS = 128
"""CUTLASS_MLA's forced block size, tokens."""
BLACKWELL_MLA_READ = ((0, 10, 2), (99, 0, 0))
"""[first, end) of the releases this rule applies to (read 0.10.2–0.19.0 and 0.33.0)."""
_FAMILY_FROM = (0, 13, 0)  # is_device_capability_family(100) replaces is_device_capability(100)
_FLASHINFER_FROM = (0, 15, 0)  # FLASHINFER_MLA first on the family when qk_nope_head_dim == 128
FLASHINFER_MLA_BLOCK_TOKENS = 64
"""The block FLASHINFER_MLA's check forces the default 16 to (0.15.0–0.17.1), tokens."""
_SELECTOR_FROM = (0, 18, 0)  # no forcing: the selected backend's preferred block (update_block_size_for_backend)
_WIDTH_192_FROM = (0, 19, 0)  # FLASHINFER_MLA's supports_combination admits qk_nope_head_dim 192 too


def flashinfer_mla_widths(ver: tuple[int, int, int]) -> tuple[int, ...]:
    """The ``qk_nope_head_dim`` values FLASHINFER_MLA's ``supports_combination`` admits from vLLM 0.18."""
    return (64, 128, 192) if ver >= _WIDTH_192_FROM else (64, 128)


def blackwell_mla_block(ver: tuple[int, int, int], capability: int | None,
                        qk_nope_head_dim: int = 0) -> tuple[int, str] | None:
    """(block size, why) for dense MLA on a GPU of compute capability ``capability`` (major × 10 + minor) whose major
    is 10 or 12, from vLLM 0.10.2, for a model whose config's ``qk_nope_head_dim`` is ``qk_nope_head_dim`` (0:
    unknown, read as vLLM's ``getattr`` default 1); None elsewhere (other releases and GPUs:
    ``vllm_rules.default_block_size``)."""
    first, end = BLACKWELL_MLA_READ
    if capability is None or capability // 10 not in (10, 12) or not first <= ver < end:
        return None
    v, sm = ".".join(map(str, ver)), f"SM {capability // 10}.{capability % 10}"
    if ver >= _SELECTOR_FROM:
        widths = flashinfer_mla_widths(ver)
        if capability // 10 != 10 or qk_nope_head_dim in widths:
            return None  # FLASHINFER_MLA's preferred 32 on SM 10.x; 16 on 12.x: vllm_rules.default_block_size
        need = " or ".join(map(str, widths))
        return CUTLASS_MLA_BLOCK_TOKENS, (f"vLLM {v} on {sm}: FLASHINFER_MLA needs qk_nope_head_dim {need}, not "
                                          f"{qk_nope_head_dim or 1}, so the selector takes CUTLASS_MLA, whose only "
                                          f"kernel block is {CUTLASS_MLA_BLOCK_TOKENS} (update_block_size_for_backend)")
    family = ver >= _FAMILY_FROM
    if family and capability // 10 == 10 and ver >= _FLASHINFER_FROM and qk_nope_head_dim == 128:
        return FLASHINFER_MLA_BLOCK_TOKENS, (f"vLLM {v} on {sm}: MLA with qk_nope_head_dim 128 defaults to "
                                             f"FLASHINFER_MLA, block 16 forced to {FLASHINFER_MLA_BLOCK_TOKENS} "
                                             "(platforms/cuda.py check_and_update_config)")
    if capability == 100 or (family and capability // 10 == 10):
        test = "is_device_capability_family(100), the SM 10.x family" if family else "is_device_capability(100)"
        if ver >= _FLASHINFER_FROM:
            test += f"; FLASHINFER_MLA needs qk_nope_head_dim 128, not {qk_nope_head_dim or 1}"
        return CUTLASS_MLA_BLOCK_TOKENS, (f"vLLM {v} on {sm}: MLA defaults to CUTLASS_MLA ({test}), block forced to "
                                          f"{CUTLASS_MLA_BLOCK_TOKENS} (platforms/cuda.py check_and_update_config)")
    test = "the SM 10.x family" if family else "SM 10.0 exactly"
    return 16, (f"vLLM {v} on {sm}: CUTLASS_MLA's default is for {test} and "
                "FlashMLA needs SM 9.x (attention/ops/flashmla.py), so no MLA backend forces a block: the default 16 "
                "(platforms/cuda.py check_and_update_config)")
