"""Which top-k/top-p sampler vLLM's profile run uses, version by version, and the range it puts on the activation peak.

Read in the wheels (``v1/sample/ops/topk_topp_sampler.py :: TopKTopPSampler.__init__``, ``envs.py``):
  * V0 (< 0.8): ``VLLM_USE_FLASHINFER_SAMPLER`` defaults to "0" (0.6.3 ``envs.py``): the sort-based PyTorch sampler;
    ``--sampler-backend flashinfer`` (the variable at 1) from 0.5.5, refused before (``V0_FLASHINFER_FROM``).
  * 0.8.x: FlashInfer only when the installed FlashInfer is older than 0.2.3 ("FlashInfer>=v0.2.3 is not backward
    compatible", 0.8.5), and the env var is not 0; otherwise PyTorch.
  * 0.9–0.11.0: FlashInfer whenever it is installed (≥ 0.2.3) and ``VLLM_USE_FLASHINFER_SAMPLER`` is not 0 (None
    counts as on in V1; read in 0.9.2, 0.10.1, 0.11.0). The wheel lists FlashInfer as an optional extra
    (``vllm[flashinfer]``); the project's Docker image ships it: which one ran depends on the installation, so both
    are in the range, the point being PyTorch (a plain ``pip install vllm``; the llm-d-benchmark H100 logs in
    vllm_memory_observations.csv show the sort-era peak, e.g. 4.76 GiB for Llama-3.1-8B at 1,024 requests, not
    FlashInfer's 2.5 GiB). vme_startups.csv shows both: upstream v0.11.0 builds on H200 leave 2.5–3.2 GiB more KV
    than the plan's sort point (the FlashInfer end of the range), Red Hat's 0.11.0+rhai builds match the sort point.
    With ``--sampler-backend flashinfer`` the upstream rows land at +0.02% (Llama-3.3-70B FP8-dynamic TP 4), +1.44%
    (Qwen3-235B FP8-dynamic TP 4, expert parallel) and −3.6% (DeepSeek-R1 TP 8, whose kept fused-MoE workspace the
    plan charges: 1.75 GiB, about the remaining gap); a pip-installed 0.10.2 (vllm_public_startups.csv P14) fits the
    sort point (+0.34%; FlashInfer would give +3.7%). So the point stays PyTorch; the row says which was installed.
  * 0.11.1–0.20: PyTorch unless ``VLLM_USE_FLASHINFER_SAMPLER=1`` ("Users must opt in explicitly", 0.11.1, 0.11.2,
    0.12.0, 0.14.0, 0.19.0, 0.20.0).
  * 0.21+: FlashInfer by default where the GPU supports it (``envs.py`` default True, None in 0.20.0), but the V1
    runner's profile peak is PyTorch's whatever the backend (``V1_SECOND_PASS_FROM``).
  * ROCm: every FlashInfer branch above sits under ``current_platform.is_cuda()`` (0.11.0, 0.12.0, 0.13.0), so ROCm
    never samples with FlashInfer. From 0.12.0 (absent in 0.11.2) ROCm takes ``forward_hip``, AITER's
    ``top_k_top_p_sampling_from_probs``, when ``VLLM_ROCM_USE_AITER=1`` (default "False", 0.13.0 ``envs.py``) and
    ``aiter.ops.sampling`` imports; else PyTorch. Both are in the range of ``auto``. vme_startups.csv's two MI300X
    start-ups of a 0.13.1 development build print 3.0 and 3.6 GiB more KV than Red Hat's 0.13.0/0.14.1 builds of the
    same checkpoints (which match the sort point), the size of the sort sampler's extra bytes; whether that build ran
    AITER is not recorded, so the rows keep ``auto``.
"""

from __future__ import annotations

from kvledger.errors import InputError

__all__ = ["SAMPLER_BACKENDS", "sampler_backends", "V1_SECOND_PASS_FROM", "v1_profile_backend"]

