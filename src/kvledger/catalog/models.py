"""Finding a model's config: bundled real configs (by HF id or alias), a local file or folder, or the Hub.

Bundled configs live in ``catalog/data/models/<org>--<name>.json`` (provenance in
``SOURCES.md`` there). Publisher-stated parameter counts are in ``publisher_params.csv``.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kvledger.catalog.jsonload import load_json_file
from kvledger.catalog.modelspec import ModelSpec, parse_config
from kvledger.errors import KvLedgerError, UnknownNameError, suggest

__all__ = ["load_model", "bundled_models", "resolve_bundled", "near_models", "bundled_id_of_config", "bundled_config",
           "published_hub_id",
           "StatedParams", "stated_params", "BundledModel"]

_DATA = resources.files("kvledger.catalog") / "data" / "models"

# Releases whose architecture (and config apart from token ids) equals a bundled one.
_TWINS = {
    "meta-llama/Meta-Llama-3.1-8B": ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct",
                                     "meta-llama/Meta-Llama-3.1-8B-Instruct"],
    "meta-llama/Meta-Llama-3.1-70B": ["meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct",
                                      "meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"],
    "meta-llama/Meta-Llama-3.1-405B": ["meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.1-405B-Instruct"],
    "meta-llama/Llama-3.2-3B": ["meta-llama/Llama-3.2-3B-Instruct"],
    "meta-llama/Llama-2-7b-hf": ["meta-llama/Llama-2-7b-chat-hf"],
    "meta-llama/Llama-2-70b-hf": ["meta-llama/Llama-2-70b-chat-hf"],
    "mistralai/Mixtral-8x7B-v0.1": ["mistralai/Mixtral-8x7B-Instruct-v0.1"],
    "google/gemma-2-9b-it": ["google/gemma-2-9b"],
    "Qwen/Qwen3-Next-80B-A3B-Thinking": ["Qwen/Qwen3-Next-80B-A3B-Instruct"],
}


@dataclass(frozen=True)
class BundledModel:
    """A bundled config: its HF id, file name, the names it answers to (lower-case) and the other releases of the same
    architecture it stands for (``twins``, Hub ids as published)."""

    hf_id: str
    file: str
    aliases: tuple[str, ...]
    twins: tuple[str, ...] = ()


@dataclass(frozen=True)
class StatedParams:
    """What the publisher states, for the ±1% check. Counts in parameters; convention of the active count."""

    total: float
    active: float | None
    active_convention: str | None
    stated_by: str
    note: str


@lru_cache(maxsize=1)
def bundled_models() -> tuple[BundledModel, ...]:
    """Every bundled config with its aliases (HF id, twins, the bare name, lower-case forms)."""
    out = []
    for f in sorted(p.name for p in _DATA.iterdir() if p.name.endswith(".json")):
        hf_id = f.removesuffix(".json").replace("--", "/", 1)
        names = [hf_id] + _TWINS.get(hf_id, [])
        names += [n.split("/", 1)[1] for n in names]
        names += [n.removeprefix("Meta-") for n in names if "/" not in n]
        out.append(BundledModel(hf_id, f, tuple(dict.fromkeys(n.lower() for n in names)), tuple(_TWINS.get(hf_id, []))))
    return tuple(out)


def resolve_bundled(name: str) -> BundledModel | None:
    """The bundled config answering to ``name`` (case-insensitive), or None."""
    key = name.strip().lower()
    for m in bundled_models():
        if key in m.aliases:
            return m
    return None


def near_models(name: str, *, hub_ids: bool = False, n: int = 5) -> list[str]:
    """The bundled models closest to ``name``, best first, each once and by its Hub id: its own or a twin's, the one
    nearest to what was typed (bare names ranked too, unless ``hub_ids``), so that a misspelt ``…-Instrcut`` is
    answered with the ``…-Instruct`` it meant, not with one model's other spellings in the other slots."""
    from difflib import SequenceMatcher

    of: dict[str, tuple[str, str]] = {}  # a spelling, as published → (its bundled config's HF id, its Hub id)
    for m in bundled_models():
        for full in [m.hf_id, *_TWINS.get(m.hf_id, [])]:
            for spelling in [full] if hub_ids else [full, full.split("/", 1)[1]]:
                of.setdefault(spelling, (m.hf_id, full))
    out: dict[str, list[str]] = {}  # HF id → its spellings suggested, the models in the order suggested
    for spelling in suggest(name, of, n=len(of)):
        out.setdefault(of[spelling][0], []).append(spelling)
    ratio = {s: SequenceMatcher(None, name.lower(), s.lower()).ratio() for sp in out.values() for s in sp}
    return [of[max(sp, key=ratio.__getitem__)][1] for sp in out.values()][:n]


