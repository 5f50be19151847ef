"""DistServe's measured vLLM runs (OPT-13B, one A100-SXM-80GB, ShareGPT lengths): workload plus measured outcome.

Each ``vllm-<N>-<rate>.exp`` file (bundled; see ``data/SOURCES.md``) is a real serving run: N requests
issued at Poisson rate ``<rate>`` req/s, with each request's prompt and output length, issue time, first-
token time and completion time. ``load_distserve_run`` returns the workload as ``RequestSpec`` (to replay
through the simulator) and the measurement as ``RunRecords`` (to compare against), both on one clock whose
zero is the first issue time. The file's ``ttft_ms`` equals (first_token_time − issue_time)·1000 and its
``tpot_ms`` equals (complete_time − first_token_time)·1000 / (output_len − 1), the canonical definitions of
:mod:`kvledger.records`, so the records reproduce them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import FormatError, InputError, UnknownNameError
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["DistServeRun", "list_distserve_runs", "load_distserve_run", "DISTSERVE_VLLM_SETTINGS", "DISTSERVE_LAUNCH"]

_NAME = re.compile(r"^(?P<system>[a-z]+)-(?P<n>\d+)-(?P<rate>\d+(?:\.\d+)?)$")
_KEYS = ("prompt_len", "output_len", "issue_time", "first_token_time", "complete_time", "ttft_ms", "tpot_ms")

#: How DistServe launched vLLM for these runs: LLMServe/DistServe
#: ``evaluation/2-benchmark-serving/2-start-api-server.py`` (``vllm.entrypoints.api_server`` with
#: ``--engine-use-ray --worker-use-ray``), on vLLM v0.2.3 "with some minor changes" (DistServe's
#: reproduction notes: interestingLSY/vllm, branch ``distserve-baseline-vllm``): the V0 engine, with
#: prefill-first scheduling, no chunked prefill, recompute preemption and padded prompt batches
#: (``max_paddings`` left at v0.2.3's default, 256). Simulate it with ``batching="vllm_v0"``.
DISTSERVE_VLLM_SETTINGS: dict[str, object] = {
    "model": "facebook/opt-13b", "dtype": "float16", "tensor_parallel_size": 1, "block_size": 16,
    "gpu_memory_utilization": 0.95, "swap_space_gib": 16, "max_num_batched_tokens": 16384, "max_num_seqs": 1024,
    "max_paddings": 256, "enable_chunked_prefill": False, "gpu": "A100-SXM-80GB", "vllm_version": "0.2.3",
}

DISTSERVE_LAUNCH_SCRIPT = "DistServe's launch script evaluation/2-benchmark-serving/2-start-api-server.py"
#: The same launch as the flags of vLLM 0.2.3's ``vllm.entrypoints.api_server`` (``engine/arg_utils.py``), the run
#: record ``validate``/``calibrate`` read (``calibration.run_record``): what the server was started with.
DISTSERVE_LAUNCH: dict[str, object] = {
    "model": "facebook/opt-13b", "dtype": "float16", "tensor_parallel_size": 1, "block_size": 16,
    "gpu_memory_utilization": 0.95, "swap_space": 16, "max_num_batched_tokens": 16384, "max_num_seqs": 1024,
    "max_paddings": 256, "engine_use_ray": True, "worker_use_ray": True}


@dataclass(frozen=True, slots=True)
class DistServeRun:
    """One measured run.

    Attributes:
        name: file stem, e.g. "vllm-300-3".
        num_requests: N from the name.
        rate_per_s: offered Poisson rate from the name, req/s.
        requests: the workload in issue order (ties keep file order); ids ``f"{name}-{i}"``, i = position in the file.
        measured: the measured outcome, one record per request in the same order, times relative to the first issue.
        summary: the file's summary block (``avg_ttft_ms``, ``avg_tpot_ms``, ``test_duration_ms``, ...), as numbers.
    """

    name: str
    num_requests: int
    rate_per_s: float
    requests: list[RequestSpec]
    measured: RunRecords
    summary: dict[str, float] = field(default_factory=dict)


def _data_dir() -> Path:
    return Path(str(resources.files("kvledger.dynamics.workload") / "data" / "distserve"))


def list_distserve_runs() -> list[str]:
    """Bundled run names, by rate: vllm-100-1, vllm-100-2, vllm-200-2, vllm-300-3, vllm-400-4."""
    names = [p.stem for p in _data_dir().glob("*.exp")]
    return sorted(names, key=lambda n: (float(_NAME.match(n)["rate"]), int(_NAME.match(n)["n"])))


def _resolve(name_or_path: str | Path) -> Path:
    key = str(name_or_path)
    bundled = _data_dir() / f"{key}.exp"
    if bundled.is_file():
        return bundled
    path = Path(key).expanduser()
    if path.is_file():
        return path
    if not _NAME.match(key) and (path.suffix or "/" in key):
        raise InputError(f"DistServe run file {key!r} not found")
    raise UnknownNameError("DistServe run", key, list_distserve_runs())


def _parse_summary(lines: list[str]) -> dict[str, float]:
    out = {}
    for line in lines:
        key, sep, value = line.strip().partition(":")
        if sep:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                continue
    return out


def _parse_requests(path: Path, first_line: str) -> list[dict]:
    try:
        items = ast.literal_eval(first_line)
    except (ValueError, SyntaxError) as err:
        raise FormatError(str(path), f"line 1 is not a Python list literal of request dicts ({err.__class__.__name__})",
                          "line 1") from None
    if not isinstance(items, list) or not items:
        raise FormatError(str(path), "line 1 must be a non-empty list of request dicts", "line 1")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise FormatError(str(path), "must be a dict", f"line 1, request {i}")
        for key in _KEYS:
            value = item.get(key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise FormatError(str(path), f"missing or non-numeric {key!r}", f"line 1, request {i}, field {key!r}")
        if item["prompt_len"] < 1 or item["output_len"] < 1:
            raise FormatError(str(path), "prompt_len and output_len must be ≥ 1", f"line 1, request {i}")
        if not item["issue_time"] <= item["first_token_time"] <= item["complete_time"]:
            raise FormatError(str(path), "needs issue_time ≤ first_token_time ≤ complete_time", f"line 1, request {i}")
    return items


def load_distserve_run(name_or_path: str | Path) -> DistServeRun:
    """Read a run by bundled name (see :func:`list_distserve_runs`) or ``.exp`` path.

    Raises:
        UnknownNameError: unknown name. FormatError: malformed file (names line, request index and field).
    """
    path = _resolve(name_or_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise FormatError(str(path), "file is empty")
    items = _parse_requests(path, lines[0])
    m = _NAME.match(path.stem)
    rate = float(m["rate"]) if m else float("nan")
    t0 = min(it["issue_time"] for it in items)
    order = sorted(range(len(items)), key=lambda i: items[i]["issue_time"])
    requests, records = [], []
    for i in order:
        it = items[i]
        rid = f"{path.stem}-{i}"
        requests.append(RequestSpec(rid, it["issue_time"] - t0, int(it["prompt_len"]), int(it["output_len"])))
        records.append(RequestRecord(rid, it["issue_time"] - t0, int(it["prompt_len"]), int(it["output_len"]),
                                     first_token_s=it["first_token_time"] - t0, finish_s=it["complete_time"] - t0))
    summary = _parse_summary(lines[1:])
    meta = RunMetadata(
        source=str(path), source_format="distserve-exp", model="facebook/opt-13b", hardware="A100-SXM-80GB",
        num_gpus=1, request_rate=rate, time_origin=f"issue_time {t0:.6f} s (client monotonic clock)",
        definitions=["TTFT = first_token_time − issue_time; "
                     "TPOT = (complete_time − first_token_time)/(output_len − 1)"],
        extra={"engine_settings": dict(DISTSERVE_VLLM_SETTINGS), "summary": summary,
               "engine_kwargs": dict(DISTSERVE_LAUNCH), "vllm_version": DISTSERVE_VLLM_SETTINGS["vllm_version"],
               "record_file": DISTSERVE_LAUNCH_SCRIPT},
    )
    return DistServeRun(path.stem, int(m["n"]) if m else len(items), rate, requests, RunRecords(records, meta), summary)
