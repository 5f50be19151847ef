"""Whether vLLM runs a tuned or the default Triton fused-MoE config for a model's MoE layers, and what the default
costs.

Lookup (``fused_moe.py::get_config_file_name``, vLLM 0.11.0 and 0.28.0): vLLM reads
``E=<local experts>,N=<I/TP>,device_name=<torch device name, spaces → _>[,dtype=fp8_w8a8][,block_shape=[r,c]].json``
from ``fused_moe/configs/`` when its wheel ships one, else ``get_default_config`` ("Using default MoE config.
Performance might be sub-optimal!"). 0.28.0 names every H200 ``NVIDIA_H200``; 0.11.0 uses the torch name as is. N is
the rank's intermediate size (I/TP; the whole I under expert parallelism), E the rank's local experts. The shipped
names are ``data/vllm_fused_moe_configs_<version>.txt`` (listed from the wheels, 230 and 330 files); a release
between or beyond them takes the nearest read one (a tie takes the older). GPU → device name: ``data/
vllm_device_names.csv``; a GPU not there carries none of the device names in the lists, so no file is its.

Only the Triton path reads these files: BF16/FP16 experts, and FP8 (per-tensor or 128-block) experts on a GPU with
FP8 tensor cores. Other quantizations (MXFP4, NVFP4, AWQ, GPTQ, ...) and FP8 below sm89 (Marlin) run other kernels:
no lookup, no factor.

Cost of the default (``data/fused_moe_config_pairs.csv``, sources in ``data/SOURCES.md``): 87 published pairs of
``benchmark_moe.py`` kernel times, default vs tuned config, same shape, GPU and token count, from 11 tables (pull
requests adding tuned configs) on L40S, H20, H20-3e, H200, A100 SXM and PCIe, RTX PRO 6000 Blackwell Server and RTX
4090D, BF16 and FP8. The slowdown default/tuned is a constant s fitted by minimising the mean |s / measured − 1|,
each table weighted equally (a least-squares fit of log s is pulled up to ×1.10 by the two H20-3e tables, 1.3–1.5×,
and does worse held out). Errors, mean |s / measured − 1| (rows / per-table mean), leave-one-table-out: each table
priced by the constant fitted to the other ten:

    ===================================  ===============  ===============
    s                                    in-sample        LOSO
    ===================================  ===============  ===============
    1 (no factor)                        6.7% / 8.3%      6.7% / 8.3%
    1.0315 (used)                        5.8% / 7.4%      5.9% / 7.5%
    1 + a·T/(T + T½) (a 0.068, T½ 21)    5.7% / 7.2%      5.9% / 7.4%
    exp(mean log), least squares         8.3% / 9.7%      8.8% / 10.2%
    ===================================  ===============  ===============

The token-dependent form does no better held out than the constant, so the constant is used. Worst held-out rows:
H20-3e at 96–512 tokens (tuned 1.4–1.5× faster) and H20 Mixtral at 32 tokens (1.6×): a default config can be much
slower at some shapes; the constant is the typical cost, not a bound.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np

from kvledger.catalog.expert_placement import local_experts

__all__ = ["READ_VERSIONS", "MoeConfigChoice", "ConfigFactor", "nearest_read", "shipped_names",
           "device_name", "config_file_name", "default_config_factor", "fit_constant", "moe_config_choice",
           "FLASHINFER_EP_FROM", "flashinfer_ep_words"]

READ_VERSIONS = ((0, 11, 0), (0, 28, 0))  # the wheels whose config lists are bundled


@dataclass(frozen=True)
class MoeConfigChoice:
    """The fused-MoE config vLLM ``version`` would run: the file it looks for, whether its wheel ships it, the
    slowdown applied to the fused-MoE kernel term (1.0 when tuned) and the line that says so."""

    version: str
    file_name: str
    tuned: bool
    factor: float
    note: str


@dataclass(frozen=True)
class ConfigFactor:
    """The fitted default/tuned slowdown and its errors (module docstring)."""

    factor: float
    pairs: int
    tables: int
    err_in: float
    err_loso: float
    err_loso_max: float


def _text(name: str) -> str:
    return resources.files("kvledger.accounting").joinpath(f"data/{name}").read_text()


def nearest_read(version: tuple[int, int, int]) -> tuple[int, int, int]:
    """The read release nearest ``version`` (by minor, then patch), the older on a tie."""
    key = lambda v: (abs(v[0] * 1000 + v[1] - version[0] * 1000 - version[1]), abs(v[2] - version[2]), v)  # noqa: E731
    return min(READ_VERSIONS, key=key)


@functools.lru_cache(maxsize=8)
def shipped_names(version: tuple[int, int, int]) -> frozenset[str]:
    """The tuned config file names vLLM ``version`` (a read one) ships."""
    v = ".".join(map(str, version))
    return frozenset(ln.strip() for ln in _text(f"vllm_fused_moe_configs_{v}.txt").splitlines() if ln.strip())


@functools.lru_cache(maxsize=1)
def _device_names() -> dict[str, str]:
    return {r["gpu_id"]: r["device_name"] for r in csv.DictReader(_text("vllm_device_names.csv").splitlines())}


def device_name(gpu_id: str, version: tuple[int, int, int]) -> str | None:
    """vLLM's ``device_name`` in config file names for catalog GPU ``gpu_id`` under ``version`` (a read one), or
    None when the catalog row has none (no shipped file carries it)."""
    name = _device_names().get(gpu_id)
    if name and version >= (0, 28, 0) and "H200" in name.split("_"):
        return "NVIDIA_H200"  # 0.28.0: "Set device_name to H200 if a device from the H200 family is detected"
    return name


def config_file_name(experts: int, n: int, device: str, dtype: str | None, block: tuple[int, int] | None) -> str:
    """``get_config_file_name``'s name: ``E=..,N=..,device_name=..[,dtype=..][,block_shape=[r,c]].json``."""
    d = f",dtype={dtype}" if dtype else ""
    b = f",block_shape=[{block[0]},{block[1]}]" if block and all(block) else ""
    return f"E={experts},N={n},device_name={device}{d}{b}.json"