SAMPLER_BACKENDS = ("auto", "flashinfer", "pytorch", "aiter")

V0_FLASHINFER_FROM = (0, 5, 5)
"""First release with ``VLLM_USE_FLASHINFER_SAMPLER`` (``envs.py``; absent in 0.5.4). V0 (0.5.5–0.7.3,
``model_executor/layers/sampler.py``) then samples with FlashInfer when the variable is 1 and FlashInfer is
installed, skipping ``_apply_top_k_top_p``'s sort; the profile run's dummy requests (top_p 0.99, top_k vocab − 1)
take that path."""

AITER_SAMPLER_FROM = (0, 12, 0)
"""First release whose ``TopKTopPSampler`` has the ROCm AITER path (``forward_hip``; read in 0.12.0 and 0.13.0, absent
in 0.11.2)."""


def sampler_backends(ver: tuple[int, int, int], choice: str, rocm: bool = False) -> tuple[str, str | None, str]:
    """(backend the plan uses, the other backend the same command may get or None, why) for ``--sampler-backend``;
    ``rocm``: an AMD GPU (vLLM's ROCm platform).

    Raises:
        InputError: a choice vLLM cannot take there (AITER off ROCm or before 0.12, FlashInfer on ROCm): the plan would
            otherwise ignore the flag.
    """
    if rocm:
        return _rocm_backends(ver, choice)
    if choice == "aiter":
        raise InputError("--sampler-backend aiter: vLLM's AITER sampler runs on AMD GPUs only (ROCm; "
                         "topk_topp_sampler.py forward_hip), and this GPU is not one: use --sampler-backend auto, "
                         "pytorch or flashinfer")
    if choice in ("flashinfer", "pytorch"):
        env = "VLLM_USE_FLASHINFER_SAMPLER=1" if choice == "flashinfer" else "VLLM_USE_FLASHINFER_SAMPLER=0"
        if choice == "flashinfer" and ver < V0_FLASHINFER_FROM:
            raise InputError(f"--sampler-backend flashinfer: vLLM {'.'.join(map(str, ver))} has no FlashInfer sampler "
                             "(VLLM_USE_FLASHINFER_SAMPLER arrived in 0.5.5, envs.py): use --sampler-backend auto or "
                             "pytorch, or --engine-version 0.5.5 or later")
        if choice == "flashinfer" and ver < (0, 8, 0):
            return "flashinfer", None, ("sampler flashinfer (given; VLLM_USE_FLASHINFER_SAMPLER=1 with FlashInfer "
                                        "installed: V0's sampler.py skips the top-k/top-p sort, 0.5.5–0.7.3)")
        return choice, None, f"sampler {choice} (given; {env})"
    if ver < (0, 8, 0):
        return "pytorch", None, "V0 sorts (VLLM_USE_FLASHINFER_SAMPLER=0 default)"
    if ver < (0, 9, 0):
        return "pytorch", "flashinfer", "0.8: FlashInfer only if < 0.2.3 installed, else sort (both in range)"
    if ver < (0, 11, 1):
        return "pytorch", "flashinfer", "0.9–0.11.0: FlashInfer if installed, else sort (both in range)"
    if ver < V1_SECOND_PASS_FROM:
        return "pytorch", None, "0.11.1–0.20: PyTorch unless VLLM_USE_FLASHINFER_SAMPLER=1"
    return "pytorch", None, "≥0.21: FlashInfer by default where supported (envs.py), PyTorch at the profile's peak"


V1_SECOND_PASS_FROM = (0, 21, 0)
"""First release whose V1 ``gpu_model_runner.py::_dummy_sampler_run`` samples twice (absent in 0.20.0; read in 0.21.0,
0.26.0, 0.28.0, 0.33.0): the second pass adds a seeded ``torch.Generator`` ("Also warm forward_native"), and
``TopKTopPSampler.forward_cuda`` (FlashInfer) and ``forward_hip`` (AITER) hand any batch with generators to
``forward_native``: Triton top-k/top-p, fp32 probs and noise. The processed-logprobs modes skip that pass, but
there ``__init__`` binds ``forward_native`` from the start. So the profile's peak is the PyTorch sampler's, whatever
serves."""


