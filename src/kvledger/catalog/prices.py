"""Reference prices: API list prices per million tokens and GPU rental $/GPU-hour, each row with its source and as-of
date.

Data: ``catalog/data/api_prices.csv`` and ``gpu_prices.csv`` (copied from the project's
reference set; see ``data/prices.SOURCES.md``). Blank cells stay None: a blank cached-input
price means "not found", not "no discount", and a blank batch discount means no batch API
is known (DeepSeek, DeepInfra). GPU prices are list on-demand; reserved and spot prices
are lower (docs/cost.md §8). Rows marked ``confidence=low`` are placeholders to check.

A GPU no row prices is refused as a GPU when the GPU catalog does not know it either (a simulation needs its specs
before any price: ``kvledger gpus`` lists them), else as a price, offering ``--gpu-usd-per-hour`` only where the command
takes it.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kvledger.errors import ConfigError, InputError, UnknownNameError

__all__ = ["ApiPrice", "GpuPrice", "api_prices", "gpu_prices", "api_prices_from_text", "gpu_prices_from_text",
           "find_gpu_prices", "find_gpu_price"]


@dataclass(frozen=True, slots=True)
class ApiPrice:
    """One API model's list prices, USD per million tokens (``_usd_per_mtok``).

    Attributes:
        batch_discount: fraction off with the provider's batch API (0.5 = half price); None = no batch API known.
        cached_input_usd_per_mtok: price of a prompt-cache hit; None = not listed.
        cache_write_usd_per_mtok: price of writing a prompt-cache entry (Anthropic 5-minute TTL,
            OpenAI GPT-5.6); None = writes are billed as ordinary input.
        as_of, source, confidence, notes: provenance, verbatim from the CSV.
    """

    provider: str
    model: str
    input_usd_per_mtok: float
    cached_input_usd_per_mtok: float | None
    output_usd_per_mtok: float
    batch_discount: float | None
    cache_write_usd_per_mtok: float | None
    cache_write_1h_usd_per_mtok: float | None
    cache_read_multiplier: float | None
    as_of: str
    source: str
    confidence: str
    notes: str

    @property
    def key(self) -> str:
        """``"Provider:model"``, the unambiguous name."""
        return f"{self.provider}:{self.model}"

    @property
    def aliases(self) -> list[str]:
        """Model names this row covers (rows like "claude-opus-4 / claude-opus-4.1" cover both)."""
        return [a.strip() for a in self.model.split(" / ") if a.strip()]

    @property
    def historical(self) -> bool:
        """A list price no longer offered, kept for the record (its notes open with "historical", e.g. DeepSeek's
        original V3 and R1 lists, replaced at the same endpoints by V3.2's prices on 2025-09-29)."""
        return self.notes.strip().lower().startswith("historical")


@dataclass(frozen=True, slots=True)
class GpuPrice:
    """One GPU rental offer: ``usd_per_gpu_hour`` = ``instance_usd_per_hour`` ÷ ``gpus_per_instance``, USD/GPU-h."""

    provider: str
    provider_type: str
    gpu_id: str
    gpu_name: str
    instance_type: str
    gpus_per_instance: int
    instance_usd_per_hour: float
    usd_per_gpu_hour: float
    pricing_model: str
    region: str
    as_of: str
    source: str
    confidence: str
    notes: str

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.instance_type}"

    @property
    def per_gpu(self) -> bool:
        """Billed per GPU however many a replica takes: a marketplace's pods (``provider_type`` "marketplace") or a
        price the user gave per GPU-hour (``provider_type`` "user"); a one-GPU VM row is not (it holds a TP-1
        replica only: ``kvledger.ledgers.instances``)."""
        return "marketplace" in self.provider_type or self.provider_type == "user"


_API_COLUMNS = ("provider", "model", "input_usd_per_mtok", "cached_input_usd_per_mtok", "output_usd_per_mtok",
                "batch_discount",
                "cache_write_usd_per_mtok", "cache_write_1h_usd_per_mtok", "cache_read_multiplier", "as_of", "source",
                    "confidence", "notes")
_GPU_COLUMNS = ("provider", "provider_type", "gpu_id", "gpu_name", "instance_type", "gpus_per_instance",
                "instance_usd_per_hour",
                "usd_per_gpu_hour", "pricing_model", "region", "as_of", "source", "confidence", "notes")