def published_hub_id(name: str) -> str | None:
    """The Hub repository ``name`` spells, as published, when it names a bundled config by a Hub id (the config's own
    or a twin's: ``meta-llama/llama-3.1-8b`` → ``meta-llama/Llama-3.1-8B``, not the bundled file's
    ``meta-llama/Meta-Llama-3.1-8B``); None for a bare alias (``llama-3.1-8b``, which no engine loads) or an unbundled
    name."""
    bm = resolve_bundled(name)
    key = name.strip().lower()
    if bm is None or "/" not in key:
        return None
    return next((n for n in [bm.hf_id, *_TWINS.get(bm.hf_id, [])] if n.lower() == key), None)


def bundled_id_of_config(raw: object) -> str | None:
    """The HF id of the bundled config whose JSON equals ``raw`` (a copy of a bundled file), or None."""
    for bm in bundled_models():
        if bundled_config(bm) == raw:
            return bm.hf_id
    return None


def bundled_config(bm: BundledModel) -> object:
    """The bundled config file of ``bm`` as parsed JSON."""
    return load_json_file(Path(str(_DATA / bm.file)))


@lru_cache(maxsize=1)
def _stated() -> dict[str, StatedParams]:
    with (_DATA / "publisher_params.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {r["file"].replace("--", "/", 1): StatedParams(float(r["total_params_stated"]),
            float(r["active_params_stated"]) if r["active_params_stated"] else None,
            r["active_convention"] or None, r["stated_by"], r["note"]) for r in rows}


def stated_params(hf_id: str) -> StatedParams | None:
    """The publisher's stated counts for a bundled model, or None."""
    return _stated().get(hf_id)


def _own_display(name: str) -> str:
    """The name to load for kvledger's own display form of a bundled model, ``X (config of Y)`` (how ``load_model``
    names an alias, and so how its records, profiles and JSON write the model): X where X resolves to the bundled
    config, else Y; any other name as given."""
    text, sep, inner = name.strip().rpartition(" (config of ")
    if not sep or not inner.endswith(")"):
        return name
    for candidate in (text, inner[:-1]):
        if resolve_bundled(candidate) is not None:
            return candidate
    return name


_HUB_URL = re.compile(r"(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/([^/\s?#]+/[^/\s?#]+)"
                      r"(?:/(?:tree|blob|resolve)/[^\s?#]*)?/?(?:[?#]\S*)?")


def _hub_id_of_url(name: str) -> str:
    """The repo id of a model page's address pasted as the model (``https://huggingface.co/meta-llama/Llama-3.1-8B``,
    ``hf.co/…/tree/main``): the Hub id it names, as `vllm serve` takes it; any other name as given."""
    m = _HUB_URL.fullmatch(name.strip())
    return m.group(1) if m else name


