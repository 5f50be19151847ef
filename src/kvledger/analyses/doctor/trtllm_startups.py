"""Replays the public TensorRT-LLM start-ups of ``benchmarks/data/trtllm_public_startups.csv`` through kvledger's
TensorRT-LLM plan (``accounting/plan_other.py::trtllm_plan``): the KV memory planned from the config alone against the
printed "[MemUsageChange] Allocated … GiB for max tokens in paged KV cache (N)", and, given the printed memory, the
fraction rule and the pool's blocks.

TensorRT-LLM's rules, as the plan reads them: the TensorRT-engine executor (``kvCacheManager.cpp::
calculateMaxNumBlocks``) takes free_gpu_memory_fraction of the free memory it prints as "available" once the engine is
loaded; the PyTorch backend (``_torch/pyexecutor/_util.py::KvCacheCreator``) takes it of what its dry run leaves. Tokens
= ⌊memory ÷ bytes per token⌋, blocks = tokens ÷ tokens per block, rounded as ``plan_other.trtllm_blocks_round_up`` says;
the log's "(N)" is blocks × tokens per block.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvledger.accounting.plan import build_plan
from kvledger.accounting.plan_other import trtllm_blocks_round_up
from kvledger.accounting.settings import make_settings
from kvledger.analyses.doctor.public_startups import PublicReplay, PublicTerm, load_rows, topology_label
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB

__all__ = ["load_rows", "replay_trtllm_row", "trtllm_leave_one_out", "trtllm_residual_gib"]

_PRINT_HALF_GIB = 0.005
"""TensorRT-LLM prints GiB to 2 decimals ("available: 17.83 GiB", "Allocated 16.05 GiB"): ± 0.005 GiB."""


def _f(x: str) -> float | None:
    return float(x) if x not in ("", None) else None


def _gpu(r: dict[str, str]):
    """The row's GPU with the total it printed (or, for a card outside the catalog, its stated size) as its memory."""
    base = r["gpu"].split(":", 1)[-1]
    total = _f(r["gpu_memory_gib_printed"])
    g = resolve_gpu(base, memory_bytes=int(total * GiB) if total is not None else None)
    return replace(g, name=f"custom {total} GiB ({g.arch})") if r["gpu"].startswith("custom:") else g


def _memory(model, gpu, kw: dict[str, Any], kv_bytes: float | None = None):
    extra = {} if kv_bytes is None else {"available_kv_memory_bytes": int(kv_bytes)}
    return build_plan(model, gpu, make_settings(engine="trtllm", **kw, **extra), with_roofline=False,
                      with_advice=False).memory


def _printed_blocks(r: dict[str, str]) -> int:
    if r["blocks_printed"]:
        return int(r["blocks_printed"])
    return int(r["kv_tokens_printed"]) // int(r["tokens_per_block"])


def replay_trtllm_row(r: dict[str, str], root: Path) -> PublicReplay:
    """Predict what TensorRT-LLM start-up ``r`` printed, with the rules of its version and runtime."""
    gpu, tp, ver, runtime = _gpu(r), int(r["tp"] or 1), r["trtllm_version"] or None, r["runtime"]
    frac, tpb, checks = float(r["free_gpu_memory_fraction"]), int(r["tokens_per_block"]), r["checks"].split(";")
    avail_printed, kv_printed = _f(r["available_gib_printed"]), _f(r["kv_gib_printed"])
    terms: list[PublicTerm] = []
    from_printed: list[PublicTerm] = []
    if "fraction" in checks:  # the executor's KV memory: the fraction of the free memory it printed
        a = avail_printed or 0.0
        from_printed.append(PublicTerm("KV memory from printed free memory", a * frac, kv_printed or 0.0,
                                       (a - _PRINT_HALF_GIB) * frac, (a + _PRINT_HALF_GIB) * frac))
    if r["config"]:
        cfg = str(root / r["config"]) if r["config"].startswith(("tests/", "benchmarks/")) else r["config"]
        model = load_model(cfg)
        kw: dict[str, Any] = {"engine_version": ver, "trtllm_backend": runtime, "tp": tp,
                              "free_gpu_memory_fraction": frac, "block_size": tpb}
        if r["max_num_tokens"]:
            kw["max_num_batched_tokens"] = int(r["max_num_tokens"])
        if r["max_seq_len"]:
            kw["max_model_len"] = int(r["max_seq_len"])
        kw.update(_flag_settings(r["flags"]))
        if "available" in checks and (kv_printed is not None or avail_printed is not None):
            terms += _available_terms(r, _memory(model, gpu, kw), tpb, frac)
        if "buffers" in checks:
            terms += _buffer_terms(r, _memory(model, gpu, kw))
        if "tokens" in checks:
            from_printed += _blocks_from_printed(r, model, gpu, kw, frac)
    return PublicReplay(r["id"], r["source_url"], f"TensorRT-LLM {ver or 'version not stated'} ({runtime})", gpu.name,
                        topology_label(tp, 1, gpu.nvlink_all_to_all), tuple(terms), tuple(from_printed))


