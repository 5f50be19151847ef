"""What vLLM 0.10.2–0.17.1 do with a ``--block-size`` the user gives for a dense MLA model: the MLA backend vLLM
picks replaces a size its kernels do not take.

Read in ``platforms/cuda.py::CudaPlatform.check_and_update_config`` (0.10.2, 0.11.0, 0.11.1, 0.11.2, 0.12.0, 0.13.0,
0.14.1, 0.16.0, 0.17.1). The MLA branch runs on the block size as given (the default 16 is filled in just before), so
a given size meets the same forcing as the default one:

* the backend (no attention backend given) is chosen as ``vllm_mla_blackwell`` says: CUTLASS_MLA on SM 10.0 (from
  0.13 the SM 10.x family), FLASHINFER_MLA on the family when ``qk_nope_head_dim == 128`` (0.15–0.17), else FlashMLA,
  whose block is forced only where ``is_flashmla_supported`` / ``is_flashmla_dense_supported`` holds: SM 9.x, Hopper;
* 0.10.2 and 0.11.0 force exact sizes: FlashMLA ``block_size != 64`` → 64, CUTLASS_MLA ``block_size != 128`` → 128;
* from 0.11.1 multiples pass: FlashMLA ``block_size % 64 != 0`` → 64, CUTLASS_MLA ``block_size % 128 != 0`` → 128,
  FLASHINFER_MLA ``block_size != 32 and block_size % 64 != 0`` → 64.

Each logs "Forcing kv cache block size to N for … backend". From 0.18 ``update_block_size_for_backend`` returns at
once when ``cache_config.user_specified_block_size`` ("User specified --block-size; keep it"; 0.18.0, 0.19.0, 0.33.0):
the given size stands. Releases before 0.10.2 were not read: the given size is kept there.

Sparse MLA (DeepSeek-V3.2, ``use_sparse = hasattr(hf_config, "index_topk")``), same function, 0.11.0 (its first
release; 0.10.2 has no ``use_sparse``), 0.11.1, 0.11.2, 0.12.0, 0.13.0, 0.14.1, 0.16.0, 0.17.1: on any CUDA GPU,
``use_sparse and block_size != 64`` → 64, "Forcing kv cache block size to 64 for FlashMLASparse backend" (0.17.1 adds
FLASHINFER_MLA_SPARSE only when the attention backend is named; by default FlashMLASparse's exact 64). So a given
128 is replaced too. From 0.18 the given size is kept (``update_block_size_for_backend``), and the backend selector
then tests it: FlashMLASparse takes multiples of 64 (``get_supported_kernel_block_sizes`` [64], 0.18.0 and 0.19.0).
"""

from __future__ import annotations

from kvledger.accounting.vllm_mla_blackwell import CUTLASS_MLA_BLOCK_TOKENS, FLASHINFER_MLA_BLOCK_TOKENS

__all__ = ["given_mla_block", "given_sparse_mla_block"]

_READ = ((0, 10, 2), (0, 18, 0))  # [first, end): from 0.18 the user's --block-size is kept
_SPARSE_READ = ((0, 11, 0), (0, 18, 0))  # [first, end) of the sparse forcing to exactly 64
_MULTIPLES_FROM = (0, 11, 1)  # 0.10.2 and 0.11.0 test != 64 / != 128; 0.11.1 on test % 64 / % 128
_FAMILY_FROM = (0, 13, 0)  # is_device_capability_family(100) replaces is_device_capability(100)
_FLASHINFER_FROM = (0, 15, 0)  # FLASHINFER_MLA first on the family when qk_nope_head_dim == 128
FLASHMLA_BLOCK_TOKENS = 64
"""FlashMLA's forced block size (0.10.2–0.17.1), tokens."""


def _backend(ver: tuple[int, int, int], arch: str, capability: int | None, nope: int) -> str | None:
    """The MLA backend whose block rule applies (None: none forces a block on this GPU)."""
    family = capability is not None and capability // 10 == 10 and ver >= _FAMILY_FROM
    if family and ver >= _FLASHINFER_FROM and nope == 128:
        return "FLASHINFER_MLA"
    if family or capability == 100:
        return "CUTLASS_MLA"
    return "FlashMLA" if arch == "sm90" or (capability is not None and capability // 10 == 9) else None


def given_mla_block(ver: tuple[int, int, int], arch: str, capability: int | None, qk_nope_head_dim: int,
                    given: int) -> tuple[int, str]:
    """(block size, why) for a dense MLA model given ``--block-size given``: vLLM 0.10.2–0.17.1's forced size where
    the backend's test fails (the given size replaced, and said so), else the given size."""
    backend = _backend(ver, arch, capability, qk_nope_head_dim) if _READ[0] <= ver < _READ[1] else None
    if backend is None:
        return given, "given"
    multiples = ver >= _MULTIPLES_FROM
    if backend == "FLASHINFER_MLA":
        forced, keeps = FLASHINFER_MLA_BLOCK_TOKENS, given == 32 or given % 64 == 0
        test = "block_size != 32 and block_size % 64 != 0"
    else:
        forced = CUTLASS_MLA_BLOCK_TOKENS if backend == "CUTLASS_MLA" else FLASHMLA_BLOCK_TOKENS
        keeps = given % forced == 0 if multiples else given == forced
        test = f"block_size % {forced} != 0" if multiples else f"block_size != {forced}"
    if keeps:
        return given, "given"
    v = ".".join(map(str, ver))
    gpu = "Hopper" if backend == "FlashMLA" else f"SM {capability // 10}.{capability % 10}"
    return forced, (f"--block-size {given} given, but vLLM {v} replaces it: its MLA backend on {gpu}, {backend}, "
                    f"forces {forced} where {test} (platforms/cuda.py check_and_update_config, \"Forcing kv cache "
                    f"block size to {forced}\"); vLLM 0.18 and later keep a given --block-size")


def given_sparse_mla_block(ver: tuple[int, int, int], given: int) -> tuple[int, str]:
    """(block size, why) for a sparse MLA model (DeepSeek-V3.2) given ``--block-size given``: vLLM 0.11.0–0.17.1
    force exactly 64 (module doc), else the given size."""
    if not _SPARSE_READ[0] <= ver < _SPARSE_READ[1] or given == FLASHMLA_BLOCK_TOKENS:
        return given, "given"
    v, b = ".".join(map(str, ver)), FLASHMLA_BLOCK_TOKENS
    return b, (f"--block-size {given} given, but vLLM {v} replaces it: a sparse MLA model (index_topk) is forced to "
               f"{b} where block_size != {b} (platforms/cuda.py check_and_update_config, \"Forcing kv cache block "
               f"size to {b} for FlashMLASparse backend\"); vLLM 0.18 and later keep a given --block-size")
