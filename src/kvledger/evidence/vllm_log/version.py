"""Which vLLM wrote a log, and which version's ledger rules reproduce its figures.

A printed version wins (``vLLM API server version``, ``Initializing a V1 LLM engine (v0.24.0)``, the
start-up banner). Without one, the version is inferred only where a line pins it: the source locations
of the capacity lines that docs/engine-model.md §1.9 dates (O6, O8, O10), or the V0 ``Memory profiling results:``
format of late 2024. The engine generation (V0 or V1) comes from the line formats. The ledger keys its
rules by version only (``accounting/vllm_rules.py::era``), so a V0-engine log from 0.8 is checked against
the V0 rules and a V1 log from 0.7 against the 0.8 V1 rules; the reason is returned with the choice.
"""

from __future__ import annotations

from kvledger.accounting.vllm_predates import beyond_near_future
from kvledger.accounting.vllm_rules import LATEST, parse_version, version_tuple
from kvledger.errors import InputError
from kvledger.evidence.vllm_log.stats import FORMAT_FIELDS

__all__ = ["PAIR_FINGERPRINTS", "SOURCE_FINGERPRINTS", "infer_generation", "infer_version", "metrics_floor",
           "rules_version"]

#: Capacity-line source locations and the release they belong to (docs/engine-model.md §1.9: O6, O8, O10).
SOURCE_FINGERPRINTS: dict[str, tuple[str, str]] = {
    "kv_cache_utils.py:864": ("0.10.2", "vLLM 0.10.2 prints its capacity lines from kv_cache_utils.py lines 864/868"),
    "kv_cache_utils.py:868": ("0.10.2", "vLLM 0.10.2 prints its capacity lines from kv_cache_utils.py lines 864/868"),
    "kv_cache_utils.py:1305": ("0.15.0", "vLLM ~0.14–0.15 prints its capacity lines from kv_cache_utils.py line 1305"),
    "kv_cache_utils.py:2146": ("0.24.0", "a v0.24.0 log prints its capacity lines from kv_cache_utils.py lines "
                                         "2146/2147"),
    "kv_cache_utils.py:2147": ("0.24.0", "a v0.24.0 log prints its capacity lines from kv_cache_utils.py lines "
                                         "2146/2147"),
}

#: (GPU KV cache size line, Maximum concurrency line) of ``kv_cache_utils.py`` and the release whose logs print that
#: pair, each read in a published log that names its version: the same line alone can mean two releases (1711 is the
#: size line in 0.20.0 and the concurrency line in 0.21.0), so the pair is the fingerprint.
PAIR_FINGERPRINTS: dict[tuple[str, str], tuple[str, str]] = {
    ("1291", "1296"): ("0.13.0", "an NGC build of vLLM 0.13.0 (26.01) prints them from lines 1291/1296"),
    ("1319", "1324"): ("0.19.0", "the 24 started vLLM 0.19.0 H100 start-ups print them from lines 1319/1324, and a "
                                 "0.19.1rc1 build too; 0.18 may as well (--engine-version 0.18.0 for 0.18)"),
    ("1711", "1716"): ("0.20.0", "a vLLM 0.20.0 log prints them from lines 1711/1716"),
    ("1713", "1718"): ("0.20.1", "a vLLM 0.20.1rc1 log prints them from lines 1713/1718"),
    ("1710", "1711"): ("0.21.0", "vLLM 0.21.0 logs print them from lines 1710/1711"),
    ("1733", "1734"): ("0.22.0", "vLLM 0.22.0 and 0.22.1 logs print them from lines 1733/1734"),
}

_FALLBACK = (0, 11, 0)
"""The V1 rules an unversioned log gets; a metrics-line floor above it picks the newest rules instead."""
_V0_MARKERS = {"v0_profiling_results", "blocks_with_cpu", "v0_stats", "v0_preemption", "v0_src"}
_V1_MARKERS = {"available_kv", "kv_tokens", "v1_stats", "v1_src"}


def _beyond_read(text: str | None) -> bool:
    """Whether a log's version is further ahead of the newest release read than ``--engine-version`` accepts: a log
    prints what ran, so it is no typo; the newest rules apply to it (:func:`rules_version`)."""
    ver = version_tuple(text) if text else None
    return ver is not None and beyond_near_future(ver, parse_version(LATEST))


def _ver(text: str | None) -> tuple[int, int, int] | None:
    if _beyond_read(text):
        return parse_version(LATEST)
    try:
        return parse_version(text) if text else None
    except InputError:
        return None