def v1_profile_backend(ver: tuple[int, int, int], backend: str, other: str | None,
                       why: str) -> tuple[str, str | None, str]:
    """(backend, other, why) for the V1 runner's profile peak: from 0.21 the PyTorch sampler's (V1_SECOND_PASS_FROM)."""
    if ver < V1_SECOND_PASS_FROM or (backend == "pytorch" and other is None):
        return backend, other, why
    return "pytorch", None, (f"{why}; profiled as PyTorch: vLLM {'.'.join(map(str, ver))}'s V1 _dummy_sampler_run "
                             "samples a second time with a seeded generator, which FlashInfer and AITER hand to "
                             "forward_native (gpu_model_runner.py, topk_topp_sampler.py; from 0.21)")


def _rocm_backends(ver: tuple[int, int, int], choice: str) -> tuple[str, str | None, str]:
    """ROCm: no FlashInfer (its branches need ``is_cuda()``); AITER from 0.12 with ``VLLM_ROCM_USE_AITER=1``."""
    has_aiter = ver >= AITER_SAMPLER_FROM
    if choice == "aiter" and has_aiter:
        return "aiter", None, "sampler aiter (given; VLLM_ROCM_USE_AITER=1, topk_topp_sampler.py forward_hip)"
    if choice == "aiter":
        raise InputError(f"--sampler-backend aiter: vLLM {'.'.join(map(str, ver))} has no AITER sampler (forward_hip "
                         "arrived in 0.12.0): use --sampler-backend auto or pytorch, or --engine-version 0.12.0 or "
                         "later")
    if choice == "flashinfer":
        raise InputError("--sampler-backend flashinfer: vLLM never samples with FlashInfer on ROCm (every FlashInfer "
                         "branch of topk_topp_sampler.py needs current_platform.is_cuda()): use --sampler-backend "
                         "auto or pytorch" + (", or aiter" if has_aiter else ""))
    if choice == "pytorch" or not has_aiter:
        return "pytorch", None, "ROCm: PyTorch sampler" + (" (given)" if choice == "pytorch" else "")
    return "pytorch", "aiter", "ROCm ≥0.12: AITER if VLLM_ROCM_USE_AITER=1, else PyTorch (both in range)"


MLA_PADDED_HEAD_DIM = 256
"""Head size vLLM before 0.7.1 gave DeepSeek-V2/V3 attention: q/k (qk_nope 128 + rope 64 = 192) and v (128) padded to
256 and cached as ordinary K/V with one KV head per query head (0.6.3 ``models/deepseek_v2.py``:
``Attention(self.num_local_heads, 256, ..., num_kv_heads=self.num_local_heads)``)."""


def pre_mla_cache_model(model, ver: tuple[int, int, int]):
    """The model as vLLM < 0.7.1 cached it: every MLA layer as full K/V with all heads at head size 256 (MLA, the
    compressed latent cache, arrived in 0.7.1 with VLLM_MLA_DISABLE=0 by default); other versions unchanged."""
    from dataclasses import replace

    from kvledger.catalog.layers import FullAttention, MLAAttention

    if ver >= (0, 7, 1) or not any(isinstance(layer, MLAAttention) for layer in model.layers):
        return model
    layers = tuple(FullAttention(x.num_attention_heads, MLA_PADDED_HEAD_DIM, MLA_PADDED_HEAD_DIM, x.num_attention_heads)
                   if isinstance(x, MLAAttention) else x for x in model.layers)
    return replace(model, layers=layers, num_kv_heads=model.num_attention_heads)
