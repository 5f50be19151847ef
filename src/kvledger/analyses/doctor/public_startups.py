"""Replays the public vLLM start-ups of ``benchmarks/data/vllm_public_startups.csv``: each printed term against the plan
for that version, GPU and topology, with the plan's range, bucketed by version, GPU, topology and term."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvledger.accounting.plan import build_plan
from kvledger.accounting.plan_vllm import printed_gib_block_range
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_collectives import non_torch_term
from kvledger.accounting.vllm_rank_print import check_printed_pool
from kvledger.accounting.vllm_rules import parse_version
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.units import GiB

__all__ = ["PublicTerm", "PublicReplay", "SMALLEST_NOT_PRINTED", "flag_settings", "load_rows", "rank_status",
           "replay_row", "topology_label"]


@json_fields(extra=("rel_error", "inside"))
@dataclass(frozen=True)
class PublicTerm:
    """One printed figure against the plan: predicted (point), its low/high, and the printed value, GiB or count."""

    term: str
    predicted: float
    printed: float
    low: float | None = None
    high: float | None = None
    rank_spread: tuple[float, float] | None = None
    """Blocks below the printed rank's range on a version whose pool is the smallest rank's (``vllm_rank_print``), on a
    row whose source holds one rank's memory line ("smallest rank not printed"): how much less memory that smallest
    rank must have held, (low, high) GiB; None otherwise."""
    note: str = ""
    """Why such a figure still follows the engine's rule (the code it is read from); empty otherwise."""
    rank_status: str = ""
    """A from-printed block count: "exact", "miss" or "smallest rank not printed" (``rank_status``); empty for the
    rest."""
    print_half: float = 0.005
    """Half the printed figure's last digit, in its unit (GiB printed to 2 decimals: 0.005; a count: any value below
    one; TensorRT-LLM's "3.44 MB" held in GiB: 0.005 / 1,024)."""

    @property
    def rel_error(self) -> float:
        return (self.predicted - self.printed) / self.printed if self.printed else self.predicted - self.printed

    @property
    def inside(self) -> bool | None:
        """The printed figure lies in the plan's range (widened by the print's own rounding, ``print_half``)."""
        if self.low is None or self.high is None:
            return None
        return self.low - self.print_half <= self.printed <= self.high + self.print_half

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class PublicReplay:
    """One public start-up: its id, buckets (version, GPU, topology) and terms."""

    row_id: str
    source_url: str
    version: str
    gpu: str
    topology: str
    terms: tuple[PublicTerm, ...] = field(default_factory=tuple)
    from_printed: tuple[PublicTerm, ...] = field(default_factory=tuple)
    """Given the printed available memory: the block count the printed tokens imply against the range the 2-decimal
    GiB figure allows, and the printed "Maximum concurrency" against the plan's from those blocks (exact if inside)."""
    usable_gib: float | None = None
    """Device total (printed, else the catalog's) × gpu_memory_utilization (the row's, else vLLM's default 0.9), GiB:
    what the memory terms' error is scaled by (``bucket_error``); None where the GPU is not stated."""


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _f(x: str) -> float | None:
    return float(x) if x not in ("", None) else None


def _gpu(r: dict[str, str]):
    if r["gpu"].startswith("custom:"):  # a GPU not in the catalog: its printed total on a catalog GPU of its family
        g = resolve_gpu(r["gpu"].split(":", 1)[1], memory_bytes=int(float(r["gpu_memory_gib_printed"]) * GiB))
        return replace(g, name=f"custom {r['gpu_memory_gib_printed']} GiB ({g.arch})")
    return resolve_gpu(r["gpu"]) if r["gpu"] else None


def _topology(r: dict[str, str], gpu) -> str:
    return topology_label(int(r["tp"] or 1), int(r["pp"] or 1), gpu is not None and gpu.nvlink_all_to_all)


def topology_label(tp: int, pp: int, all_to_all: bool) -> str:
    """ "TP2 PP1 NVLink all-to-all", "TP1 PP1": the bucket a start-up's topology falls in."""
    link = "" if tp == 1 else (" NVLink all-to-all" if all_to_all else " PCIe/no P2P")
    return f"TP{tp} PP{pp}{link}"


FLAG_SETTINGS = {"kv-cache-dtype": "kv_cache_dtype", "enforce-eager": "enforce_eager",
                 "disable-custom-all-reduce": "disable_custom_all_reduce",
                 "distributed-executor-backend": "distributed_executor_backend", "nnodes": "nnodes",
                 "sampler-backend": "sampler_backend", "wddm": "wddm", "model-runner": "model_runner",
                 "enable-expert-parallel": "enable_expert_parallel"}
