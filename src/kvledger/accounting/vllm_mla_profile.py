"""What an MLA model (DeepSeek-V2/V3, Kimi-K2) and DeepSeek-V3.2's sparse attention allocate in vLLM's start-up
profiling beyond the layer activations, per GPU. Read in the vLLM wheels named.

Profile run (``gpu_model_runner.py::profile_run`` → ``_dummy_run(is_profile=True)``: no attention metadata), into the
torch peak that ``gpu_worker.py::determine_available_memory`` subtracts as the activation peak:

- the MLA layer's dummy (0.28.0 ``model_executor/layers/attention/mla_attention.py::MLAAttention.forward_impl``, 0.11.0
  ``v1/attention/backends/mla/common.py::MLACommonImpl.forward``, branch ``attn_metadata is None``): ``torch.empty(
  (chunked_prefill_workspace_size, num_heads, qk_nope_head_dim + v_head_dim))`` in the activations' dtype, "to
  simulate the worst case output size of kv_b_proj" — the up-projected context of a chunked prefill. Its token count
  is ``MLACommonMetadataBuilder.determine_chunked_prefill_workspace_size``: min(max(8·max_model_len, 4·max_num_seqs·
  block_size), 64Ki), then at least max_num_seqs·block_size (0.11.0) or rounded up to the block size (0.28.0,
  ``align_mla_chunked_context_workspace_size``); heads per GPU × (nope + v) is ``kv_b_proj``'s output rows / TP. A
  transient of the attention call: freed on return, held beside the layer's hidden states.
- DeepSeek-V3.2's indexer (0.28.0 ``model_executor/layers/sparse_attn_indexer.py::sparse_attn_indexer``, same branch):
  reserves the K-gather workspace from the workspace manager, (T, index_head_dim) FP8 + (T, 4) B of fp32 scales + the
  1 MiB radix top-k buffer (``RADIX_TOPK_WORKSPACE_SIZE``), each rounded up to 256 B (``v1/worker/workspace.py::
  WorkspaceManager.get_simultaneous``), with T = 40·max_model_len (``v1/attention/backends/mla/indexer.py::
  get_max_prefill_buffer_size``) — kept after the forward; the manager holds one buffer grown to the largest request,
  which the fused-MoE workspaces share (``fused_moe/modular_kernel.py``), so the two are a max, not a sum. It then
  allocates ``VLLM_SPARSE_INDEXER_MAX_LOGITS_MB`` (512 MiB, ``envs.py``) "to simulate the peak logits tensor",
  freed before the attention's own dummy.

CUDA-graph profiling (``gpu_model_runner.py::profile_cudagraph_memory``): the first FULL capture's warm-up runs
attention with metadata, and FlashInfer's sparse MLA backends (``FLASHINFER_MLA_SPARSE``, ``_SM120``) allocate their
module-wide workspace on first use (0.28.0 ``v1/attention/backends/mla/flashinfer_mla_sparse.py::
_get_workspace_buffer``: ``VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE``, 394 MiB, ``envs.py``), measured as that first
capture's memory and kept.

Versions: the MLA dummy from 0.11.0 (0.11's workspace rule up to 0.27, 0.28's after; versions between and after the
two read assume the nearer one); the indexer and FlashInfer terms from 0.28.0, as the sparse backend choice
(``vllm_sparse_mla.FIRST_READ``). Read but not counted: ``profile_cudagraph_memory`` empties the allocator's cache and
its PIECEWISE warm-up runs without attention metadata, so the MLA dummy may be measured again as graph memory; a public
0.28.0 record (DeepSeek-V3.2-Exp-16L64E, RTX PRO 6000) leaves no room for the whole of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.vllm_sparse_mla import FIRST_READ as SPARSE_FIRST_READ
from kvledger.accounting.vllm_sparse_mla import SparseMLAChoice
from kvledger.catalog.compressed_mla import has_compressed_mla
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB, MiB

__all__ = ["MLA_DUMMY_FIRST_READ", "MLAProfile", "chunked_prefill_workspace_tokens", "mla_profile",
           "indexer_workspace_bytes", "INDEXER_LOGITS_BYTES", "FLASHINFER_SPARSE_WORKSPACE_BYTES",
           "flashinfer_sparse_workspace"]

MLA_DUMMY_FIRST_READ = (0, 11, 0)
"""The oldest vLLM whose MLA profile dummy was read (0.11.0 ``MLACommonImpl.forward``); older versions: not counted."""
MLA_CHUNK_CAP_TOKENS = 64 * 1024
"""``determine_chunked_prefill_workspace_size``'s cap, tokens ("limiting it to 64k tokens")."""
INDEXER_PREFILL_FACTOR = 40
"""``get_max_prefill_buffer_size``: max_model_len × 40 indexer entries (0.28.0 indexer.py)."""
RADIX_TOPK_BYTES = 1024 * 1024
"""``RADIX_TOPK_WORKSPACE_SIZE`` (0.28.0 sparse_attn_indexer.py), B."""
INDEXER_LOGITS_BYTES = 512 * MiB
"""``VLLM_SPARSE_INDEXER_MAX_LOGITS_MB`` × MiB, the indexer's profile-run logits dummy (0.28.0 envs.py default 512)."""
FLASHINFER_SPARSE_WORKSPACE_BYTES = 394 * MiB
"""``VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE`` (0.28.0 envs.py default 394 MiB)."""