# allowed ranges, per field: (low, high, low included); USD per million tokens and per GPU-hour stay below 10,000
_RANGES = {"input_usd_per_mtok": (0.0, 1e4, True), "cached_input_usd_per_mtok": (0.0, 1e4, True),
           "output_usd_per_mtok": (0.0, 1e4, True),
           "batch_discount": (0.0, 1.0, True), "cache_write_usd_per_mtok": (0.0, 1e4, True),
               "cache_write_1h_usd_per_mtok": (0.0, 1e4, True),
           "cache_read_multiplier": (0.0, 10.0, True), "gpus_per_instance": (1, 64, True),
               "instance_usd_per_hour": (0.0, 1e5, False),
           "usd_per_gpu_hour": (0.0, 1e4, False)}


def rows_from_text(text: str, name: str, columns: tuple[str, ...] | None = None) -> list[dict[str, str]]:
    """CSV rows of a price table; every expected column must be in the header.

    Raises:
        ConfigError: a missing column, or a row with more or fewer cells than the header (file and line named).
    """
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [c for c in (columns or ()) if c not in header]
    if missing:
        raise ConfigError(name, f"missing column(s) {', '.join(missing)} in the header", None)
    rows = []
    for r in reader:
        if None in r or any(v is None for v in r.values()):
            raise ConfigError(name, f"line {reader.line_num}: {len(header)} columns in the header, a different number "
                                    f"in this row")
        r["_line"] = str(reader.line_num)
        rows.append(r)
    return rows


def _value(name: str, r: dict[str, str], field: str, *, optional: bool = False) -> float | None:
    """A price-table cell as a number in its allowed range (``_RANGES``); blank → None when ``optional``.

    Raises:
        ConfigError: naming the file, line, field and the allowed range.
    """
    text = r[field].strip()
    where = f"line {r['_line']}: {field}"
    if not text:
        if optional:
            return None
        raise ConfigError(name, f"{where}: empty; a number is required")
    try:
        x = float(text)
    except ValueError:
        raise ConfigError(name, f"{where}: {text!r} is not a number") from None
    lo, hi, lo_in = _RANGES[field]
    if not (math.isfinite(x) and (x >= lo if lo_in else x > lo) and x <= hi):
        raise ConfigError(name, f"{where}: {text} is outside the allowed range {'[' if lo_in else '('}{lo:g}, {hi:g}]")
    if field == "gpus_per_instance" and x != int(x):
        raise ConfigError(name, f"{where}: {text} is not a whole number of GPUs")
    return x


def api_prices_from_text(text: str, name: str = "api_prices.csv") -> tuple[ApiPrice, ...]:
    """API price rows of a CSV text in the ``api_prices.csv`` layout, every number checked (see ``_RANGES``)."""
    out = []
    for r in rows_from_text(text, name, _API_COLUMNS):
        v = {f: _value(name, r, f, optional=f not in ("input_usd_per_mtok", "output_usd_per_mtok"))
             for f in _API_COLUMNS if f in _RANGES}
        out.append(ApiPrice(r["provider"], r["model"], v["input_usd_per_mtok"], v["cached_input_usd_per_mtok"],
                            v["output_usd_per_mtok"],
                            v["batch_discount"], v["cache_write_usd_per_mtok"], v["cache_write_1h_usd_per_mtok"],
                                v["cache_read_multiplier"],
                            r["as_of"], r["source"], r["confidence"], r["notes"]))
    return tuple(out)


def gpu_prices_from_text(text: str, name: str = "gpu_prices.csv") -> tuple[GpuPrice, ...]:
    """GPU rental rows of a CSV text in the ``gpu_prices.csv`` layout, every number checked (see ``_RANGES``)."""
    out = []
    for r in rows_from_text(text, name, _GPU_COLUMNS):
        v = {f: _value(name, r, f) for f in ("gpus_per_instance", "instance_usd_per_hour", "usd_per_gpu_hour")}
        out.append(GpuPrice(r["provider"], r["provider_type"], r["gpu_id"], r["gpu_name"], r["instance_type"],
                            int(v["gpus_per_instance"]),
                            v["instance_usd_per_hour"], v["usd_per_gpu_hour"], r["pricing_model"], r["region"],
                                r["as_of"], r["source"],
                            r["confidence"], r["notes"]))
    return tuple(out)