"""The row's launch flags that are plan settings (``sampler-backend``: the installation's sampler where the row's build
tells it, ``benchmarks/import_vme_startups.py::release_image_sampler``; ``wddm``: the start-up ran on Windows or WSL2,
whose driver reports the whole board as CUDA's total: ``plan --wddm``; ``model-runner``: VLLM_USE_V2_MODEL_RUNNER as the
source set it, ``plan --model-runner``; ``enable-expert-parallel``: the MoE experts whole over the TP ranks, ``plan
--enable-expert-parallel``); the rest (checkpoint-quantization, async-scheduling, ...) are recorded for the reader
and do not change the plan."""


def flag_settings(flags: str) -> dict[str, Any]:
    """``"kv-cache-dtype=fp8;enforce-eager"`` -> ``{"kv_cache_dtype": "fp8", "enforce_eager": True}``."""
    out: dict[str, Any] = {}
    for f in filter(None, flags.split(";")):
        k, _, v = f.partition("=")
        if k in FLAG_SETTINGS:
            out[FLAG_SETTINGS[k]] = int(v) if k == "nnodes" else (v or True)
    return out


def replay_row(r: dict[str, str], root: Path) -> PublicReplay:
    """Predict what row ``r`` printed, with the vLLM rules of its version."""
    ver, gpu, tp = r["vllm_version"], _gpu(r), int(r["tp"] or 1)
    out: list[PublicTerm] = []
    nt = _f(r["non_torch_gib"])
    if gpu is not None and nt is not None:
        fl = flag_settings(r["flags"])
        t = non_torch_term(parse_version(ver), tp, int(r["pp"] or 1), fl.get("nnodes", 1), gpu,
                           bool(fl.get("disable_custom_all_reduce")), bool(fl.get("enforce_eager")),
                           fl.get("distributed_executor_backend"))
        out.append(PublicTerm("non-torch", t.bytes / GiB, nt, t.low / GiB, t.high / GiB))
    if r["config"]:
        cfg = str(root / r["config"]) if r["config"].startswith(("tests/", "benchmarks/")) else r["config"]
        given_avail = gpu is None
        kw: dict[str, Any] = {"engine_version": ver, "tp": tp, "max_model_len": int(r["max_model_len"])}
        if int(r["pp"] or 1) > 1:  # the plan reports the binding stage, as the row's figures are (SOURCES)
            kw["pp"] = int(r["pp"])
        if r["gpu_memory_utilization"]:
            kw["gpu_memory_utilization"] = float(r["gpu_memory_utilization"])
        if r["max_num_seqs"]:
            kw["max_num_seqs"] = int(r["max_num_seqs"])
        if r["max_num_batched_tokens"]:
            kw["max_num_batched_tokens"] = int(r["max_num_batched_tokens"])
        kw |= flag_settings(r["flags"])
        if given_avail:
            kw["available_kv_memory_bytes"] = int(float(r["available_kv_gib"]) * GiB)
        elif _f(r["weights_gib"]) is not None and "weights" not in r["checks"]:  # e.g. a quantized checkpoint
            kw["weights_bytes"] = int(float(r["weights_gib"]) * GiB)
        p = build_plan(load_model(cfg), gpu or resolve_gpu("h100"), make_settings(**kw), with_roofline=False,
                       with_advice=False)
        m, rng = p.memory, p.memory.ranges
        items = {i.name.split(" (")[0]: i for i in m.deductions}
        for term, key in (("weights", "weights"), ("activation", "activation peak")):
            if _f(r[f"{term}_gib"]) is not None and term in r["checks"]:
                i = items[key]
                out.append(PublicTerm(key, i.bytes / GiB, float(r[f"{term}_gib"]), i.low_bytes / GiB,
                                      i.high_bytes / GiB))
        if "available" in r["checks"]:
            lo, hi = rng["available_kv_bytes"]
            out.append(PublicTerm("available KV", m.available_kv_bytes / GiB, float(r["available_kv_gib"]), lo / GiB,
                                  hi / GiB))
        if "blocks" in r["checks"] and r["gpu_blocks"]:
            out.append(PublicTerm("blocks", m.num_gpu_blocks, float(r["gpu_blocks"]), *rng["num_gpu_blocks"]))
        if "tokens" in r["checks"] and r["kv_tokens"]:
            out.append(PublicTerm("KV tokens", m.pool_tokens, float(r["kv_tokens"]), *rng["pool_tokens"]))
        if "startup" in r["checks"] and m.startup is not None:  # --wddm: the printed "Free memory on device (x/y GiB)"
            st = m.startup
            out.append(PublicTerm("free at start-up", st.free_bytes / GiB, float(r["free_at_startup_gib"]),
                                  st.free_low_bytes / GiB, st.free_high_bytes / GiB))
        if "concurrency" in r["checks"] and r["max_concurrency"] and p.at_max_model_len:
            c = round(p.at_max_model_len.max_concurrency, 2)
            out.append(PublicTerm("max concurrency", c, float(r["max_concurrency"]),
                                  *(round(x, 2) for x in rng["max_concurrency"])))
    exact = _from_printed(r, load_model(cfg), gpu, kw) if r["config"] and gpu is not None else ()
    usable = None if gpu is None else (
        (_f(r["gpu_memory_gib_printed"]) or gpu.memory_bytes / GiB) * (_f(r["gpu_memory_utilization"]) or 0.9))
    return PublicReplay(r["id"], r["source_url"], ver, gpu.name if gpu else "not stated", _topology(r, gpu), tuple(out),
                        exact, usable)