def load_model(name_or_path: str, *, allow_hub: bool = True) -> ModelSpec:
    """Load a model spec from a bundled name, a local ``config.json`` (or a folder holding one), or a Hub id.

    Raises:
        UnknownNameError: a bare name that is neither bundled nor a path (closest names suggested).
        ConfigError: a malformed or unsupported config (file, line/column or field named).
        KvLedgerError: a Hub id that cannot be fetched (offline, gated, missing), with how to pass a local file.
    """
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise KvLedgerError("model: give a bundled model name, a path to a config.json (or a folder holding one), or a "
                            "Hub id")
    from kvledger.names import check_name_or_path

    name_or_path = _own_display(_hub_id_of_url(name_or_path))
    check_name_or_path(name_or_path, "model")
    bm = resolve_bundled(name_or_path)
    if bm is not None:
        raw = load_json_file(Path(str(_DATA / bm.file)))
        src = f"bundled config {bm.file} (catalog/data/models/SOURCES.md)"
        display = (
            bm.hf_id
            if name_or_path.lower() in (bm.hf_id.lower(), bm.hf_id.split("/")[1].lower())
            else f"{name_or_path} (config of {bm.hf_id})"
        )
        return parse_config(raw, source=src, name=display, catalog_id=bm.hf_id)
    p = Path(name_or_path).expanduser()
    try:
        exists = p.exists()
    except OSError as err:  # e.g. a path the file system refuses (too long, permission on a parent)
        raise KvLedgerError(f"{name_or_path[:120]}: cannot be checked as a path ({err.strerror})") from None
    if exists:
        f = p / "config.json" if p.is_dir() else p
        if p.is_dir() and not f.exists():
            raise KvLedgerError(f"{p}: folder has no config.json")
        return parse_config(load_json_file(f), source=str(f), name=str(p))
    if name_or_path.endswith(".json") or name_or_path.startswith((".", "/", "~")):
        raise KvLedgerError(f"{name_or_path}: file or folder not found (pass a config.json, a folder holding one, "
                            "a bundled model name, or a Hub id)")
    if "/" in name_or_path and allow_hub and not name_or_path.startswith((".", "/", "~")):
        return parse_config(load_json_file(_hub_config(name_or_path)), source=f"huggingface.co/{name_or_path}",
                            name=name_or_path)
    raise UnknownNameError("model", name_or_path, near_models(name_or_path), ranked=True,
                           hint="Run `kvledger models` for the bundled list, or pass a path to a config.json.")


def _hub_config(repo_id: str) -> Path:
    """Download ``config.json`` of ``repo_id`` with huggingface_hub; a clear, fast error when that is impossible.

    A 3-second metadata request first tells an unreachable Hub or a repository that does not exist
    apart from a real download, so a typo does not sit through huggingface_hub's retries.
    """
    import logging

    import httpx

    near = near_models(repo_id, hub_ids=True)
    how = (f"Download {repo_id}'s config.json yourself and pass its path in place of the model id (e.g. "
           "kvledger plan ./config.json ..., any command that takes a model).")
    hint = (
        f" Bundled models with close names: {', '.join(near)}."
        if near
        else " `kvledger models` lists the bundled ones."
    )
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise KvLedgerError(f"model {repo_id!r} is not bundled and HF_HUB_OFFLINE=1 forbids fetching it.{hint} {how}")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        r = httpx.get(f"{endpoint}/api/models/{repo_id}", timeout=3.0)
    except httpx.HTTPError as err:
        raise KvLedgerError(f"model {repo_id!r} is not bundled and the Hugging Face Hub is unreachable "
                            f"(offline? {type(err).__name__}).{hint} {how}") from None
    from huggingface_hub import get_token, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    if r.status_code == 404 or (r.status_code in (401, 403) and not get_token()):
        raise KvLedgerError(f"{repo_id} is not on the Hugging Face Hub (or is private or gated: log in with `hf auth "
                            f"login`).{hint} {how}")
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    try:
        return Path(hf_hub_download(repo_id, "config.json", etag_timeout=5))
    except (OSError, httpx.HTTPError, EntryNotFoundError, ValueError) as err:  # hub errors are OSErrors; network: httpx
        raise KvLedgerError(f"could not fetch {repo_id}'s config.json from the Hugging Face Hub ({type(err).__name__}: "
                            f"{str(err).splitlines()[0][:160] if str(err) else 'no detail'}).{hint} {how}") from None
