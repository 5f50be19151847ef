"""Reader for LLMServingSim's bench runs of vLLM (``bench/.../vllm/requests.jsonl`` + ``meta.json``): per-request
records on the engine's clock.

Layout (casys-kaist/LLMServingSim ``bench/core/runner.py``, which drives ``vllm.AsyncLLM`` in
process and copies each request's ``RequestStateStats``): one JSON object per line with
``request_id``, ``input_toks``, ``output_toks``, ``arrival_time`` (wall-clock epoch, s) and
``queued_ts``, ``scheduled_ts``, ``first_token_ts``, ``last_token_ts`` (the engine's monotonic
clock, s). The two clocks differ, so — as upstream ``bench/core/validate.py`` does — the
request's arrival is its ``queued_ts``: TTFT = first_token_ts − queued_ts, E2E =
last_token_ts − queued_ts, TPOT = (last − first)/(output − 1). Time 0 is the first
``queued_ts``. ``meta.json`` beside the file (when present) gives the model, the vLLM version,
the launch settings (``engine_kwargs``) and, in newer runs, the resolved KV cache (``kv_cache``),
GPU (``hardware``) and engine config (``resolved_config``, the sections the replay reads); they are kept in
``metadata.extra``. Output lengths were forced
(``min_tokens = max_tokens``), so every request generated exactly ``output_toks`` tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kvledger.errors import FormatError
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT", "looks_like_llmservingsim", "read_llmservingsim", "run_file_hint", "record_keys"]

FORMAT = "llmservingsim-vllm"
_KEYS = ("request_id", "input_toks", "output_toks", "queued_ts", "first_token_ts", "last_token_ts")
#: the resolved ``model_config`` keys kept (vLLM 0.19 ``config/model.py``'s ``ModelConfig`` fields of those names)
_MODEL_KEYS = ("quantization", "dtype", "enforce_eager")


def _requests_file(path: Path) -> Path:
    """``requests.jsonl`` itself, or inside a run folder (``.../vllm/``) or its parent."""
    if path.is_dir():
        from kvledger.evidence.run_folder import beside_run, folder_problem

        if (path / "requests.jsonl").is_file() and beside_run(path):  # other data files would be left out unread
            raise FormatError(str(path), folder_problem(path))
        for cand in (path / "requests.jsonl", path / "vllm" / "requests.jsonl"):
            if cand.is_file():
                return cand
        raise FormatError(str(path), "no requests.jsonl in this folder or its vllm/ sub-folder")
    return path


def looks_like_llmservingsim(path: str | Path) -> bool:
    """True when the file (or folder) is an LLMServingSim bench ``requests.jsonl`` (first line has its keys)."""
    try:
        f = _requests_file(Path(path))
        with open(f, encoding="utf-8-sig") as fh:
            first = json.loads(fh.readline())
    except (OSError, ValueError, RecursionError, FormatError):  # nested past the recursion limit: not its layout
        return False
    return isinstance(first, dict) and all(k in first for k in _KEYS)


def run_file_hint(path: str | Path, value: object = None) -> str | None:
    """What to give instead when ``path`` is another file of an LLMServingSim run than its requests: its ``meta.json``
    (the launch record, read beside ``requests.jsonl``) or ``timeseries.csv`` (scheduler ticks) in ``…/vllm/``, or
    ``validation/summary.txt`` beside that folder (upstream ``bench/core/runner.py`` and ``validate.py`` write them);
    None for any other file. ``value``: the file's loaded content, to tell a lone ``meta.json`` by its keys."""
    p = Path(path)
    if p.name in ("meta.json", "timeseries.csv"):
        folder = p.parent
    elif p.name == "summary.txt" and p.parent.name == "validation":
        folder = p.parent.parent / "vllm"
    else:
        return None
    requests = folder / "requests.jsonl"
    if looks_like_llmservingsim(requests):
        return (f"This {p.name} is a file of an LLMServingSim run, not its per-request file: give calibrate or "
                f"validate the run's folder, {folder}, or its request file in it, requests.jsonl, instead")
    if p.name == "meta.json" and isinstance(value, dict) and "engine_kwargs" in value:
        return ("This looks like an LLMServingSim run's meta.json (its launch record, read beside the run's "
                "requests.jsonl), and no requests.jsonl is beside it: give calibrate or validate the run's folder or "
                "its requests.jsonl instead")
    return None


def _number(path: str, obj: dict, key: str, line: int, integer: bool = False) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise FormatError(path, f"field {key!r} must be a finite number ≥ 0, got {v!r}", f"line {line}")
    if integer and int(v) != v:
        raise FormatError(path, f"field {key!r} must be a whole number of tokens, got {v!r}", f"line {line}")
    return float(v)


def _rows(path: Path) -> list[dict[str, Any]]:
    from kvledger.evidence.jsonl_cut import line_cut_off

    rows = []
    with open(path, encoding="utf-8-sig") as fh:
        lines = fh.read().split("\n")
    for i, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise FormatError(str(path), f"not JSON ({e.msg}){line_cut_off(lines, i)}",
                              f"line {i}") from None
        if not isinstance(obj, dict) or any(k not in obj for k in _KEYS):
            missing = [k for k in _KEYS if not isinstance(obj, dict) or k not in obj]
            raise FormatError(str(path), f"missing field(s) {', '.join(missing)} (LLMServingSim requests.jsonl)",
                              f"line {i}")
        rows.append({"line": i, **obj})
    if not rows:
        raise FormatError(str(path), "no request in the file")
    return rows


