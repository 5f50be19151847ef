"""Which MXFP4 MoE backend vLLM runs gpt-oss-style MXFP4 experts with, by release × GPU × environment, as a stock
``pip install vllm==X`` gives it: Marlin (weight-only FP4, BF16 MMA), Triton (triton_kernels' ``matmul_ogs``) or one
of FlashInfer's (TRT-LLM or CUTLASS). The choice sets the experts' padding (catalog/mxfp4_layout.py) and the MoE GEMMs'
block (moe_rows.py). Names are vLLM's ``--moe-backend`` words (0.19 ``config/kernel.py``).

What a stock install holds, read in each wheel's METADATA and file list:

* ``triton_kernels``: no dependency of any wheel 0.10.1–0.34.0; vendored as ``vllm/third_party/triton_kernels`` from
  0.12.0 (``utils/import_utils.py::has_triton_kernels`` looks there too). So 0.10.1–0.11.2 have none.
* ``flashinfer-python``: an extra up to 0.11.0 (``extra == "flashinfer"``), a dependency from 0.11.1.
* torch: 0.10.1.x pins 2.7.1, which fails ``is_torch_equal_or_newer("2.8.0")``; 0.10.2 on pin 2.8.0 or later.

Rules by release (each row names the file and function read; rows between read releases take the row below them):
the environment variables are vLLM's (``envs.py``), given as a mapping of name to bool (unset: absent).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.errors import InputError

__all__ = ["BACKENDS", "ENV_VARS", "Mxfp4Choice", "mxfp4_backend", "mxfp4_plan", "mxfp4_note"]

BACKENDS = ("marlin", "triton", "flashinfer_trtllm", "flashinfer_cutlass")
"""vLLM's words (``--moe-backend``, 0.19 ``oracle/mxfp4.py::map_mxfp4_backend``) for the backends' layouts."""
MARLIN_ENV, BF16_ENV = "VLLM_MXFP4_USE_MARLIN", "VLLM_USE_FLASHINFER_MOE_MXFP4_BF16"
MXFP8_ENV, CUTLASS_ENV = "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8", "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8_CUTLASS"
ENV_VARS = (MARLIN_ENV, BF16_ENV, MXFP8_ENV, CUTLASS_ENV)


@dataclass(frozen=True)
class _Rule:
    """One range of releases with the same selection (module docstring)."""

    first: tuple[int, int, int]
    style: str  # "method": 0.10.1's _should_use_marlin; "legacy": get_mxfp4_backend; "oracle": 0.19's priority list
    torch_ok: bool  # the pinned torch passes is_torch_equal_or_newer("2.8.0")
    triton_kernels: bool  # a stock install can import triton_kernels
    flashinfer: bool  # a stock install has flashinfer-python
    marlin_env: str  # VLLM_MXFP4_USE_MARLIN: "decides" (either way), "forces" (=1 only), "" (not read)
    triton_below_110: bool  # Triton only for 9.0 <= capability < 11.0 (else any capability from 9.0)
    reads_env: bool = True  # False from 0.24.0: envs.py and oracle/mxfp4.py have none of ENV_VARS
    fi_family: bool = True  # FlashInfer on the SM 10.x family (is_device_capability_family(100)); False: SM 10.0 only


_RULES = (
    # 0.10.1, 0.10.1.1: quantization/mxfp4.py Mxfp4MoEMethod._should_use_marlin and should_use_flashinfer_mxfp4
    # (is_device_capability(100): SM 10.0 exactly)
    _Rule((0, 10, 1), "method", False, False, False, "decides", False, fi_family=False),
    # 0.10.2, 0.11.0: quantization/mxfp4.py get_mxfp4_backend (no VLLM_MXFP4_USE_MARLIN); FlashInfer's branches test
    # is_device_capability(100), SM 10.0 exactly (read in 0.10.2, 0.11.0, 0.11.2, 0.12.0), so B300 (10.3) falls through
    _Rule((0, 10, 2), "legacy", True, False, False, "", False, fi_family=False),
    # 0.11.1, 0.11.2: get_mxfp4_backend; VLLM_MXFP4_USE_MARLIN forces Marlin; flashinfer-python a dependency
    _Rule((0, 11, 1), "legacy", True, False, True, "forces", False, fi_family=False),
    # 0.12.0: get_mxfp4_backend with triton_kernels_supported = has_triton_kernels() and
    # (9, 0) <= capability < (11, 0); triton_kernels vendored; FlashInfer on SM 10.0 exactly
    _Rule((0, 12, 0), "legacy", True, True, True, "forces", True, fi_family=False),
    # 0.13.0 … 0.18.0: as 0.12.0, FlashInfer's branches on is_device_capability_family(100), the SM 10.x family (read
    # in 0.13.0, 0.14.0, 0.18.0)
    _Rule((0, 13, 0), "legacy", True, True, True, "forces", True),
    # 0.19.0 … 0.23.0: fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend (_get_priority_backends: FlashInfer TRT-LLM
    # BF16 on the SM 10.x family, Triton on 9.0 <= capability < 11.0, FlashInfer CUTLASS BF16 on SM 9.0, Marlin);
    # the four variables first (read in 0.19.0, 0.20.0, 0.21.0, 0.23.0; 0.22.0/0.23.0 deprecate them)
    _Rule((0, 19, 0), "oracle", True, True, True, "forces", True),
    # 0.24.0 … 0.34.0: the variables are gone (envs.py and oracle/mxfp4.py of 0.24.0, 0.28.0, 0.34.0 name none; the
    # choice is --moe-backend): the priority list alone (_get_priority_backends_for_gpt_oss; _filter_by_activation
    # keeps its BF16-activation entries for a BF16-activation checkpoint). 0.34.0 moves Triton after Marlin on SM
    # 11.x/12.x and Humming before Marlin on SM 9.0, behind Triton: the same choices
    _Rule((0, 24, 0), "oracle", True, True, True, "", True, reads_env=False),
)


@dataclass(frozen=True)
class Mxfp4Choice:
    """The backend (``BACKENDS``) and why, in words (release, GPU, environment, what a stock install holds)."""

    backend: str
    why: str


def _rule(version: tuple[int, int, int]) -> _Rule:
    return next((r for r in reversed(_RULES) if version >= r.first), _RULES[0])


def mxfp4_backend(version: tuple[int, int, int], arch: str, env: dict[str, bool] | None = None,
                  triton_kernels: bool | None = None, given: str = "") -> Mxfp4Choice | None:
    """The MXFP4 MoE backend vLLM ``version`` picks on NVIDIA ``arch`` at its exact capability ("sm90", "sm103" for
    B300: ``GpuSpec.exact_arch``; None elsewhere) under ``env``
    (module docstring); ``triton_kernels``: whether that package imports (None: as a stock install); ``given``: a
    backend the user names (``BACKENDS``), taken as is."""
    if not arch.startswith("sm"):
        return None
    v = ".".join(map(str, version))
    if given and given != "auto":
        if given not in BACKENDS:
            raise InputError(f"--mxfp4-backend {given!r}: expected one of {', '.join(BACKENDS)}")
        return Mxfp4Choice(given, f"{given} as given (--mxfp4-backend)")
    r, cc, env = _rule(tuple(version)), int(arch[2:]), env or {}
    tk = r.triton_kernels if triton_kernels is None else triton_kernels
    have = ("triton_kernels bundled" if r.triton_kernels else "no triton_kernels (no dependency of the wheel)") \
        if triton_kernels is None else ("triton_kernels installed" if tk else "no triton_kernels")
    fi = r.flashinfer and (cc // 10 == 10 if r.fi_family else cc == 100)
    pick, why = (_method if r.style == "method" else _legacy if r.style == "legacy" else _oracle)(r, cc, env, tk, fi)
    return Mxfp4Choice(pick, f"vLLM {v} on {arch}, {have}, flashinfer-python "
                             f"{'a dependency' if r.flashinfer else 'an extra'}: {why}")


def _set(env: dict[str, bool], name: str) -> bool:
    return bool(env.get(name))


def _method(r: _Rule, cc: int, env: dict, tk: bool, fi: bool) -> tuple[str, str]:
    """0.10.1.x: ``_should_use_marlin`` (off SM 10.0: below 9.0, without triton_kernels or below torch 2.8 → Marlin),
    else FlashInfer TRT-LLM (an MXFP4 env var, or SM 10.0 with flashinfer), else Triton."""
    if env.get(MARLIN_ENV):
        return "marlin", f"{MARLIN_ENV}=1"
    # 0.10.1 mxfp4.py: VLLM_MXFP4_USE_MARLIN=0 returns from _should_use_marlin before the checks below; the layer then
    # still takes FlashInfer where should_use_flashinfer_mxfp4() holds (process_weights_after_loading's elif)
    if MARLIN_ENV not in env and cc != 100 and (cc < 90 or not tk or not r.torch_ok):
        return "marlin", "Marlin off SM 10.0 " + ("below SM 9.0" if cc < 90 else "without triton_kernels and torch "
                                                  "2.8 (the wheel pins torch 2.7.1)")
    if _set(env, MXFP8_ENV) or env.get(BF16_ENV, fi and MXFP8_ENV not in env):
        return "flashinfer_trtllm", "FlashInfer TRT-LLM MXFP4 on SM 10.0"
    return "triton", "Triton (matmul_ogs): FlashInfer not installed" + ("" if tk else "; without triton_kernels the "
                                                                         "load fails")


def _legacy(r: _Rule, cc: int, env: dict, tk: bool, fi: bool) -> tuple[str, str]:
    """0.10.2–0.18: ``get_mxfp4_backend``'s order (module docstring rows)."""
    if cc == 90 and r.flashinfer and _set(env, BF16_ENV):
        return "flashinfer_cutlass", f"{BF16_ENV}=1 on SM 9.0: FlashInfer CUTLASS MXFP4 BF16"
    if fi and _set(env, CUTLASS_ENV):
        return "flashinfer_cutlass", f"{CUTLASS_ENV}=1"
    if fi:
        return "flashinfer_trtllm", "FlashInfer TRT-LLM MXFP4 " + ("MXFP8" if _set(env, MXFP8_ENV) else "BF16")
    if r.marlin_env == "forces" and _set(env, MARLIN_ENV):
        return "marlin", f"{MARLIN_ENV}=1"
    if cc < 90 or not tk or (r.triton_below_110 and cc >= 110):
        return "marlin", "Marlin, " + ("below SM 9.0" if cc < 90 else "as Triton needs SM 9.0–10.x" if tk else
                                       "as Triton needs triton_kernels")
    return "triton", "Triton (matmul_ogs)"