def fit_constant(ratios: np.ndarray, tables: np.ndarray) -> float:
    """The s minimising Σ w·|s / ratio − 1| (w = 1 / the row's table size), on a 0.0005 grid over 0.9–1.5."""
    grid = np.arange(0.9, 1.5, 0.0005)
    w = np.array([1.0 / np.sum(tables == t) for t in tables])
    cost = (w[None, :] * np.abs(grid[:, None] / ratios[None, :] - 1)).sum(axis=1)
    return float(grid[int(np.argmin(cost))])


@functools.lru_cache(maxsize=1)
def default_config_factor() -> ConfigFactor:
    """The constant default/tuned slowdown fitted to the bundled pairs, with in-sample and leave-one-table-out
    mean |s / measured − 1| over the rows."""
    rows = list(csv.DictReader(_text("fused_moe_config_pairs.csv").splitlines()))
    r = np.array([float(x["default_us"]) / float(x["tuned_us"]) for x in rows])
    t = np.array([x["source"] for x in rows])
    s = fit_constant(r, t)
    held = np.concatenate([np.abs(fit_constant(r[t != u], t[t != u]) / r[t == u] - 1) for u in sorted(set(t))])
    return ConfigFactor(s, len(rows), len(set(t)), float(np.mean(np.abs(s / r - 1))), float(held.mean()),
                        float(held.max()))


def _kernel_dtype(model, gpu) -> tuple[bool, str | None, tuple[int, int] | None]:
    """(whether Triton's fused MoE reads a config file for these experts, the file's dtype, its block shape)."""
    q = model.quant
    if q.method == "none":
        return True, None, None
    if q.method == "fp8" and gpu.fp8_flops_per_s and gpu.arch not in ("sm80", "sm86"):
        return True, "fp8_w8a8", tuple(q.block) if q.block else None
    return False, None, None