def _from_printed(r: dict[str, str], model, gpu, kw: dict[str, Any]) -> tuple[PublicTerm, ...]:
    """Blocks and concurrency from the printed available memory and tokens (see ``PublicReplay.from_printed``). The
    memory is the smallest rank's where the row records it (``available_kv_gib_min_rank``: the source printed every
    rank's line), so the pool must follow exactly; else the one printed line's."""
    if not (r["available_kv_gib"] and r["kv_tokens"]) or int(r["pp"] or 1) > 1:
        return ()
    min_rank = _f(r.get("available_kv_gib_min_rank", ""))
    gib = float(r["available_kv_gib"]) if min_rank is None else min_rank
    kw = {k: v for k, v in kw.items() if k != "weights_bytes"} | {"available_kv_memory_bytes": round(gib * GiB)}
    m = build_plan(model, gpu, make_settings(**kw), with_roofline=False, with_advice=False).memory
    lo, hi = printed_gib_block_range(kw["available_kv_memory_bytes"], m.bytes_per_block)
    # the printed tokens line inverted by the version's own rule (vllm_rules.printed_capacity_lines, read from
    # kv_cache_utils.py::_report_kv_cache_config): 0.10 prints (blocks // KV cache groups) × block_size, so a hybrid
    # model's two groups (gpt-oss: sliding and full) hold twice the blocks the tokens / block_size reading gives
    per_token = m.num_gpu_blocks / m.pool_tokens if m.pool_tokens else 1 / m.block_size
    blocks = round(int(r["kv_tokens"]) * per_token)
    chk = check_printed_pool(parse_version(r["vllm_version"]), int(r["tp"] or 1), gib, blocks, m.bytes_per_block,
                             lo, hi)
    spread, status = None, rank_status(chk.verdict, min_rank is not None, r.get("rank_memory", ""))
    if status == SMALLEST_NOT_PRINTED:
        spread = (chk.spread_low / GiB, chk.spread_high / GiB)
    out = [PublicTerm("blocks from printed memory", min(max(blocks, lo), hi), blocks, lo, hi, spread,
                      chk.why if spread else "", rank_status=status)]
    if r["max_concurrency"]:
        p = build_plan(model, gpu, make_settings(**kw | {"num_gpu_blocks_override": blocks}), with_roofline=False,
                       with_advice=False)
        if p.at_max_model_len:
            c = round(p.at_max_model_len.max_concurrency, 2)
            out.append(PublicTerm("concurrency from printed memory", c, float(r["max_concurrency"]), c, c))
    return tuple(out)


SMALLEST_NOT_PRINTED = "smallest rank not printed"


def rank_status(verdict: str, min_rank_given: bool, rank_memory: str) -> str:
    """How a from-printed block count is counted: "exact" (inside the printed figure's range), "smallest rank not
    printed" (below it where the version's pool is the smallest rank's and the row records that its source holds one
    rank's memory line only, ``rank_memory`` "one rank…"), or "miss". A row giving the smallest rank's memory is exact
    or a miss; a row that does not say its source holds one rank's line is a miss too: nothing is explained by
    default."""
    if verdict == "exact":
        return "exact"
    if verdict == "smallest rank" and not min_rank_given and rank_memory.startswith("one rank"):
        return SMALLEST_NOT_PRINTED
    return "miss"