def _oracle(r: _Rule, cc: int, env: dict, tk: bool, fi: bool) -> tuple[str, str]:
    """0.19+: the env vars first (to 0.23), then the priority list (module docstring rows). Read in 0.19.0
    oracle/mxfp4.py select_mxfp4_moe_backend: an env var's backend goes through _return_or_raise, a ValueError where
    its kernel does not support the GPU (TrtLlmMxfp4Experts: the SM 10.x family with flashinfer; FlashInferExperts'
    MXFP4 × MXFP8 scheme: has_device_capability(100)); Triton's _supports_current_device (9.0 <= capability < 11.0)
    does not look at triton_kernels (has_triton_kernels gates the LoRA path only)."""
    env = env if r.reads_env else {}
    bf16 = env.get(BF16_ENV)
    if bf16:
        if cc == 90 or fi:
            return ("flashinfer_cutlass" if cc == 90 else "flashinfer_trtllm"), f"{BF16_ENV}=1"
        raise InputError(f"{BF16_ENV}=1: vLLM refuses it below SM 9.0 and off SM 9.0/10.x (oracle/mxfp4.py)")
    for name, pick, ok in ((MXFP8_ENV, "flashinfer_trtllm", fi), (CUTLASS_ENV, "flashinfer_cutlass", cc >= 100),
                           (MARLIN_ENV, "marlin", True)):
        if _set(env, name) and not ok:
            raise InputError(f"{name}=1 on SM {cc // 10}.{cc % 10}: vLLM refuses to start (\"Mxfp4 MoE backend "
                             f"'{pick}' does not support the deployment configuration\", oracle/mxfp4.py): it needs "
                             + ("the SM 10.x family" if pick == "flashinfer_trtllm" else "SM 10.0 or later"))
        if _set(env, name):
            return pick, f"{name}=1"
    if fi and bf16 is not False:
        return "flashinfer_trtllm", "FlashInfer TRT-LLM MXFP4 BF16, first on the SM 10.x family"
    if 90 <= cc < 110:
        return "triton", "Triton (matmul_ogs), first on SM 9.0" + ("" if tk else " (the oracle does not check "
                                                                    "triton_kernels: without it the load fails)")
    return "marlin", "Marlin, the first backend that supports " + ("SM " + f"{cc // 10}.{cc % 10}")