def moe_config_choice(model, gpu, tp: int, ep: int, version: tuple[int, int, int], moe_layers: int,
                      version_text: str) -> MoeConfigChoice | None:
    """What vLLM ``version`` runs for ``model``'s routed experts on ``gpu`` at ``tp`` × ``ep``, or None (not a MoE,
    or its experts do not run Triton's fused MoE)."""
    triton, dtype, block = _kernel_dtype(model, gpu)
    if not model.is_moe or not moe_layers or not triton:
        return None
    e = model.num_experts
    inter = sum(w.numel for w in model.weights if w.expert) / (e * moe_layers * 3 * model.hidden_size)
    n = int(round(inter)) if ep > 1 else int(round(inter / tp))
    read = nearest_read(version)
    dev = device_name(gpu.gpu_id, read)
    name = config_file_name(local_experts(e, ep), n, dev or gpu.name.replace(" ", "_"), dtype, block)
    tuned = dev is not None and name in shipped_names(read)
    f = default_config_factor()
    rv = ".".join(map(str, read))
    who = f"vLLM {rv}" if version == read else f"vLLM {rv} (the read release nearest {version_text})"
    fi = flashinfer_ep_words(model, gpu, ep, version, version_text)
    if tuned:
        note = f"fused-MoE config: {who} ships the tuned {name}" + (fi or "; the kernel fit applies as is")
        return MoeConfigChoice(version_text, name, True, 1.0, note)
    note = (f"fused-MoE config: {who} ships no tuned config for E={local_experts(e, ep)},N={n} on this GPU (looked "
            f"for {name}): default config, kernel term ×{f.factor:.3f} (default/tuned fitted on {f.pairs} published "
            f"pairs from {f.tables} tables, error {f.err_loso:.1%} held out; single shapes reach 1.5×)")
    return MoeConfigChoice(version_text, name, False, f.factor, note + fi)


FLASHINFER_EP_FROM = (0, 19, 0)
"""The first read vLLM release whose FP8 MoE oracle puts FlashInfer's CUTLASS MoE first for block FP8 under expert
parallelism on Hopper (0.19.0, 0.28.0, 0.29.0 and 0.33.0 read; earlier releases not read for it)."""


def flashinfer_ep_words(model, gpu, ep: int, version: tuple[int, int, int], version_text: str = "") -> str:
    """"; but at EP > 1 …": the caveat that vLLM ``version`` (``version_text``) runs 128-block FP8 experts on Hopper
    under expert parallelism with FlashInfer's CUTLASS fused MoE, not the Triton kernel of the config file and the fit
    (vLLM 0.33.0 ``fused_moe/oracle/fp8.py`` ``_get_priority_backends``: "On Hopper for Block Fp8, prefer Triton for
    TP and FI CUTLASS for EP"; ``experts/flashinfer_cutlass_moe.py`` supports (kFp8Static128BlockSym,
    kFp8Dynamic128Sym) on sm90 when FlashInfer's fused MoE is installed); "" where that does not apply."""
    q = model.quant
    if ep <= 1 or gpu.arch != "sm90" or q.method != "fp8" or tuple(q.block or ()) != (128, 128) \
            or version < FLASHINFER_EP_FROM:
        return ""
    who = f"vLLM {version_text}" if version_text else "vLLM"
    return (f"; but at EP > 1 on Hopper {who} runs these 128-block FP8 experts with FlashInfer's CUTLASS fused MoE "
            "when FlashInfer is installed (fused_moe/oracle/fp8.py: \"prefer Triton for TP and FI CUTLASS for EP\"), "
            "not this Triton kernel: its tuned-config file and the kernel fit (Triton and SGLang timings) stand in for "
            "a kernel not measured here")