def read_llmservingsim(path: str | Path) -> RunRecords:
    """One run: a record per request (arrival order), times in s from the first ``queued_ts``.

    Raises:
        FormatError: a missing or negative field, a first token after the last, naming the line.
    """
    f = _requests_file(Path(path))
    rows = _rows(f)
    src = str(f)
    recs, failed, unplaced = _records(src, rows)
    meta_path = f.parent / "meta.json"
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8-sig"))
        except ValueError as e:
            raise FormatError(str(meta_path), f"not JSON ({e.msg})") from None
    hw = meta.get("hardware") or {}
    extra = {k: meta[k] for k in ("vllm_version", "engine_kwargs", "kv_cache", "dataset_path",
                                  "started_at") if k in meta}
    if meta:
        extra["record_file"] = str(meta_path)  # the launch record the settings come from (not requests.jsonl)
        extra["record_keys"] = record_keys(meta)  # every key it records, for validate to name those it leaves
    picked = _resolved(meta.get("resolved_config"))
    if picked:  # the engine's resolved settings (async scheduling, parallelism, blocks...): what validate replays
        extra["resolved_config"] = picked
    md = RunMetadata(source=src, source_format=FORMAT, model=meta.get("model"), hardware=hw.get("device_name"),
                     num_gpus=hw.get("device_count"), time_origin="first request's queued_ts (engine monotonic clock)",
                     definitions=["arrival = queued_ts (the engine's clock, as LLMServingSim's validate.py); TTFT = "
                                  "first_token_ts − queued_ts; TPOT = (last − first)/(output − 1); no per-token times"]
                     + ([f"{failed} request(s) with no first or last token time (null: the runner got no metrics "
                         "for them) counted as failed" + (f"; {unplaced} with no queued_ts either, placed at the "
                                                          "arrival of the request before it" if unplaced else "")]
                        if failed else []),
                     extra=extra)
    return RunRecords(recs, md)


def _resolved(resolved: Any) -> dict[str, Any]:
    """The sections of the engine's resolved ``VllmConfig`` (``resolved_config``) the replay reads or checks: the
    scheduler, parallel and cache sections whole; of ``model_config`` the weights' ``quantization`` and ``dtype`` and
    ``enforce_eager``; ``speculative_config`` as recorded (None: no speculative decoding), which
    ``calibration.run_record`` refuses, as it refuses those a launch flag states."""
    if not isinstance(resolved, dict):
        return {}
    out = {k: resolved[k] for k in ("scheduler_config", "parallel_config", "cache_config")
           if isinstance(resolved.get(k), dict)}
    model = resolved.get("model_config")
    if isinstance(model, dict) and any(k in model for k in _MODEL_KEYS):
        out["model_config"] = {k: model[k] for k in _MODEL_KEYS if k in model}
    if "speculative_config" in resolved:
        out["speculative_config"] = resolved["speculative_config"]
    return out


def _records(src: str, rows: list[dict[str, Any]]) -> tuple[list[RequestRecord], int, int]:
    """A record per row, arrival order, times in s from the first ``queued_ts``; how many failed, and how many of those
    had no ``queued_ts`` either. A row whose
    ``first_token_ts`` or ``last_token_ts`` is null failed (upstream ``bench/core/runner.py`` writes null times for a
    request it got no metrics for): a failed record at its ``queued_ts``, or where that is null too, at the arrival of
    the row before it (the file keeps the workload's order, arrivals ascending)."""
    def failed_row(r: dict[str, Any]) -> bool:
        return r.get("first_token_ts") is None or r.get("last_token_ts") is None

    queued = [_number(src, r, "queued_ts", r["line"]) for r in rows if r.get("queued_ts") is not None]
    if not queued:
        raise FormatError(src, "no request has a queued_ts: the run recorded no request's times")
    t0, recs, failed, unplaced, last_q = min(queued), [], 0, 0, 0.0
    for r in rows:
        rid, n_in = str(r["request_id"]), int(_number(src, r, "input_toks", r["line"], True))
        if failed_row(r):
            failed += 1
            if r.get("queued_ts") is not None:
                last_q = _number(src, r, "queued_ts", r["line"]) - t0
            else:
                unplaced += 1
            recs.append(RequestRecord(rid, last_q, n_in, 0, error="no first or last token time (null)"))
            continue
        q, a, b = (_number(src, r, k, r["line"]) - t0 for k in ("queued_ts", "first_token_ts", "last_token_ts"))
        if not q <= a <= b:
            raise FormatError(src, f"times out of order: queued {q:.6f} s, first token {a:.6f} s, last {b:.6f} s",
                              f"line {r['line']}")
        last_q = q
        recs.append(RequestRecord(rid, q, n_in, int(_number(src, r, "output_toks", r["line"], True)),
                                  first_token_s=a, finish_s=b))
    recs.sort(key=lambda x: x.arrival_s)
    return recs, failed, unplaced


def record_keys(meta: dict[str, Any]) -> list[str]:
    """The keys ``meta`` records, dotted one level into ``hardware``, ``kv_cache`` and ``resolved_config`` (its
    sections); ``engine_kwargs`` as one key (its flags are sorted one by one: ``calibration.run_record``)."""
    out = []
    for key, value in meta.items():
        if key in ("hardware", "kv_cache", "resolved_config") and isinstance(value, dict) and value:
            out += [f"{key}.{k}" for k in value]
        else:
            out.append(str(key))
    return out