def _available_terms(r: dict[str, str], m, tpb: int, frac: float) -> list[PublicTerm]:
    """The KV memory and tokens planned from the config alone against the printed ones; where the log prints no
    "Allocated … GiB for max tokens" line, against the printed free memory × the fraction (what the executor gives the
    cache, ± its rounding) and the printed blocks × tokens per block."""
    kv = _f(r["kv_gib_printed"])
    half = 0.005 if kv is not None else 0.005 * frac
    kv = kv if kv is not None else float(r["available_gib_printed"]) * frac
    tokens = int(r["kv_tokens_printed"]) if r["kv_tokens_printed"] else _printed_blocks(r) * tpb
    (a_lo, a_hi), (b_lo, b_hi) = m.ranges["available_kv_bytes"], m.ranges["num_gpu_blocks"]
    return [PublicTerm("available KV", m.available_kv_bytes / GiB, kv, a_lo / GiB, a_hi / GiB, print_half=half),
            PublicTerm("KV tokens", m.num_gpu_blocks * tpb, tokens, b_lo * tpb, b_hi * tpb)]


_FLAGS = {"kv-cache-dtype": ("kv_cache_dtype", str), "max-batch-size": ("max_num_seqs", int),
          "cuda-graph-max-batch-size": ("cuda_graph_max_batch_size", int), "logits-dtype": ("trtllm_logits_dtype", str)}
"""The row's ``flags`` (``name=value;…``) that change a planned term, and the plan setting each one sets."""


def _flag_settings(flags: str) -> dict[str, Any]:
    """``kv-cache-dtype=fp8;max-batch-size=4096;wddm`` → the plan settings (``wddm``: Windows or WSL2)."""
    out: dict[str, Any] = {}
    for f in filter(None, flags.split(";")):
        name, _, value = f.partition("=")
        if name == "wddm":
            out["wddm"] = True
        elif name in _FLAGS:
            key, kind = _FLAGS[name]
            out[key] = kind(value)
    return out


_BUFFER_LINES = (("runtime buffers", "runtime_buffers_gib_printed", "executor runtime buffers"),
                 ("decoder buffers", "decoder_gib_printed", "decoder buffers"))
"""(term, column, the plan deduction's name prefix): the TensorRT-engine executor's "Allocated X GB GPU memory for
runtime buffers" and "… for decoder" lines against the plan's code-sized terms (``trtllm_engine_buffers``)."""


def _buffer_terms(r: dict[str, str], m) -> list[PublicTerm]:
    """The printed runtime-buffer and decoder figures (GiB: ``MemoryCounters`` prints binary units as "GB") against
    the plan's deductions and their ranges."""
    out = []
    for term, col, prefix in _BUFFER_LINES:
        if r[col]:
            d, printed = next(d for d in m.deductions if d.name.startswith(prefix)), float(r[col])
            half = 0.005 if printed >= 1 else 0.005 / 1024  # below 1 GiB MemoryCounters prints "MB" (MiB), 2 decimals
            out.append(PublicTerm(term, d.bytes / GiB, printed, d.low_bytes / GiB, d.high_bytes / GiB,
                                  print_half=half))
    return out


