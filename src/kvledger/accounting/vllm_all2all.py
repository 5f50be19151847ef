"""vLLM's expert-parallel all-to-all backend (``--all2all-backend``): which releases take it how, its choices and
default, and the rows each GPU's MoE layers run in the profile forward under DP + EP.

How it is given (read in each release's ``config/parallel.py`` and ``envs.py``):

* 0.9.0: only the ``VLLM_ALL2ALL_BACKEND`` environment variable, default "naive"; ``cuda_communicator.py`` takes
  "naive" or "pplx" and raises "Unknown all2all backend" otherwise. 0.9.1, 0.9.2, 0.10.0, 0.10.1 and 0.10.2 (read):
  the same variable and default, ``cuda_communicator.py`` also taking "deepep_high_throughput" and
  "deepep_low_latency".
* 0.11.0: only ``VLLM_ALL2ALL_BACKEND``, default "allgather_reducescatter", checked by ``envs.py::env_with_choices``.
* 0.11.1–0.13.0: ``--all2all-backend`` (``ParallelConfig.all2all_backend``, the Literal of 0.11.0's choices, default
  None: the variable's value; read in 0.11.1, 0.11.2, 0.12.0, 0.13.0; a deprecation warning from 0.12.0).
* 0.14.0 on: ``--all2all-backend`` with default "allgather_reducescatter" (0.14.0/0.15.0 still let a set variable
  override it); its choices are ``All2AllBackend``'s Literal: "mori" from 0.15.0, "nixl_ep" and
  "flashinfer_nvlink_two_sided"/"_one_sided" from 0.18.0 (read in 0.18.0–0.22.0), "mori_high_throughput"/
  "_low_latency" (no plain "mori") from 0.23.0, "deepep_v2" from 0.24.0 (read in 0.23.0–0.26.0, 0.28.0, 0.29.0),
  "moonep" in 0.33.0 ("passthrough" there too, but removed from the CLI choices in ``engine/arg_utils.py``), a plain
  "mori" again in 0.34.0 (the mori_* two deprecated). Releases not read take the last read before them.
* Fallbacks: 0.17.0 turns "pplx" into "allgather_reducescatter" (``ParallelConfig.__post_init__``); 0.19.0 on, "naive"
  and "pplx"; 0.18.0 on, "flashinfer_all2allv" is an alias of "flashinfer_nvlink_two_sided".

The profile rows on one GPU under DP + EP (DP ranks each dummy-running max_num_batched_tokens T):

* gathered (exact): "allgather_reducescatter" all_gatherv's every rank's rows (``all2all.py::AgRsAll2AllManager``),
  "naive" broadcasts them (``NaiveAll2AllManager``): DP × T rows (``vllm_dp_moe``).
* routed (upper bound): "deepep_high_throughput" sends each token only to the ranks holding its top-k experts, in the
  standard format (``prepare_finalize/deepep_ht.py``): at most DP × T rows reach one GPU, all of them where the
  dummy tokens (not randomized: ``VLLM_RANDOMIZE_DP_DUMMY_INPUTS`` off) route to its experts.
* chunked (``_CHUNKED``: 0.9.0–0.14.0 "pplx", "deepep_low_latency", then "mori" and "flashinfer_all2allv"; 0.18.0,
  0.19.0: "deepep_low_latency", "mori", "flashinfer_nvlink_two_sided", "nixl_ep", with ``VLLM_ENABLE_MOE_DP_CHUNK``
  on from 0.13.0): the layer runs in chunks of ``VLLM_MOE_DP_CHUNK_SIZE`` = 256 tokens per rank, so
  DP × min(T, 256) rows per call. Their batched experts' workspace ((local experts, 256 × DP, K):
  ``fused_batched_moe.py::BatchedTritonExperts.workspace_shapes``) and the backends' own communication buffers are not
  modelled: the plan prices those rows with its standard-format workspace rule and says so.
* any other choice (0.20.0 on has no DP chunking at all; the mori/nixl/flashinfer/moonep/deepep_v2 kernels' formats):
  not modelled; the plan keeps the gathered DP × T rows and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.errors import InputError

__all__ = ["All2AllChoice", "all2all_choice", "all2all_rows", "DP_CHUNK_TOKENS", "settings_choice", "FLAG_FROM",
           "all2all_launch"]

FLAG_FROM = (0, 11, 1)
"""The first release with ``--all2all-backend`` (``engine/arg_utils.py`` in 0.11.1; 0.11.0 reads the variable only)."""
DP_CHUNK_TOKENS = 256
"""``VLLM_MOE_DP_CHUNK_SIZE``'s default (envs.py, 0.11.0 and 0.19.0): tokens per rank per chunked MoE call."""

_BASE = ("naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "allgather_reducescatter",
         "flashinfer_all2allv")
