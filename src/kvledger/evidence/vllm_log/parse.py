"""Reading one start-up of a vLLM server log: every line is tried against the start-up, metrics and preemption rules;
the rest is skipped.

``parse_one_startup`` never fails on content: unknown lines are counted and skipped, and a log from
another engine comes back with ``engine`` set to that engine. ``restarts.parse_vllm_log`` splits a log at each
start-up; ``files.read_vllm_log`` reads a file and raises a clear error when it is not a vLLM log at all.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kvledger.evidence.vllm_log.engines import ENGINE_NAMES, other_engine_hits
from kvledger.evidence.vllm_log.failures import (
    SERVING_READY,
    VLLM_FAILURES,
    cause_in_lines,
    failure_on_line,
    graph_capture_frame,
    profile_frame,
)
from kvledger.evidence.vllm_log.lines import Segment, seconds_of, segments
from kvledger.evidence.vllm_log.not_log import not_a_log
from kvledger.evidence.vllm_log.override import OverrideLine, split_overrides
from kvledger.evidence.vllm_log.serving_end import alive_or_shutdown, crash_failures, serving_end
from kvledger.evidence.vllm_log.startup import NOTICES, apply_rules, oom_device_total, unreadable_figure
from kvledger.evidence.vllm_log.stats import format_markers, parse_preemption, parse_stats, parse_v0_prefix_line
from kvledger.evidence.vllm_log.types import PreemptionEvent, StartupFacts, StatsSample, VllmLog
from kvledger.evidence.vllm_log.version import infer_generation, infer_version, rules_version
from kvledger.units import GiB

__all__ = ["parse_one_startup"]


_DP_RANK = re.compile(r"EngineCore_(?:DP)?(\d+)\b")
_RANK_FIELDS = {"kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "available_kv_bytes"}


class _Collector:
    """Start-up facts as they are found: the first value of each field wins, except available KV memory
    where workers may differ and vLLM sizes every worker's pool by the minimum (kv_cache_utils.py)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.lines: dict[str, int] = {}
        self.notes: list[str] = []
        self.markers: set[str] = set()
        self.sources: set[str] = set()
        self.workers: list[str] = []
        self.version_where: str | None = None
        self.overrides: list[OverrideLine] = []
        self.field_workers: dict[str, str] = {}
        self.unreadable: list[tuple[int, str, str]] = []
        self.dp_ranks: dict[str, dict[str, tuple[float, int]]] = {}

    def add(self, result: dict[str, Any], seg: Segment) -> None:
        note, marker = result.pop("_note", None), result.pop("_marker", None)
        if (override := result.pop("_override", None)) is not None:
            self.overrides.append(OverrideLine(seg.line_no, *override))
        if note and note not in self.notes:
            self.notes.append(note)
        if marker:
            self.markers.add(marker)
        if (notice := result.pop("_notice", None)) is not None:  # startup.NOTICES: a marker and its first line
            self.markers.add(notice)
            self.lines.setdefault(notice, seg.line_no)
        if (rank := _DP_RANK.match(seg.worker or "")) is not None:  # each DP engine sizes its own pool (core.py)
            for key in _RANK_FIELDS & result.keys():
                self.dp_ranks.setdefault(rank.group(1), {}).setdefault(key, (result[key], seg.line_no))
        for key, value in result.items():
            old = self.values.get(key)
            if key == "available_kv_bytes" and old is not None and value < old:
                self.notes.append(f"workers printed different available KV memory ({old / GiB:.2f} and "
                                  f"{value / GiB:.2f} GiB, "
                                  f"line {seg.line_no}); vLLM sizes every worker's pool by the minimum")
                self.values[key], self.lines[key] = value, seg.line_no
                self._worker_of(key, seg)
            elif old is None:
                self.values[key], self.lines[key] = value, seg.line_no
                self._worker_of(key, seg)
                if key == "vllm_version":
                    self.version_where = f"line {seg.line_no}"

    def _worker_of(self, key: str, seg: Segment) -> None:
        if seg.worker:
            self.field_workers[key] = seg.worker
        else:
            self.field_workers.pop(key, None)

    def see(self, seg: Segment) -> None:
        if seg.src:
            self.sources.add(seg.src)
            name = seg.src.split(":")[0]
            if name in ("gpu_worker.py", "gpu_model_runner.py", "kv_cache_utils.py", "loggers.py"):
                self.markers.add("v1_src")
            elif name in ("worker.py", "model_runner.py", "executor_base.py", "llm_engine.py", "metrics.py"):
                self.markers.add("v0_src")
        if seg.worker and seg.worker not in self.workers:
            self.workers.append(seg.worker)
            if seg.worker.startswith(("EngineCore", "Worker_TP")):
                self.markers.add("v1_src")
            elif seg.worker.startswith(("VllmWorkerProcess", "RayWorkerWrapper")):
                self.markers.add("v0_src")
        if "GPU KV cache size" in seg.message and "Maximum concurrency" in seg.message:
            self.markers.add("one_line_capacity")
        if "In v0.19, CUDA graph memory profiling will be enabled by default" in seg.message:
            self.markers.add("pre_0.19_cudagraph_notice")