def trtllm_residual_gib(r: dict[str, str], root: Path) -> float | None:
    """What start-up ``r``'s printed figures leave beyond the terms the plan sizes, GiB: the device total − the free
    memory it implies (the engine's printed free memory, or the printed KV memory ÷ the fraction: (total − peak) ×
    fraction) − every sized deduction (weights, forward, non-torch, CUDA-graph pool, WDDM hold); None without a config
    or a printed memory. PyTorch backend: the plan's fitted term (``trtllm_terms.TRTLLM_EXTRA_GIB``) is the mean of
    these by set-up. TensorRT-engine executor: what the row leaves for the uncounted rest
    (``trtllm_engine_buffers.TRTLLM_ENGINE_OTHER_GIB``, fitted on logs outside this corpus) once the code-sized runtime
    buffers and decoder are taken."""
    avail, kv = _f(r["available_gib_printed"]), _f(r["kv_gib_printed"])
    if not r["config"] or (avail is None and kv is None):
        return None
    cfg = str(root / r["config"]) if r["config"].startswith(("tests/", "benchmarks/")) else r["config"]
    kw: dict[str, Any] = {"engine_version": r["trtllm_version"] or None, "trtllm_backend": r["runtime"],
                          "tp": int(r["tp"] or 1), "free_gpu_memory_fraction": float(r["free_gpu_memory_fraction"]),
                          "block_size": int(r["tokens_per_block"]), **_flag_settings(r["flags"])}
    if r["max_num_tokens"]:
        kw["max_num_batched_tokens"] = int(r["max_num_tokens"])
    if r["max_seq_len"]:
        kw["max_model_len"] = int(r["max_seq_len"])
    m = _memory(load_model(cfg), _gpu(r), kw)
    free = avail if avail is not None else kv / float(r["free_gpu_memory_fraction"])
    sized = sum(d.bytes for d in m.deductions if "fitted" not in d.name and not d.name.startswith("reserve"))
    return (m.gpu_total_bytes - sized) / GiB - free


def trtllm_leave_one_out(rows: list[dict[str, str]], root: Path) -> list[tuple[str, str, float, float]]:
    """Per PyTorch-backend start-up with a config and a printed memory: (id, runtime, residual GiB, the fitted term left
    out of its own set-up GiB) — the mean residual of the other set-ups (a set-up: one source, GPU and model; its
    start-ups' residuals averaged first). Planned KV memory moves by (fitted − left-out) × the fraction. The
    TensorRT-engine rows fit nothing here (their one fitted term comes from logs outside the corpus)."""
    rows = [r for r in rows if r["runtime"] == "pytorch"]
    res = {r["id"]: trtllm_residual_gib(r, root) for r in rows}
    setups: dict[tuple[str, str, str, str], list[float]] = {}
    for r in rows:
        if res[r["id"]] is not None:
            setups.setdefault((r["runtime"], r["source_url"], r["gpu"], r["config"]), []).append(res[r["id"]])
    out = []
    for r in rows:
        if res[r["id"]] is None:
            continue
        own = (r["runtime"], r["source_url"], r["gpu"], r["config"])
        others = [sum(v) / len(v) for k, v in setups.items() if k != own]
        out.append((r["id"], r["runtime"], res[r["id"]], sum(others) / len(others) if others else float("nan")))
    return out


def _blocks_from_printed(r: dict[str, str], model, gpu, kw: dict[str, Any], frac: float) -> list[PublicTerm]:
    """Given the printed memory (the executor's free memory × the fraction, or the printed KV memory): the printed
    blocks against the range the 2-decimal figure allows; given a printed max_tokens, the blocks exactly."""
    avail, kv = _f(r["available_gib_printed"]), _f(r["kv_gib_printed"])
    lo_gib, hi_gib = (((avail - _PRINT_HALF_GIB) * frac, (avail + _PRINT_HALF_GIB) * frac) if avail is not None
                      else (kv - _PRINT_HALF_GIB, kv + _PRINT_HALF_GIB))
    b_lo, b_hi = (_memory(model, gpu, kw, g * GiB).num_gpu_blocks for g in (lo_gib, hi_gib))
    printed = _printed_blocks(r)
    out = [PublicTerm("blocks from printed memory", min(max(printed, b_lo), b_hi), printed, b_lo, b_hi)]
    if r["max_tokens_printed"]:  # the estimate TensorRT-LLM printed: its blocks follow from the rounding alone
        t, tpb = int(r["max_tokens_printed"]), int(r["tokens_per_block"])
        up = trtllm_blocks_round_up(r["runtime"], r["trtllm_version"] or None)
        b = math.ceil(t / tpb) if up else t // tpb
        out.append(PublicTerm("blocks from printed max_tokens", b, printed, b, b))
    return out
