"""The FLOPs and bytes of a speculative verification step (k+1 tokens per sequence), as vLLM's attention path runs it.

Which path a verification token takes in vLLM's MLA layers:

* ``model_executor/layers/attention/mla_attention.py : MLACommonMetadataBuilder.__init__`` (read in 0.19 and 0.33) calls
  ``_init_reorder_batch_threshold(reorder_batch_threshold, supports_spec_decode)`` with ``supports_spec_decode =
  query_len_support != SINGLE_ONLY``; ``v1/attention/backend.py`` then raises the threshold to ``1 +
  num_speculative_tokens`` (``max_decode_query_len``), and a request whose query is no longer than the threshold is a
  decode: ``forward_mqa``, the absorbed attention over the latent cache, each sequence's KV read once, no
  ``kv_b_proj`` re-expansion of its context.
* ``query_len_support``: FLASH_ATTN_MLA (Hopper's first MLA backend) VARLEN, FLASHMLA (Hopper, FP8 KV) UNIFORM,
  FLASHINFER_MLA (Blackwell SM100's first) UNIFORM in 0.17, 0.18, 0.19 and 0.33 (``v1/attention/backends/mla/``);
  TRITON_MLA, the backend left for other GPUs, SINGLE_ONLY in 0.19 and UNIFORM in 0.33 (0.20–0.32 not read: taken as
  0.19). In 0.11 FLASHMLA's builder keeps threshold 1 (verification tokens go to ``forward_mha``, the prefill path);
  0.12–0.16 are not read and are taken as 0.11.

Elsewhere (non-MLA models, or a path that does not take spec-as-decode) a verification is priced as a prefill chunk of
k+1 tokens per sequence, as before.
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.step_costs import StepCosts
from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.vllm_rules import version_tuple

__all__ = ["verify_runs_as_decode", "verify_step_costs"]

_SPEC_AS_DECODE_ARCHS = ("sm90", "sm100")  # FLASH_ATTN_MLA / FLASHMLA (SM90), FLASHINFER_MLA (SM100)


def verify_runs_as_decode(engine: str, engine_version: str | None, arch: str, has_mla: bool) -> tuple[bool, str]:
    """(whether vLLM runs a verification's k+1 tokens per sequence through the MLA decode path, why), per the module
    docstring's reading; False for models without MLA, other engines or versions that predate it."""
    if not has_mla:
        return False, ""
    ver = version_tuple(engine_version or "") or (0, 0, 0)
    src = "mla_attention.py MLACommonMetadataBuilder: reorder_batch_threshold = 1 + num_speculative_tokens"
    if engine != "vllm":
        return False, f"{engine}: priced as a prefill chunk (vLLM's spec-as-decode rule not applied)"
    if ver >= (0, 17, 0) and arch in _SPEC_AS_DECODE_ARCHS:
        return True, (f"vLLM {engine_version} on {arch}: the MLA backend takes spec-as-decode (query_len_support "
                      f"UNIFORM/VARLEN), so a verification runs the absorbed decode path ({src})")
    if ver >= (0, 33, 0):
        return True, f"vLLM {engine_version}: TRITON_MLA takes spec-as-decode (query_len_support UNIFORM; {src})"
    return False, (f"vLLM {engine_version} on {arch or 'this GPU'}: its MLA backend does not take spec-as-decode "
                   "(threshold 1), so a verification runs the prefill path (forward_mha, context re-expanded)")


def verify_step_costs(rc, dec: int, kvd: int, k: int, *, as_decode: bool,
                      prefill: StepShape | None = None) -> StepCosts:
    """FLOPs and bytes of a step in which ``dec`` sequences, holding ``kvd`` KV tokens in all, each verify k+1 tokens,
    with ``prefill``'s chunks in the same step; logits at all k+1 positions.

    Each sequence with ℓ KV tokens scores (k+1)ℓ + k(k+1)/2 (query, key) pairs and holds ℓ + k KV tokens after the step.
    ``as_decode`` (``verify_runs_as_decode``): the k+1 tokens are decode tokens (absorbed attention, KV read once per
    sequence, no context re-expansion); otherwise a prefill chunk of k+1 tokens each.
    """
    p = prefill or StepShape()
    pairs = (k + 1) * kvd + dec * k * (k + 1) / 2
    if not as_decode or rc.window_terms or rc.state_bytes:
        s = StepShape(p.num_prefill_tokens + dec * (k + 1), p.num_prefill_seqs + dec,
                      p.prefill_kv_tokens + kvd + dec * k, p.prefill_attn_pairs + pairs)
        c = rc.costs(s)
        return replace(c, matmul_flops=c.matmul_flops + rc.head_flops_per_seq * dec * k)
    # each verified token as one decode query: tokens, logits and (query, key) pairs as the engine counts them; the
    # costs() decode form reads KV once per query, so the surplus reads (pairs − KV tokens held) come off, and the host
    # term counts sequences, not queries
    c = rc.costs(StepShape(p.num_prefill_tokens, p.num_prefill_seqs, p.prefill_kv_tokens, p.prefill_attn_pairs,
                           dec * (k + 1), round(pairs)))
    surplus = rc.growing_read_bytes * (round(pairs) - (kvd + dec * k))
    return replace(c, kv_bytes=c.kv_bytes - surplus, host_s=rc.host_s(p.num_prefill_seqs + dec))