def _derive(c: _Collector) -> None:
    """Fields vLLM implies but does not print, each with a note."""
    v, lines = c.values, c.lines
    if (note := oom_device_total(v, lines, c.field_workers)) is not None:  # before the requested memory below
        c.notes.append(note)
    if (
        v.get("activation_peak_bytes") is None
        and v.get("peak_torch_memory_bytes") is not None
        and v.get("weights_bytes") is not None
    ):
        v["activation_peak_bytes"] = v["peak_torch_memory_bytes"] - v["weights_bytes"]
        lines["activation_peak_bytes"] = lines["peak_torch_memory_bytes"]
        c.notes.append("activation peak = peak_torch_memory − weights (V0 0.6 prints the torch peak including the "
                       "weights)")
    if v.get("requested_memory_bytes") is None and v.get("total_gpu_memory_bytes") and v.get("gpu_memory_utilization"):
        # computed, not printed: no line is cited for it
        v["requested_memory_bytes"] = int(v["total_gpu_memory_bytes"] * v["gpu_memory_utilization"])
        c.notes.append(
            "requested memory = total_gpu_memory × gpu_memory_utilization (as vLLM computes it; not printed)"
        )
    if v.get("kv_cache_dtype") is None and "fp8_kv_notice" in c.markers:  # cache.py, when no echo names the dtype
        v["kv_cache_dtype"], lines["kv_cache_dtype"] = "fp8", lines["fp8_kv_notice"]
        c.notes.append(f"kv_cache_dtype fp8: line {lines['fp8_kv_notice']} '{NOTICES['fp8_kv_notice']}' "
                       "(no settings echo names the dtype; every fp8 variant stores 1 B a value)")
    if "wsl" in c.markers:
        c.notes.append(f"line {lines['wsl']}: the server ran under WSL2, whose display driver (WDDM) reports the whole "
                       "board as CUDA's total and holds part of it; `kvledger plan --wddm` plans such a host")
    if v.get("max_model_len") is None:
        for src in ("concurrency_context_tokens", "error_max_model_len"):
            if v.get(src) is not None:
                v["max_model_len"], lines["max_model_len"] = v[src], lines[src]
                c.notes.append(f"max_model_len {v[src]:,} tokens: from line {lines[src]} (vLLM reports capacity for "
                               f"max_model_len)")
                break


def _take_override(c: _Collector, version: str | None, generation: str | None) -> None:
    """The user's num_gpu_blocks_override from the override lines (unless the args echo gave it), with a note for
    each line that is vLLM's CUDA-graph profiling pass instead (override.py)."""
    real, profiling, unread = split_overrides(c.overrides, version, generation)
    for blocks in dict.fromkeys(o.override_blocks for o in profiling):
        at = [o.line_no for o in profiling if o.override_blocks == blocks]
        c.notes.append(f"line{'s' if len(at) > 1 else ''} {', '.join(map(str, at))}: 'Overriding num_gpu_blocks=0 with "
                       f"num_gpu_blocks_override={blocks}' is vLLM's CUDA-graph memory profiling on a temporary "
                       f"{blocks}-block "
                       "cache (gpu_model_runner.py::_init_minimal_kv_cache_for_profiling, vLLM 0.18–0.19), not a "
                       "--num-gpu-blocks-override setting: not used")
    for o in unread:
        c.notes.append(f"line {o.line_no}: 'Overriding num_gpu_blocks=0 with num_gpu_blocks_override="
                       f"{o.override_blocks}': a computed count of 0 blocks is not read as the pool (vLLM 0.18–0.19 "
                       "log it for their CUDA-graph memory profiling; a --num-gpu-blocks-override setting is read from "
                       "the non-default args echo): not used")
    if real is not None and c.values.get("num_gpu_blocks_override") is None:
        c.values["num_gpu_blocks_override"], c.lines["num_gpu_blocks_override"] = real.override_blocks, real.line_no


def _relative(stats: list[StatsSample], events: list[PreemptionEvent]) -> tuple[list[StatsSample],
                                                                                list[PreemptionEvent]]:
    raw = [x.t_s for x in (*stats, *events) if x.t_s is not None]
    if not raw:
        return stats, events
    t0 = min(x.t_s for x in stats if x.t_s is not None) if any(s.t_s is not None for s in stats) else min(raw)

    def fix(x: Any) -> Any:
        return replace(x, t_s=None if x.t_s is None else x.t_s - t0)

    return [fix(s) for s in stats], [fix(e) for e in events]