def mxfp4_plan(model, arch: str, version: tuple[int, int, int], given: str = "") -> tuple[str, str, str] | None:
    """(the backend, the backend of the weights' other end or "", why) for a model with MXFP4 experts (``quant.method``
    "mxfp4") on NVIDIA ``arch``, as ``mxfp4_backend`` picks it; None for other models and GPUs. The other end: where
    a stock install has no ``triton_kernels`` (0.10.1–0.11.2), the backend vLLM picks once it is installed (as the
    gpt-oss guides of those releases had users do), when that differs."""
    if getattr(model.quant, "method", "") != "mxfp4" or not model.is_moe:
        return None
    given = "" if given == "auto" else given
    c = mxfp4_backend(tuple(version), arch, given=given)
    if c is None:
        return None
    alt = "" if given or _rule(tuple(version)).triton_kernels else \
        mxfp4_backend(tuple(version), arch, triton_kernels=True).backend
    alt = alt if alt != c.backend else ""
    return c.backend, alt, c.why + (f"; {alt} once triton_kernels is installed (the range's other end)" if alt else "")


def mxfp4_note(model, arch: str, version: tuple[int, int, int], given: str = "") -> str:
    """The plan's line on the MXFP4 experts' backend (``mxfp4_plan``), "" where none applies."""
    mx = mxfp4_plan(model, arch, version, given)
    if mx is None:
        return ""
    other = f"; --mxfp4-backend {mx[1]} where triton_kernels is installed" if mx[1] else ""
    return f"MXFP4 experts: {mx[0]} — {mx[2].split('; ' + mx[1] + ' once')[0]}{other}"
