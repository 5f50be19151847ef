"""Replays the public SGLang start-ups of ``benchmarks/data/sglang_public_startups.csv`` through kvledger's SGLang plan
(``accounting/plan_other.py::sglang_plan`` with the version's defaults from ``sglang_rules.py``): the printed
mem_fraction_static default, the memory free before the weights load, the weights, the KV pool (K + V) and its tokens,
each with the plan's range; and, given the printed memory, the pool's tokens and K/V sizes from SGLang's own rule.

SGLang's rule (``model_runner.py::profile_max_num_token``, every release read): rest = free after the weights − free
before them × (1 − mem_fraction_static); #tokens = floor(rest / cell), cell = bytes per token over all layers, K and V.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

from kvledger.accounting import notes as N
from kvledger.accounting.overheads import NON_TORCH_BYTES
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_rules import parse_sglang_version, sglang_preload_high_bytes, sglang_version_defaults
from kvledger.accounting.sglang_shared_fusion import SGLANG_SHARED_COPIES
from kvledger.accounting.wddm import wddm_held_term, wddm_total
from kvledger.analyses.doctor.public_startups import PublicReplay, PublicTerm, flag_settings, load_rows, topology_label
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB, MiB

__all__ = ["load_rows", "printed_rest_bytes", "replay_sglang_row", "sglang_load_leave_one_out",
           "sglang_load_residual_gib"]

_PRINT_HALF_GIB = 0.005
"""SGLang prints GiB to 2 decimals ("avail mem=21.63 GB"): a printed figure is the true one ± 0.005 GiB."""


def printed_rest_bytes(preload_gib: float, after_load_gib: float, mfs: float) -> tuple[float, float, float]:
    """SGLang's KV budget from its printed figures: after − before × (1 − f), with the low and high ends the 2-decimal
    rounding of both prints allows, B."""
    rest = after_load_gib - preload_gib * (1 - mfs)
    slack = _PRINT_HALF_GIB * (1 + (1 - mfs))
    return rest * GiB, (rest - slack) * GiB, (rest + slack) * GiB


def _f(x: str) -> float | None:
    return float(x) if x not in ("", None) else None


def _plan(model, gpu, kw: dict[str, Any]):
    return build_plan(model, gpu, make_settings(engine="sglang", **kw), with_roofline=False, with_advice=False).memory


def sglang_load_residual_gib(r: dict[str, str], root: Path) -> float | None:
    """What start-up ``r``'s printed "Load weight end. ... mem usage" holds beyond what code sizes (the parameters, the
    RoPE buffer and the segment tails, ``sglang_load.py``), GiB; None where the row prints no load. The plan's measured
    term (``sglang_rules.SGLANG_LOAD_EXTRA_GIB``) is the median of these."""
    if not r["weights_gib"]:
        return None
    cfg = str(root / r["config"]) if r["config"].startswith(("tests/", "benchmarks/")) else r["config"]
    m = _plan(load_model(cfg), resolve_gpu(r["gpu"]), {"engine_version": r["sglang_version"], "tp": int(r["tp"] or 1)})
    items = {i.name: i.bytes for i in m.deductions}
    coded = sum(items.get(k, 0)
                for k in ("weights", N.SGLANG_ROPE_BUFFER, N.SGLANG_SEGMENT_TAILS, SGLANG_SHARED_COPIES))
    return float(r["weights_gib"]) - coded / GiB


def sglang_load_leave_one_out(rows: list[dict[str, str]], root: Path) -> list[tuple[str, float, float]]:
    """Per start-up that prints its load: (id, residual GiB, residual − the median of the others' residuals GiB), the
    error the measured term would make on a start-up it was not fitted on."""
    res = {r["id"]: x for r in rows if (x := sglang_load_residual_gib(r, root)) is not None}
    return [(k, x, x - median(v for j, v in res.items() if j != k)) for k, x in res.items()]


def replay_sglang_row(r: dict[str, str], root: Path) -> PublicReplay:
    """Predict what SGLang start-up ``r`` printed, with the SGLang rules of its version."""
    gpu, tp, ver = resolve_gpu(r["gpu"]), int(r["tp"] or 1), r["sglang_version"]
    cfg = str(root / r["config"]) if r["config"].startswith(("tests/", "benchmarks/")) else r["config"]
    model = load_model(cfg)
    kw: dict[str, Any] = {"engine_version": ver, "tp": tp} | {
        k: v for k, v in flag_settings(r["flags"]).items() if k in ("kv_cache_dtype", "wddm")}
    if r["mem_fraction_static_given"] == "yes":
        kw["mem_fraction_static"] = float(r["mem_fraction_static_printed"])
    m, checks, out = _plan(model, gpu, kw), r["checks"].split(";"), []
    if "defaults" in checks:
        d = sglang_version_defaults(parse_sglang_version(ver), gpu.nvidia_smi_mib or gpu.memory_bytes / MiB, tp)
        out.append(PublicTerm("mem_fraction_static default", d.mem_fraction_static,
                              float(r["mem_fraction_static_printed"]), d.mem_fraction_static, d.mem_fraction_static))
    if "preload" in checks:  # under --wddm: the whole board less the display driver's hold (wddm.py)
        total_lo, total_hi = wddm_total(gpu, bool(kw.get("wddm")))[1:]
        hold = wddm_held_term(gpu) if kw.get("wddm") else None
        lo = total_lo - sglang_preload_high_bytes(tp) - (hold.high_bytes if hold else 0)
        hi = total_hi - NON_TORCH_BYTES - (hold.low_bytes if hold else 0)
        out.append(PublicTerm("free before load", m.requested_bytes / GiB, float(r["preload_avail_gib"]), lo / GiB,
                              hi / GiB))
    items = {i.name: i for i in m.deductions}
    if "weights" in checks:  # SGLang's "mem usage": the parameters, the RoPE buffer, segment tails, the measured rest
        load = [items[k] for k in ("weights", N.SGLANG_ROPE_BUFFER, N.SGLANG_SEGMENT_TAILS, SGLANG_SHARED_COPIES,
                                   N.SGLANG_LOAD_EXTRA) if k in items]
        out.append(PublicTerm("weights", sum(i.bytes for i in load) / GiB, float(r["weights_gib"]),
                              sum(i.low_bytes for i in load) / GiB, sum(i.high_bytes for i in load) / GiB))
    if "available" in checks:
        lo, hi = m.ranges["available_kv_bytes"]
        kv = float(r["k_size_gib"]) + float(r["v_size_gib"])
        out.append(PublicTerm("available KV", m.available_kv_bytes / GiB, kv, lo / GiB, hi / GiB))
    if "tokens" in checks:
        out.append(PublicTerm("KV tokens", m.pool_tokens, float(r["kv_tokens"]), *m.ranges["pool_tokens"]))
    return PublicReplay(r["id"], r["source_url"], f"SGLang {ver}", gpu.name,
                        topology_label(tp, 1, gpu.nvlink_all_to_all), tuple(out),
                        _from_printed(r, model, gpu, kw) if "from_printed" in checks else ())


def _from_printed(r: dict[str, str], model, gpu, kw: dict[str, Any]) -> tuple[PublicTerm, ...]:
    """Given the printed free memory before and after the weights and the printed fraction (the version's default
    where the row does not quote the server_args line): the pool's tokens against the range the 2-decimal prints allow,
    and the printed K size against the plan's from the printed tokens."""
    mfs = _f(r["mem_fraction_static_printed"]) or sglang_version_defaults(
        parse_sglang_version(r["sglang_version"]), gpu.nvidia_smi_mib or gpu.memory_bytes / MiB,
        int(r["tp"] or 1)).mem_fraction_static
    _, lo, hi = printed_rest_bytes(float(r["preload_avail_gib"]), float(r["after_load_avail_gib"]), mfs)
    t_lo, t_hi = (_plan(model, gpu, kw | {"available_kv_memory_bytes": int(x)}).pool_tokens for x in (lo, hi))
    printed = int(r["kv_tokens"])
    m = _plan(model, gpu, kw | {"available_kv_memory_bytes": int(lo)})
    k_gib = round(printed * m.bytes_per_block / m.block_size / 2 / GiB, 2)
    return (PublicTerm("tokens from printed memory", min(max(printed, t_lo), t_hi), printed, t_lo, t_hi),
            PublicTerm("K size from printed tokens", k_gib, float(r["k_size_gib"]), k_gib, k_gib))