def _scan(lines: list[str], first: int) -> tuple[_Collector, list[StatsSample], list[PreemptionEvent], dict[str, Any]]:
    c, stats, events = _Collector(), [], []
    # the lines before the start-up count in its total (numbered as in the file), read as nothing
    info: dict[str, Any] = {"total": first - 1, "vllm": 0, "other": {}, "other_first": {}, "failures": [],
                            "ready": None, "headed": 0, "cut": [], "alive": None, "shutdowns": []}
    for n, raw in enumerate(lines, start=first):
        info["total"] += 1
        used = False
        segs = segments(n, raw)
        info["headed"] += any(seg.src for seg in segs)
        for seg in segs:
            t = seconds_of(seg.time_text)
            s = parse_stats(seg.message, n, seg.time_text, t)
            if s is not None:
                stats.append(s)
                c.markers |= {"v0_stats"} if s.swapped_reqs is not None else {"v1_stats", *format_markers(seg.message)}
                used = True
            elif "Avg prompt throughput: " in seg.message:
                info["cut"].append(n)
            elif (p := parse_v0_prefix_line(seg.message, stats[-1] if stats else None)) is not None:
                stats[-1], used = p, True
            elif (e := parse_preemption(seg.message, n, seg.time_text, t)) is not None:
                events.append(e)
                c.markers.add("v0_preemption" if e.kind == "preempted" else "v1_src")
                used = True
            for result in apply_rules(seg.message):
                c.add(result, seg)
                used = True
            if (bad := unreadable_figure(seg.message)) is not None:
                c.unreadable.append((n, *bad))
                used = True
            if used:
                c.see(seg)
        if info["ready"] is None and SERVING_READY.search(raw):
            info["ready"] = n
        if (end := alive_or_shutdown(raw)) == "alive":
            info["alive"] = n
        elif end == "shutdown":
            info["shutdowns"].append(n)
        if (fail := failure_on_line(n, raw)) is not None:
            info["failures"].append(fail)
            used = used or fail.kind in VLLM_FAILURES
        if used:
            info["vllm"] += 1
        elif (eng := other_engine_hits(raw)) is not None:
            info["other"][eng] = info["other"].get(eng, 0) + 1
            info["other_first"].setdefault(eng, f"line {n}: {raw.strip()[:160]}")
    return c, stats, events, info


def parse_one_startup(lines: list[str], source: str = "<text>", first: int = 1) -> VllmLog:
    """Read one start-up of a vLLM server log (any version from 0.5 on; see startup.py and stats.py for the formats):
    its lines, ``lines[0]`` the file's line ``first`` (every line number read is the file's). Lines as `grep -n`
    counts them: only "\n" ends one (progress bars' bare "\r" and other separators that str.splitlines() also breaks
    on stay inside their line). ``restarts.parse_vllm_log`` splits a log once and calls this on each start-up's."""
    c, stats, events, info = _scan(lines, first)
    _derive(c)
    stats, events = _relative(stats, events)
    version, vsrc = infer_version(c.values.pop("vllm_version", None), c.version_where, c.sources, c.markers)
    generation = infer_generation(c.values.pop("engine_generation", None), version, c.markers)
    rules, why = rules_version(version, generation, c.markers)
    _take_override(c, version, generation)
    startup = StartupFacts(vllm_version=version, engine_generation=generation, workers=tuple(c.workers),
                           lines=dict(c.lines), notes=tuple(c.notes), field_workers=dict(c.field_workers),
                           unreadable=tuple(c.unreadable), dp_ranks=dict(sorted(c.dp_ranks.items())), **c.values)
    if info["vllm"]:
        engine, evidence = "vllm", None
    elif info["other"]:
        engine = max(info["other"], key=info["other"].get)
        evidence = info["other_first"][engine]
    else:
        engine, evidence = "unknown", None
    notes = [f"also holds {n} {ENGINE_NAMES[e]} line(s)" for e, n in info["other"].items() if engine == "vllm"]
    fails = info["failures"]
    serving = min((x for x in (info["ready"], *(s.line_no for s in stats[:1]), *(e.line_no for e in events[:1]))
                   if x is not None), default=None)
    last_alive = max((x for x in (info["alive"], *(s.line_no for s in stats[-1:]), *(e.line_no for e in events[-1:]))
                      if x is not None), default=None)
    end = serving_end(fails, serving, last_alive, info["shutdowns"], lines, first)
    # the root cause of the failure that ended the log: after the server started serving, when it died then
    crash = crash_failures(fails, serving, end.excused)
    after = serving if crash else 0
    first_tb = next((f.line_no for f in fails if f.kind == "traceback" and f.line_no > after
                     and f.line_no not in end.excused), None)
    cause = cause_in_lines(lines, first_tb, first) if first_tb is not None else None
    in_profile = profile_frame(lines, first_tb, cause[0], first) if first_tb is not None and cause else None
    in_graphs = graph_capture_frame(lines, first_tb, cause[0], first) if first_tb is not None and cause else None
    return VllmLog(source, engine, evidence, version, vsrc, generation, rules, why, startup, tuple(stats),
                   tuple(events),
                   info["total"], info["vllm"], info["total"] - info["vllm"], tuple(notes), tuple(fails), cause,
                   serving, not_a_log(lines, info["headed"], first), tuple(info["cut"]), in_profile,
                   end.request_errors,
                   cause_in_lines(lines, end.request_errors[0], first) if end.request_errors else None, end.excused,
                   end.stopped_line, failure_in_graph_capture=in_graphs)