def metrics_floor(markers: set[str]) -> tuple[str, str] | None:
    """(the oldest release that prints every metrics-line field the log shows, the words saying which field and what
    was read), or None where its metrics lines show no field that dates them (``stats.FORMAT_FIELDS``)."""
    hits = [FORMAT_FIELDS[k] for k in markers & FORMAT_FIELDS.keys()]
    if not hits:
        return None
    field, first, before = max(hits, key=lambda h: version_tuple(h[1]) or (0, 0, 0))
    what = "prefix" if field.endswith(": ") and field[0] in "EN" else "field"
    return first, (f"its metrics lines print '{field.strip()}', which vLLM's v1/metrics/loggers.py "
                   f"LoggingStatLogger.log first prints in {first} ({before}'s format string has no such {what})")


def infer_generation(printed: str | None, version: str | None, markers: set[str]) -> str | None:
    """"v0", "v1" or None: the printed generation, else the line formats, else the default of the version."""
    if printed:
        return printed
    v0, v1 = bool(markers & _V0_MARKERS), bool(markers & _V1_MARKERS)
    if v0 != v1:
        return "v0" if v0 else "v1"
    v = _ver(version)
    if v is not None:
        return "v1" if v >= (0, 8, 0) else "v0"
    return None


def infer_version(printed: str | None, printed_where: str | None, sources: set[str],
                  markers: set[str]) -> tuple[str | None, str]:
    """(version, how it was found)."""
    if printed:
        return printed, f"printed ({printed_where})"
    if "pre_0.19_cudagraph_notice" in markers:
        return (
            "0.19.0",
            "not printed; inferred from the notice 'In v0.19, CUDA graph memory profiling will be enabled by default', "
            "which 0.18 and 0.19.x print (0.19.0's rules; --engine-version 0.18.0 for 0.18)",
        )
    for (size, conc), (v, why) in PAIR_FINGERPRINTS.items():
        if f"kv_cache_utils.py:{size}" in sources and f"kv_cache_utils.py:{conc}" in sources:
            return v, f"not printed; inferred from the capacity lines' source, kv_cache_utils.py:{size}/{conc} ({why})"
    for src in sorted(sources):
        if src in SOURCE_FINGERPRINTS:
            v, why = SOURCE_FINGERPRINTS[src]
            return v, f"not printed; inferred from the line source {src} ({why})"
    if "v0_profiling_results" in markers:
        return "0.6.4", "not printed; inferred from the V0 'Memory profiling results:' line format (0.6.4, late 2024)"
    if (floor := metrics_floor(markers)) is not None:
        return None, f"not printed; {floor[0]} or later: {floor[1]}"
    return None, "not printed and not inferable from the line formats"


def rules_version(version: str | None, generation: str | None, markers: set[str]) -> tuple[str | None, str]:
    """The version whose ledger rules to apply, and why."""
    if _beyond_read(version):
        return LATEST, (f"vLLM {version}, newer than {LATEST}, the newest release whose code was read: its rules "
                        "apply, and a newer engine may size its memory differently")
    v = _ver(version)
    if generation == "v0":
        if v is not None and v < (0, 8, 0):
            return version, f"vLLM {version} (V0 engine)"
        why = f"the log comes from vLLM {version}'s V0 engine" if version else "V0-engine log lines"
        return "0.7.3", why + "; the ledger's V0 rules (versions before 0.8) apply"
    if generation == "v1" or markers & _V1_MARKERS:
        if v is not None and v >= (0, 8, 0):
            return version, f"vLLM {version} (V1 engine)"
        if v is not None:
            return "0.8.5", f"vLLM {version}'s V1 engine; the earliest V1 rules the ledger has (0.8) apply"
        if "blocks_only" in markers and "kv_tokens" not in markers:
            return (  # the early V1 format came with vLLM's PR #12569
                "0.8.5",
                "version not printed; '# GPU blocks: N' from kv_cache_utils.py is the early V1 format (0.7): V1 rules "
                "of 0.8 apply",
            )
        if "one_line_capacity" in markers:
            return "0.33.0", "version not printed; the one-line capacity report is the 0.33 format"
        if (floor := metrics_floor(markers)) is not None and parse_version(floor[0]) > _FALLBACK:
            return LATEST, (f"version not printed; the metrics lines date the log to {floor[0]} or later: the newest "
                            f"rules in that range, {LATEST}'s (the newest release read), apply (pass --engine-version "
                            "to choose)")
        dated = f" (the metrics lines date it to {floor[0]} or later)" if floor is not None else ""
        return (
            "0.11.0",
            f"version not printed; V1 lines{dated}: the ledger's 0.10–0.20 rules apply (pass --engine-version to "
            "choose)",
        )
    return (version, f"vLLM {version}") if v is not None else (None, "no vLLM version or engine generation found")