@dataclass(frozen=True)
class MLAProfile:
    """The profile run's MLA terms on one GPU, B.

    Attributes:
        dummy: the largest attention-time transient (the MLA dummy or the indexer's logits dummy).
        kept: the indexer's K-gather workspace held by the workspace manager (0 without an indexer).
        why: how both were built.
    """

    dummy: float
    kept: float
    why: str


def _round256(n: int) -> int:
    return -(-n // 256) * 256


def chunked_prefill_workspace_tokens(ver, max_model_len: int, max_num_seqs: int, block_size: int) -> int:
    """``determine_chunked_prefill_workspace_size`` of vLLM ``ver`` (module docstring), tokens."""
    size = min(max(8 * max_model_len, 4 * max_num_seqs * block_size), MLA_CHUNK_CAP_TOKENS)
    if ver < (0, 28, 0):  # 0.11.0: at least one page per request
        return max(size, max_num_seqs * block_size)
    b = max(1, block_size)
    return -(-max(size, b) // b) * b  # 0.28.0 align_mla_chunked_context_workspace_size (no DCP)


def indexer_workspace_bytes(max_model_len: int, index_head_dim: int) -> int:
    """The indexer's K-gather workspace reserved in the profile run (0.28.0 ``sparse_attn_indexer``), B."""
    t = INDEXER_PREFILL_FACTOR * max_model_len
    return _round256(t * index_head_dim) + _round256(t * 4) + _round256(RADIX_TOPK_BYTES)


def _mla_layers(model: ModelSpec) -> list[MLAAttention]:
    if has_compressed_mla(model.layers):  # DeepSeek-V4's own attention (models/deepseek_v4), not read here
        return []
    mla = [x for x in model.layers if isinstance(x, MLAAttention)]
    return [] if any(x.window_tokens for x in mla) else mla  # sliding MLA (dots3) runs its own attention


def _up_proj_rows(model: ModelSpec, tp: int) -> float:
    rows = next((w.rows for w in model.weights if w.path.endswith("kv_b_proj.weight")), 0)
    return rows / tp


def mla_profile(model: ModelSpec, ver, max_model_len: int, max_num_seqs: int, block_size: int,
                tp: int) -> MLAProfile | None:
    """The MLA dummy and DeepSeek-V3.2's indexer terms of vLLM ``ver``'s profile run; None for models without MLA,
    versions before the first read (0.11.0; 0.28.0 for sparse attention, whose older backends were not read)."""
    layers = _mla_layers(model)
    sparse = [x for x in layers if x.index_topk > 0]
    if not layers or ver < MLA_DUMMY_FIRST_READ or (sparse and ver < SPARSE_FIRST_READ):
        return None
    rows = _up_proj_rows(model, tp)
    if not rows:
        return None
    n = chunked_prefill_workspace_tokens(ver, max_model_len, max_num_seqs, block_size)
    dummy = n * rows * model.dtype_bytes
    why = (f"MLA profile dummy {n:,} tokens × {rows:,.0f} (heads per GPU × (nope + v), kv_b_proj) × "
           f"{model.dtype_bytes} B = {dummy / GiB:.2f} GiB during the attention (mla_attention.py::"
           "MLAAttention.forward_impl, chunked prefill workspace min(max(8·max_model_len, 4·max_num_seqs·block), "
           "64Ki))")
    if not sparse:
        return MLAProfile(dummy, 0.0, why)
    kept = indexer_workspace_bytes(max_model_len, sparse[0].index_head_dim)
    why += (f"; indexer K-gather workspace 40 × {max_model_len:,} × ({sparse[0].index_head_dim} + 4) B + 1 MiB = "
            f"{kept / GiB:.2f} GiB kept by the workspace manager (sparse_attn_indexer.py::sparse_attn_indexer, "
            f"indexer.py::get_max_prefill_buffer_size) and its {INDEXER_LOGITS_BYTES // MiB} MiB logits dummy "
            "(VLLM_SPARSE_INDEXER_MAX_LOGITS_MB)")
    return MLAProfile(max(dummy, INDEXER_LOGITS_BYTES), float(kept), why)


def flashinfer_sparse_workspace(choice: SparseMLAChoice | None, ver) -> tuple[int, str]:
    """FlashInfer's sparse MLA workspace that the first FULL CUDA-graph capture allocates and keeps, B, and why; 0 for
    other backends and versions before 0.28 (not read)."""
    if choice is None or ver < SPARSE_FIRST_READ or not choice.backend.startswith("FLASHINFER_MLA_SPARSE"):
        return 0, ""
    return FLASHINFER_SPARSE_WORKSPACE_BYTES, (
        f"+ {FLASHINFER_SPARSE_WORKSPACE_BYTES // MiB} MiB {choice.backend} workspace allocated by the first FULL "
        "capture's warm-up and kept (flashinfer_mla_sparse.py::_get_workspace_buffer, "
        "VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE)")