def _text(name: str) -> str:
    return resources.files("kvledger.catalog").joinpath("data", name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def api_prices() -> tuple[ApiPrice, ...]:
    """All API price rows, in file order."""
    return api_prices_from_text(_text("api_prices.csv"))


@lru_cache(maxsize=1)
def gpu_prices() -> tuple[GpuPrice, ...]:
    """All GPU rental rows, in file order."""
    return gpu_prices_from_text(_text("gpu_prices.csv"))


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def find_gpu_prices(gpu: str, provider: str | None = None, own_price: bool = True) -> list[GpuPrice]:
    """All rental rows for a GPU given by catalog id (``nvidia_h100_sxm``) or name (``"H100 80GB SXM"``);
    ``own_price``: the command takes ``--gpu-usd-per-hour`` (its refusals offer it).

    Raises:
        UnknownNameError: no row matches (close names suggested; an unknown GPU refused as a GPU).
    """
    q = _norm(gpu)
    rows = gpu_prices()
    hits = [r for r in rows if q in (_norm(r.gpu_id), _norm(r.gpu_id.split("_", 1)[-1]), _norm(r.gpu_name))]
    if hits and provider is not None:
        offered = sorted({r.provider for r in hits})
        hits = [r for r in hits if _norm(r.provider) == _norm(provider)]
        if not hits:  # the GPU has rows, the provider is the unknown part: suggest this GPU's providers
            raise UnknownNameError("GPU price provider", provider, offered,
                                   hint=f"(providers with a {gpu} row: {', '.join(offered)}"
                                        + ("; or pass --gpu-usd-per-hour)" if own_price else ")"))
    if not hits:
        raise _unknown_gpu_price(gpu, provider, own_price)
    return hits


#: the hint of a command that takes the user's own GPU price (the web app rewrites it: ``report.webapp_words``)
_OWN_PRICE = "(or pass --gpu-usd-per-hour to give your own price)"


def _unknown_gpu_price(gpu: str, provider: str | None, own_price: bool) -> UnknownNameError:
    """The refusal of a GPU no rental row prices: a GPU the catalog does not know (close names suggested; its specs are
    needed before any price), else a catalog GPU without a row (``own_price``: the command takes
    ``--gpu-usd-per-hour``, offered then)."""
    from kvledger.catalog.gpus import get_gpu

    try:
        spec = get_gpu(gpu)
    except UnknownNameError as err:
        return UnknownNameError("GPU", gpu, err.suggestions, ranked=True,
                                hint="(kvledger gpus lists the catalog's GPUs, kvledger prices --kind gpu their "
                                     "rental rows)")
    where, known = "" if provider is None else f" at {provider}", sorted({r.gpu_id for r in gpu_prices()})
    from kvledger.catalog.priced_alternative import priced_alternative_words

    none = "" if spec.gpu_id in known else (f"{spec.gpu_id} has no rental row{where} in the price table"
                                            f"{priced_alternative_words(spec.gpu_id, gpu_prices())}; ")
    own = f" {_OWN_PRICE}" if own_price else ""
    return UnknownNameError("GPU price", f"{gpu}{where}", known,
                            hint=f"({none}kvledger prices --kind gpu lists them){own}")


def find_gpu_price(gpu: str, provider: str | None = None, instance: str | None = None) -> GpuPrice:
    """The single rental row for a GPU (narrowed by provider and instance type).

    Raises:
        UnknownNameError: no row matches.
        InputError: several rows match; the message lists them with their $/GPU-h so the user can pick.
    """
    hits = find_gpu_prices(gpu, provider)
    if instance is not None:
        hits = [r for r in hits if _norm(r.instance_type) == _norm(instance)]
        if not hits:
            rows = find_gpu_prices(gpu, provider)  # the rows it could have named, listed (a typo alone gets a match)
            listed = "; ".join(f"{r.provider} {r.instance_type}" for r in rows) or "none"
            raise UnknownNameError("instance type", instance, [r.instance_type for r in rows],
                                   f"The instance types priced for {gpu}{f' at {provider}' if provider else ''}: "
                                   f"{listed} (kvledger prices --kind gpu lists every row)")
    if len(hits) > 1:
        options = "; ".join(f"{r.provider} {r.instance_type} ${r.usd_per_gpu_hour:.2f}/GPU-h ({r.as_of})" for r in hits)
        raise InputError(f"{len(hits)} rental prices for {gpu!r}: {options}. Pick one with --gpu-provider (and "
                         f"--instance), or give --gpu-usd-per-hour")
    return hits[0]
