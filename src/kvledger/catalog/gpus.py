"""The GPU catalog: memory as CUDA reports it, HBM bandwidth, dense FLOP/s and links, from ``catalog/data/gpus.csv``.

Memory: engines size their budget from the device total that ``cudaMemGetInfo`` returns, which is below the
``nvidia-smi`` total (itself below the marketing GB). ``catalog/data/gpu_cuda.csv`` gives each GPU's CUDA total with
its low/high over drivers and its basis: measured (a vLLM log or PyTorch OOM message that prints it; H100 SXM 79.19
GiB in 40 vLLM 0.19 start-ups) or derived (nvidia-smi minus 450 MiB, range −800 to −300 MiB from the measured gaps),
and the P2P / NVLink all-to-all facts vLLM's custom all-reduce checks.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from kvledger.catalog.gpu_names import GPU_ALIASES as _ALIASES
from kvledger.catalog.gpu_names import GPU_ARCH as _ARCH
from kvledger.catalog.gpu_names import GPU_CAPABILITY as _CAPABILITY
from kvledger.catalog.gpu_names import smi_forms
from kvledger.errors import InputError, UnknownNameError
from kvledger.jsonable import to_jsonable
from kvledger.units import GB, MiB, fmt_plain

__all__ = ["GpuSpec", "get_gpu", "gpu_alias_note", "gpu_catalog", "custom_gpu", "cli_name", "CUDA_RESERVE_MIB"]

CUDA_RESERVE_MIB = 450
"""nvidia-smi total − CUDA total assumed for a GPU with no measured CUDA total, MiB (gpu_cuda.csv: measured gaps
316–768 MiB over T4, RTX 3090/4090, A10, A100, H100 and RTX PRO 6000; the derived range is −800 to −300 MiB)."""

@dataclass(frozen=True)
class GpuSpec:
    """One accelerator as the ledger needs it.

    Attributes:
        gpu_id: catalog key (``nvidia_h100_sxm``) or "custom".
        name: vendor model name.
        memory_gb_marketed: the datasheet's capacity, GB (10^9 B).
        nvidia_smi_mib: total shown by nvidia-smi/rocm-smi, MiB; None if unknown.
        memory_bytes: device total as CUDA reports it (what engines multiply by their fraction), B.
        memory_source: where ``memory_bytes`` comes from (measurement or stated assumption).
        hbm_bandwidth_bytes_per_s: peak memory bandwidth, B/s.
        bf16_flops_per_s / fp8_flops_per_s / fp4_flops_per_s: dense tensor-core peaks, FLOP/s (None: unsupported).
        interconnect / interconnect_bytes_per_s: scale-up link and its bidirectional bandwidth per GPU, B/s.
        host_link_bytes_per_s: PCIe/C2C bandwidth to the host, both ways, B/s (host_link_source: if not the catalog).
        tdp_w: board power, W. arch: compute capability family ("sm90", ...), "" if not NVIDIA. datasheet_ref,
            confidence, notes: provenance from gpus.csv.
        memory_low_bytes / memory_high_bytes: the CUDA total's range over drivers and its evidence, B (gpu_cuda.csv).
        memory_basis: "measured" (a log prints it), "derived" (nvidia-smi or marketed minus the reserve) or "given".
        p2p: CUDA peer access between two such GPUs in one server (vLLM's ``_can_p2p``); False on GeForce cards.
        nvlink_all_to_all: every GPU of the server reaches every other over NVLink/xGMI (NVSwitch boards; vLLM's
            ``is_fully_connected``), which custom all-reduce needs above 2 GPUs.
        form_factor: gpus.csv ``form_factor`` ("PCIe consumer", "SXM5", "OAM", "Superchip module"…); "" if not given.
    """
    __json_optional__ = ("host_link_source", "exact_capability")

    gpu_id: str
    name: str
    memory_gb_marketed: float
    nvidia_smi_mib: int | None
    memory_bytes: int
    memory_source: str
    hbm_bandwidth_bytes_per_s: float
    bf16_flops_per_s: float
    fp8_flops_per_s: float | None
    fp4_flops_per_s: float | None
    interconnect: str
    interconnect_bytes_per_s: float
    host_link_bytes_per_s: float
    tdp_w: float | None
    arch: str
    datasheet_ref: str
    confidence: str
    notes: str
    memory_low_bytes: int = 0
    memory_high_bytes: int = 0
    memory_basis: str = "given"
    p2p: bool = True
    nvlink_all_to_all: bool = False
    form_factor: str = ""
    host_link_source: str | None = None
    exact_capability: int | None = None

    def __post_init__(self) -> None:
        if not self.memory_low_bytes:
            object.__setattr__(self, "memory_low_bytes", self.memory_bytes)
        if not self.memory_high_bytes:
            object.__setattr__(self, "memory_high_bytes", self.memory_bytes)

    @property
    def server_module(self) -> bool:
        """A module on a server baseboard or superchip (SXM, OAM, Grace, rack tray, TPU board): no display output, a
        Linux datacenter driver, never Windows' WDDM. False for PCIe cards and a GPU whose form factor is unknown."""
        return bool(self.form_factor) and not self.form_factor.startswith("PCIe")

    @property
    def bf16_supported(self) -> bool:
        """False below compute capability 8.0 (T4, sm75): vLLM refuses bfloat16 there (its CUDA platform's dtype check,
        "--dtype=half") and serves float16, so ``bf16_flops_per_s`` holds the FP16 dense rate (gpus.csv notes)."""
        return self.arch not in ("sm70", "sm75")

    @property
    def capability(self) -> int | None:
        """The exact compute capability, major × 10 + minor: a GPU file's base's (``exact_capability``), else B300's
        103 (``gpu_names.GPU_CAPABILITY``), else the family's (H100 90); None if not NVIDIA (is_device_capability)."""
        key, fam = next((k for k in sorted(_CAPABILITY, key=len, reverse=True) if k in self.gpu_id), None), self.arch
        return self.exact_capability or (_CAPABILITY[key] if key else int(fam[2:]) if fam[:2] == "sm" else None)

    @property
    def exact_arch(self) -> str:
        """``arch`` at the exact capability ("sm103" on B300; ``arch`` elsewhere)."""
        return f"sm{self.capability}" if self.capability else self.arch

    def ridge_flops_per_byte(self, dtype: str = "bf16") -> float:
        """Roofline ridge point: dense peak FLOP/s ÷ HBM bytes/s, FLOP/B (H100 SXM bf16: 989.5e12/3.35e12 = 295.4)."""
        peak = {"bf16": self.bf16_flops_per_s, "fp8": self.fp8_flops_per_s, "fp4": self.fp4_flops_per_s}[dtype]
        if not peak:
            raise InputError(f"{self.name} has no dense {dtype} tensor rate in the catalog")
        return peak / self.hbm_bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _f(x: str) -> float | None:  # an optional CSV number
    return float(x) if x not in ("", None) else None


def _row_to_spec(r: dict[str, str], cuda: dict[str, str]) -> GpuSpec:
    smi = int(r["memory_mib_reported"]) if r["memory_mib_reported"] else None
    gid = r["gpu_id"]
    mib, lo, hi = int(cuda["cuda_total_mib"]), int(cuda["cuda_total_low_mib"]), int(cuda["cuda_total_high_mib"])
    key = next((k for k in sorted(_ARCH, key=len, reverse=True) if k in gid), None)
    return GpuSpec(
        gpu_id=gid, name=f"{r['vendor']} {r['model']}", memory_gb_marketed=float(r["memory_gb_marketed"]),
        nvidia_smi_mib=smi, memory_bytes=mib * MiB, memory_source=f"catalog gpu_cuda.csv, {gid}: {cuda['source']}",
        hbm_bandwidth_bytes_per_s=float(r["memory_bandwidth_tb_s"]) * 1e12,
        bf16_flops_per_s=float(r["bf16_dense_tflops"]) * 1e12,
        fp8_flops_per_s=(_f(r["fp8_dense_tflops"]) or 0) * 1e12 or None,
        fp4_flops_per_s=(_f(r["fp4_dense_tflops"]) or 0) * 1e12 or None, interconnect=r["scaleup_interconnect"],
        interconnect_bytes_per_s=(_f(r["scaleup_bw_gb_s_bidir_per_gpu"]) or 0) * 1e9,
        host_link_bytes_per_s=(_f(r["host_bw_gb_s_bidir"]) or 0) * 1e9, tdp_w=_f(r["tdp_w"]),
        arch=_ARCH.get(key, "") if key else "", datasheet_ref=r["datasheet_ref"], confidence=r["confidence"],
        notes=r["notes"],
        memory_low_bytes=lo * MiB, memory_high_bytes=hi * MiB, memory_basis=cuda["basis"], p2p=cuda["p2p"] == "yes",
        nvlink_all_to_all=cuda["nvlink_all_to_all"] == "yes", form_factor=r["form_factor"])


def gpu_catalog() -> Mapping[str, GpuSpec]:
    """Every catalog GPU keyed by id (catalog/data/gpus.csv, gpus.SOURCES.md), read-only: what ``get_gpu`` reads
    cannot be changed by a caller (``dict(gpu_catalog())`` is a copy to change)."""
    return MappingProxyType(_catalog())


@lru_cache(maxsize=1)
def _catalog() -> dict[str, GpuSpec]:
    data = resources.files("kvledger.catalog") / "data"
    with (data / "gpu_cuda.csv").open(encoding="utf-8") as fh:
        cuda = {r["gpu_id"]: r for r in csv.DictReader(fh)}
    with (data / "gpus.csv").open(encoding="utf-8") as fh:
        return {r["gpu_id"]: _row_to_spec(r, cuda[r["gpu_id"]]) for r in csv.DictReader(fh)}


def _norm(s: str) -> str:  # a size's bare G is GB, as cloud SKUs write it: "A100 40G" is "a100-40gb"
    return re.sub(r"(?<![^-])(\d+)g(?![^-])", r"\1gb", re.sub(r"[_ ]", "-", s.strip().lower())).removeprefix("nvidia-")


def cli_name(gpu_id: str) -> str:
    """The short --gpu name of a catalog row, as the hints print it: its id without the vendor prefix, hyphenated
    (nvidia_h100_pcie → h100-pcie, nvidia_b300 → b300); ``get_gpu`` answers to it."""
    return _norm(gpu_id.removeprefix("nvidia_"))


def _names(gid: str, full: bool = True) -> list[str]:
    """The normalised names a catalog row answers to: its id, its id without the vendor prefix, its aliases and
    (``full``) its own full name as the catalog prints it, e.g. "NVIDIA RTX PRO 6000 Blackwell Server Edition"."""
    return ([_norm(gid), _norm(gid.removeprefix("nvidia_"))] + [_norm(a) for a in _ALIASES.get(gid, [])]
            + ([_norm(gpu_catalog()[gid].name)] if full else []))


def _words(name: str) -> frozenset[str]:  # a normalised name's words, SXM generations folded: a100-sxm4 → {a100, sxm}
    return frozenset(re.sub(r"^sxm\d$", "sxm", w) for w in name.split("-") if w)


def _find(name: str) -> str | None:
    """The row a name picks: a name of it exactly, else the one row with a name of the same words in another order
    ("A100-SXM-80GB", as a run's record may write it, is "a100-80gb-sxm"), else nvidia-smi's spelling of one
    ("Tesla A10G", "L40S-48GB": ``gpu_names.smi_forms``; a size must be the row's marketed GB)."""
    key = _norm(name)
    if (gid := _find_key(key)) is not None:
        return gid
    for bare, gb in smi_forms(key):
        gid = _find_key(bare)
        if gid is not None and gb in (None, gpu_catalog()[gid].memory_gb_marketed):
            return gid
    return None


def _find_key(key: str) -> str | None:
    if (exact := next((gid for gid in gpu_catalog() if key in _names(gid)), None)) is not None:
        return exact
    same = [gid for gid in gpu_catalog() if _words(key) in {_words(n) for n in _names(gid)}]
    return same[0] if len(same) == 1 else None


def gpu_alias_note(name: str, brief: bool = False) -> str | None:
    """A note when ``name`` is a family name that several catalog rows share and one was picked, e.g. "A100" (the
    80GB SXM4; the 40GB SXM4 and the PCIe cards also answer to every word of it: each word of ``name`` is a word of
    one of their names); None when the name picks one row. ``brief``: the others by --gpu name alone."""
    gid = _find(name)
    if gid is None:
        return None
    words = set(_norm(name).split("-"))
    # the short names only: a full name's extra words ("B200 in GB200 NVL72") would make a family name of every word
    others = [g for g in gpu_catalog() if g != gid and any(words <= set(n.split("-")) for n in _names(g, full=False))]
    if not others:
        return None
    cat = gpu_catalog()
    if brief:
        return f"--gpu {name} → {cat[gid].name} (also --gpu {', '.join(cli_name(g) for g in others)})"
    also = ", ".join(f"{cat[g].name.removeprefix('NVIDIA ')} (--gpu {cli_name(g)})" for g in others)
    return f"--gpu {name} → {cat[gid].name} (also: {also}; name one to choose)"


def get_gpu(name: str) -> GpuSpec:
    """Look up a GPU by catalog id or alias (``H100``, ``h100-sxm``, ``nvidia_h200_sxm``, case-insensitive).

    Raises:
        InputError: ``name`` is not a string. UnknownNameError: unknown name, with the closest names.
    """
    if not isinstance(name, str):
        raise InputError(f"get_gpu(name): a GPU name as a string (H100, h100-sxm, …), got {type(name).__name__}")
    cat = gpu_catalog()
    gid = _find(name)
    if gid is not None:
        return cat[gid]
    from kvledger.catalog.gpu_hint import unknown_gpu_hint

    raise UnknownNameError("GPU", name, list(cat) + [a for v in _ALIASES.values() for a in v], hint=unknown_gpu_hint())


def _size(n_bytes: float) -> str:
    """A byte count in the largest binary unit it reaches (B … TiB), e.g. 1e18 → "909,495 TiB", 2**20 → "1 MiB"."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", MiB), ("KiB", 2**10)):
        if abs(n_bytes) >= scale:
            return f"{fmt_plain(n_bytes / scale)} {unit}"
    return f"{fmt_plain(n_bytes)} B"


def custom_gpu(name: str, memory_bytes: int, hbm_bandwidth_bytes_per_s: float, bf16_flops_per_s: float,
               fp8_flops_per_s: float | None = None, base: GpuSpec | None = None,
               flags: dict[str, str] | None = None) -> GpuSpec:
    """A GPU from user-given figures (memory as CUDA reports it, B; bandwidth, B/s; dense FLOP/s).

    ``flags``: the option each figure came from ("memory" → "--gpu-memory"), so the error names the one to change.

    Raises:
        InputError: a zero, negative or absurd figure.
    """
    for what, v, lo, hi, unit, scale in (("memory", memory_bytes, 1 * MiB, 2**45, "", 1),
                                         ("HBM bandwidth", hbm_bandwidth_bytes_per_s, 1e9, 1e15, " TB/s", 1e12),
                                         ("dense BF16 peak", bf16_flops_per_s, 1e11, 1e18, " TFLOP/s", 1e12)):
        if not (lo <= v <= hi):
            flag = f"{flags[what]}: " if flags and what in flags else ""
            show = _size if what == "memory" else fmt_plain
            raise InputError(f"{flag}GPU {what} {show(v / scale)}{unit} is not plausible (expected "
                             f"{show(lo / scale)}–{show(hi / scale)}{unit})")
    b = base  # its links, power, arch and exact capability (B300's 10.3, not its family's 10.0) are kept
    return GpuSpec("custom", name, memory_bytes / GB, None, int(memory_bytes), "given by the user",
                   hbm_bandwidth_bytes_per_s, bf16_flops_per_s, fp8_flops_per_s, None,
                   b.interconnect if b else "unknown", b.interconnect_bytes_per_s if b else 0.0,
                   b.host_link_bytes_per_s if b else 0.0, b.tdp_w if b else None, b.arch if b else "", "user", "given",
                   "", p2p=b.p2p if b else True, nvlink_all_to_all=b.nvlink_all_to_all if b else False,
                   exact_capability=b.capability if b else None)


def require_link_bytes_per_s(gpu: GpuSpec, kind: str, needed_for: str) -> float:
    """The bidirectional bandwidth of ``gpu``'s link, B/s: ``kind`` "scaleup" (the scale-up link, else the host link,
    as the TP all-reduce falls back) or "host" (PCIe/C2C to host memory).

    Raises:
        InputError: the GPU (a GPU file without ``base``) has no such figure; names the file field to add.
    """
    host = gpu.host_link_bytes_per_s
    bidir = (gpu.interconnect_bytes_per_s or host) if kind == "scaleup" else host
    if bidir > 0:
        return bidir
    origin = f" ({gpu.datasheet_ref})" if gpu.datasheet_ref.startswith("GPU file") else ""
    if kind == "scaleup":
        add = ("interconnect_gb_s = <GB/s> (scale-up link, bidirectional per GPU, e.g. 900 for NVLink 4 on H100 SXM) "
               "or host_link_gb_s = <GB/s> (PCIe, bidirectional, e.g. 64 for Gen4 x16)")
    else:
        add = "host_link_gb_s = <GB/s> (PCIe/C2C to host memory, bidirectional, e.g. 64 for PCIe Gen4 x16)"
    raise InputError(f"GPU {gpu.name!r}{origin} has no link bandwidth, which {needed_for} needs: add {add} to the GPU "
                     f"file, or base = \"<catalog GPU>\" to take its links")

