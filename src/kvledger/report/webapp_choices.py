"""What the web app's form offers (``/api/choices``), each list taken from the source the CLI checks against: the
bundled models and the model configs and GPU files inside ``kvledger ui --data-dir``, the GPU catalog, the API and
GPU price rows, the trace catalog, the engines, the KV-cache dtypes and the on-load quantization methods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import Request  # at module level: FastAPI resolves the endpoint's (string) annotations here

__all__ = ["choices", "kv_cache_dtypes", "check_web_kv_dtype", "add_kv_dtypes_route", "local_files", "MAX_LOCAL_FILES",
           "ENGINES"]

ENGINES = ("vllm", "sglang", "trtllm")

MAX_LOCAL_FILES = 200  # files listed from the data folder at most (each model file's JSON is read to tell its kind)
_MAX_READ_BYTES = 4 << 20  # a model's config.json is a few kB; a larger JSON file is not read to be listed
_MAX_DEPTH = 4  # folders below the data folder looked into


def choices(data_dir: Path | None = None) -> dict[str, Any]:
    """The form's lists: ``models`` (bundled) and ``local_models``/``local_gpus`` (the data folder's files, by their
    path relative to it, as the API takes them), ``gpus``, ``apis``, ``traces`` (every bundled trace) with
    ``lengths_only_traces`` (those without arrival times: the serving panel reads them as a synthetic workload's
    lengths), ``engines``, ``kv_cache_dtypes`` (``--kv-cache-dtype``'s accepted values), ``quantizations``
    (``--quantization``'s on-load methods) and ``providers``. ``kv_cache_dtypes`` is the form's first engine's (vLLM,
    the newest release read); ``kv_cache_dtypes_by_engine`` each engine's at its newest (``kv_cache_dtypes``)."""
    from kvledger.catalog.gpus import gpu_catalog
    from kvledger.catalog.models import bundled_models
    from kvledger.catalog.prices import api_prices, gpu_prices
    from kvledger.catalog.quant_flag import ONLINE_METHODS
    from kvledger.dynamics.workload.traces import list_traces

    local = local_files(data_dir)
    traces = list_traces()
    return {"models": [m.hf_id for m in bundled_models()], "local_models": local["models"],
            "gpus": [{"id": g.gpu_id, "name": g.name} for g in gpu_catalog().values() if g is not None],
            "local_gpus": local["gpus"], "apis": [p.key for p in api_prices()],
            "traces": [t.name for t in traces], "lengths_only_traces": [t.name for t in traces if not t.has_arrivals],
            "engines": list(ENGINES), "kv_cache_dtypes": kv_cache_dtypes(ENGINES[0]),
            "kv_cache_dtypes_by_engine": {e: kv_cache_dtypes(e) for e in ENGINES},
            "quantizations": list(ONLINE_METHODS),
            "providers": sorted({r.provider for r in gpu_prices()})}  # gpu_prices.csv's, for the provider field


def kv_cache_dtypes(engine: str, engine_version: str | None = None) -> list[str]:
    """The KV cache dtypes the form offers for ``engine`` at ``engine_version`` (empty: the newest release read): the
    names the engine's own ``--kv-cache-dtype`` choices have at that release (``accounting.kv_dtype_choices``), so
    vLLM is never offered SGLang's bf16 nor SGLang vLLM's fp8_inc.

    Raises:
        InputError: an engine other than vLLM, SGLang or TensorRT-LLM, or a vLLM or SGLang version that is none or
            not known (its parser's message, as the plan gives it).
    """
    from kvledger.accounting.kv_dtype_choices import engine_kv_dtypes
    from kvledger.accounting.settings import engine_name
    from kvledger.accounting.vllm_rules import parse_version
    from kvledger.errors import InputError

    name, version = engine_name(engine), (engine_version or "").strip() or None
    if name not in ("vllm", "sglang", "trtllm"):
        raise InputError(f"engine {engine!r} is not known; use vllm, sglang or trtllm")
    if name == "vllm" and version is not None:
        parse_version(version)  # "abc" or a release past the next minor: refused, as plan refuses it
    return engine_kv_dtypes(name, version)


def check_web_kv_dtype(kv_cache_dtype: str, engine: str, engine_version: str | None) -> None:
    """Refuse a KV cache dtype the engine refuses at that release, as the CLI does (``check_kv_dtype_for_engine``).

    Raises:
        InputError: the CLI's one-paragraph message.
    """
    from kvledger.accounting.kv_dtype_choices import check_kv_dtype_for_engine

    check_kv_dtype_for_engine(kv_cache_dtype, engine.strip().lower(), (engine_version or "").strip() or None)


def add_kv_dtypes_route(app: Any, token: str | None, as_json: Any) -> None:
    """``GET /api/kv_cache_dtypes?engine=…&engine_version=…``: ``kv_cache_dtypes`` for the form, written by
    ``as_json``; with ``token`` the request must carry it, as ``/api/choices``'s."""
    import hmac

    from kvledger.report.webapp_guard import Refused

    @app.get("/api/kv_cache_dtypes")
    def api_kv_cache_dtypes(request: Request, engine: str = "vllm", engine_version: str = "") -> Any:
        if token is not None and not hmac.compare_digest(request.headers.get("x-kvledger-token") or "", token):
            raise Refused(403, "this server needs its token: open the URL `kvledger ui` printed")
        return as_json({"engine": engine, "engine_version": engine_version,
                        "kv_cache_dtypes": kv_cache_dtypes(engine[:40], engine_version[:40])})


def local_files(data_dir: Path | None) -> dict[str, list[str]]:
    """The data folder's model configs (a JSON object with ``architectures`` or ``model_type``, as a Hugging Face
    ``config.json`` has) and GPU files (``.toml``, or a JSON object with ``bandwidth_tb_s``), each by its path relative
    to the folder, sorted; at most ``MAX_LOCAL_FILES`` looked at, ``_MAX_DEPTH`` folders deep. Files that resolve
    outside the folder (symbolic links) are left out, as the API refuses them."""
    found: dict[str, list[str]] = {"models": [], "gpus": []}
    if data_dir is None:
        return found
    root = data_dir.resolve()
    for path in _files(root):
        kind = _kind(path)
        if kind is not None:
            found[kind].append(path.relative_to(root).as_posix())
    return {k: sorted(v) for k, v in found.items()}


def _files(root: Path) -> list[Path]:
    """The .json and .toml files under ``root`` (not hidden, inside it once resolved), breadth first, bounded."""
    out: list[Path] = []
    level = [root]
    for _ in range(_MAX_DEPTH + 1):
        below: list[Path] = []
        for folder in level:
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                continue
            for p in entries:
                if p.name.startswith(".") or not p.resolve().is_relative_to(root):
                    continue
                if p.is_dir():
                    below.append(p)
                elif p.suffix in (".json", ".toml") and p.is_file():
                    out.append(p)
                    if len(out) >= MAX_LOCAL_FILES:
                        return out
        level = below
    return out


def _kind(path: Path) -> str | None:
    """"models", "gpus" or None (neither, or unreadable)."""
    if path.suffix == ".toml":
        return "gpus"
    try:
        if path.stat().st_size > _MAX_READ_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if "architectures" in data or "model_type" in data:
        return "models"
    return "gpus" if "bandwidth_tb_s" in data else None