_FI = ("flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided")
_CHOICES: tuple[tuple[tuple[int, int, int], tuple[str, ...]], ...] = (
    ((0, 9, 0), ("naive", "pplx")),
    ((0, 9, 1), _BASE[:4]),
    ((0, 11, 0), _BASE),
    ((0, 15, 0), (*_BASE[:4], "mori", *_BASE[4:])),
    ((0, 18, 0), (*_BASE[:4], "mori", "nixl_ep", *_BASE[4:], *_FI)),
    ((0, 23, 0), (*_BASE[:4], "mori_high_throughput", "mori_low_latency", "nixl_ep", *_BASE[4:], *_FI)),
    ((0, 24, 0), (*_BASE[:4], "deepep_v2", "mori_high_throughput", "mori_low_latency", "nixl_ep", *_BASE[4:], *_FI)),
    ((0, 33, 0), (*_BASE[:4], "deepep_v2", "mori_high_throughput", "mori_low_latency", "moonep", "nixl_ep",
                  *_BASE[4:], *_FI)),
    # 0.34.0 config/parallel.py: a plain "mori" again (MoRI EPv2 where supported), the two mori_* kept as deprecated
    ((0, 34, 0), (*_BASE[:4], "deepep_v2", "mori_high_throughput", "mori_low_latency", "moonep", "mori", "nixl_ep",
                  *_BASE[4:], *_FI)),
)
"""Each read release's choices (the Literal's order, as vLLM's argparse lists them), from that release on."""

_PPLX_LL = ("pplx", "deepep_low_latency")
_CHUNKED: tuple[tuple[tuple[int, int, int], tuple[str, ...]], ...] = (
    ((0, 9, 0), _PPLX_LL),
    ((0, 15, 0), (*_PPLX_LL, "mori")),
    ((0, 16, 0), (*_PPLX_LL, "mori", "flashinfer_all2allv")),
    ((0, 18, 0), ("deepep_low_latency", "mori", "flashinfer_nvlink_two_sided", "nixl_ep")),
    ((0, 20, 0), ()),
)
"""The backends whose MoE layer runs DP-chunked (256 tokens per rank, ``MOE_DP_CHUNK_SIZE`` in 0.9.0/0.9.1, then
``VLLM_MOE_DP_CHUNK_SIZE``), from each read release on: ``fused_moe/layer.py`` sends pplx (0.9.0 on) and
deepep_low_latency (0.9.1 on) to ``forward_impl_chunked`` (read in 0.9.0–0.9.2, 0.10.0–0.10.2, 0.11.0), then its
``use_dp_chunking`` (0.12.0–0.14.0) adds mori in 0.15.0 and flashinfer_all2allv in 0.16.0; 0.17.0's
``runner/default_moe_runner.py::use_dp_chunking`` drops pplx (removed: it falls back), 0.18.0 and 0.19.0 chunk
deepep_low_latency, mori, flashinfer_nvlink_two_sided (flashinfer_all2allv its alias) and nixl_ep; 0.20.0 on has no DP
chunking (no ``VLLM_MOE_DP_CHUNK_SIZE`` nor ``use_dp_chunking``: read in 0.20.0–0.26.0, 0.28.0 and 0.33.0)."""


def _chunked(ver: tuple[int, int, int]) -> tuple[str, ...]:
    return next((c for v, c in reversed(_CHUNKED) if ver >= v), ())


@dataclass(frozen=True)
class All2AllChoice:
    """The backend vLLM runs (``backend``) for what was given (None: the default), how its profile rows are counted
    (``rows``: "gathered", "routed", "chunked" or "unmodelled") and the rule's words with their source."""

    backend: str
    given: str | None
    rows: str
    words: str


def _choices(ver: tuple[int, int, int]) -> tuple[str, ...]:
    return next(c for v, c in reversed(_CHOICES) if ver >= v) if ver >= _CHOICES[0][0] else ()


def _refuse(ver: tuple[int, int, int], given: str, choices: tuple[str, ...]) -> InputError:
    """vLLM's own refusal of ``given``: 0.9's worker error, 0.11.0's environment check, from 0.11.1 argparse's."""
    v = ".".join(map(str, ver))
    if ver < (0, 11, 0):
        return InputError(f"--all2all-backend {given} (vLLM {v} reads VLLM_ALL2ALL_BACKEND): vLLM {v} would raise "
                          f"'Unknown all2all backend: {given}' (cuda_communicator.py takes {' or '.join(choices)})")
    if ver < FLAG_FROM:
        return InputError(f"--all2all-backend {given} (vLLM {v} reads VLLM_ALL2ALL_BACKEND): vLLM {v} would raise "
                          f"\"Invalid value '{given}' for VLLM_ALL2ALL_BACKEND. Valid options: {list(choices)}.\" "
                          "(envs.py)")
    return InputError(f"argument --all2all-backend: invalid choice: {given!r} (choose from "
                      f"{', '.join(map(repr, choices))}) — vLLM {v}'s choices (config/parallel.py)")


def all2all_choice(ver: tuple[int, int, int], given: str | None) -> All2AllChoice:
    """The backend vLLM ``ver`` runs for ``given`` (None: its default) and how its profile rows are counted.

    Raises:
        InputError: a choice that release refuses (in its words), or a release before 0.9 (no EP all-to-all read).
    """
    choices = _choices(ver)
    if given is not None and given not in choices:
        raise _refuse(ver, given, choices) if choices else InputError(
            f"--all2all-backend: vLLM {'.'.join(map(str, ver))} predates the expert-parallel all-to-all backends "
            "(read from 0.9.0's VLLM_ALL2ALL_BACKEND); drop it")
    default = "naive" if ver < (0, 11, 0) else "allgather_reducescatter"
    backend, how = given or default, ("the default" if given is None else "the given") + " all2all_backend"
    if backend in ("naive", "pplx") and (ver >= (0, 19, 0) or (backend == "pplx" and ver >= (0, 17, 0))):
        backend, how = "allgather_reducescatter", f"{how} {given}, removed (config/parallel.py), falls back to"
    if backend == "flashinfer_all2allv" and ver >= (0, 18, 0):
        backend = "flashinfer_nvlink_two_sided"
    src = "config/parallel.py" if ver >= FLAG_FROM else "envs.py VLLM_ALL2ALL_BACKEND"
    if backend in ("allgather_reducescatter", "naive"):
        return All2AllChoice(backend, given, "gathered", f"{how} {backend} ({src}), which gathers every DP rank's "
                             "profile rows into each MoE layer (distributed/device_communicators/all2all.py, "
                             f"{'AgRs' if backend != 'naive' else 'Naive'}All2AllManager; no DP chunking for it)")
    if backend in _chunked(ver):
        where = ("runner/default_moe_runner.py::use_dp_chunking" if ver >= (0, 17, 0)
                 else "fused_moe/layer.py::FusedMoE.forward_impl_chunked")
        return All2AllChoice(backend, given, "chunked", f"{how} {backend}: the MoE layer runs DP-chunked, "
                             f"{DP_CHUNK_TOKENS} tokens per rank per call (VLLM_MOE_DP_CHUNK_SIZE; {where}, vLLM "
                             f"{'.'.join(map(str, ver))}); its batched "
                             "experts' workspace and communication buffers are not modelled: the chunk's rows are "
                             "priced with the standard-format workspace rule")
    if backend == "deepep_high_throughput":
        return All2AllChoice(backend, given, "routed", f"{how} {backend} dispatches each token only to the ranks "
                             "holding its top-k experts (prepare_finalize/deepep_ht.py): DP × max_num_batched_tokens "
                             "rows are an upper bound on one GPU (reached where the dummy tokens route to its "
                             "experts); DeepEP's own buffers are not modelled")
    return All2AllChoice(backend, given, "unmodelled", f"{how} {backend}: its profile memory is not modelled "
                         f"(vLLM {'.'.join(map(str, ver))}); the plan keeps the allgather_reducescatter rows, DP × "
                         "max_num_batched_tokens, and none of the backend's buffers")


def all2all_rows(choice: All2AllChoice | None, tokens: int, dp: int) -> int:
    """The rows one GPU's MoE layers run per profile call under DP + EP: DP × min(``tokens``, 256) for a DP-chunked
    backend, else DP × ``tokens`` (exact for the gathering backends, an upper bound or unmodelled otherwise)."""
    if choice is not None and choice.rows == "chunked":
        return dp * min(tokens, DP_CHUNK_TOKENS)
    return dp * tokens


def settings_choice(engine_version: str | None, given: str | None) -> All2AllChoice:
    """``all2all_choice`` for a plan's vLLM version as given (None: the latest read)."""
    return all2all_choice(parse_version((engine_version or LATEST).split()[0]), given)


def all2all_launch(engine_version: str | None, flags: list[str]) -> tuple[list[str], list[str]]:
    """(environment words, ``vllm serve`` flags) for launch ``flags``: before 0.11.1 ``--all2all-backend X`` becomes
    ``VLLM_ALL2ALL_BACKEND=X`` (no such flag there: argparse refuses it); unchanged from 0.11.1 and with no version."""
    if "--all2all-backend" not in flags or not engine_version or parse_version(engine_version) >= FLAG_FROM:
        return [], flags
    i = flags.index("--all2all-backend")
    return [f"VLLM_ALL2ALL_BACKEND={flags[i + 1]}"], flags[:i] + flags[i + 2:]
