"""The error band of a simulated figure: how far the simulator has been off, per regime, on measured runs it was not
fitted to, as an 80% range around a prediction.

The bands come from ``ledgers/data/error_bands.json``, written by ``python benchmarks/validate_all.py --sections lodo
--write-bands`` from a leave-one-deployment-out validation over every measured run the project has (provenance inside
the file). For a metric, the errors e = predicted/measured − 1 of the runs in a regime give an 80% prediction interval
[q10, q90] (split-conformal ranks from 10 values, each deployment weighted once however many load stages it ran:
``kvledger.ledgers.conformal``; a t interval below; the file says which); a prediction x then stands for a measured
value in [x/(1 + q90), x/(1 + q10)]. A regime is the calibration scope that priced the run ("gpu": a GPU profile;
"model": a model-scope profile or bundled table; "uncalibrated": the plain roofline), the architecture (dense / moe) and
the engine (vllm / sglang). A regime without measured runs borrows the band of the nearest one that has them (same scope
first) and says so: that band is then a floor, not a measurement.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["Band", "error_band", "regime_of", "scope_words", "band_text", "METRICS", "flips_inside", "stored_bands",
           "ONE_POINT"]

#: metrics with a band: mean TTFT, mean TPOT, throughput at saturation (capacity; cost per request is its inverse)
METRICS = ("ttft_mean", "tpot_mean", "throughput")
MIN_RUNS_FOR_QUANTILES = 5
_SCOPES = ("gpu", "model", "uncalibrated")
#: what a band carried to where none of its errors was measured (another GPU, a setting no run had) is: its width the
#: least error to expect there, not a measurement (the figure it surrounds is no floor: "a floor for it" read so)
FLOOR = "its width a floor for the error there, not a measurement"
#: the ``method`` of a regime's only measured value: no interval of its own; the nearest regime's band is widened to
#: take it in (``error_band``)
ONE_POINT = "one measured point"


@dataclass(frozen=True)
class Band:
    """An 80% band of one metric in one regime, as multipliers of a prediction.

    Attributes:
        regime: the regime asked for. metric: one of ``METRICS``. low / high: the measured value lies in
            [low × prediction, high × prediction] on 80% of the runs (``1/(1+q90)``, ``1/(1+q10)``).
        num_runs: runs the band comes from. source: where it came from, in words (a borrowed band says so).
        lent_from: the regime whose measured runs a borrowed band comes from (``regime`` had none for ``metric``: the
            band's width is a floor for the error there, not a measurement); None when the band is the regime's own.
        cross_model: the band is the cross-model one (GPU profiles judged on models they were not fitted on), standing
            for a GPU regime with no point of its own (``_regimes``), not a leave-one-deployment-out band.
        gpu_ids: catalog ids of the GPUs the band's deployments ran on (empty: the file does not say).
        elsewhere: the clause ``on_gpu`` added to ``source`` for a GPU none of them ran on ("measured on … only, not on
            …: ``FLOOR``"; on a GPU with no measured run at all, "no measured run on …: the unmeasured-GPU band
            …"), for a line that names the band without its whole source; "" else.
    """

    regime: str
    metric: str
    low: float
    high: float
    num_runs: int
    source: str
    lent_from: str | None = None
    cross_model: bool = False
    gpu_ids: tuple[str, ...] = ()
    elsewhere: str = ""

    def on_gpu(self, gpu_id: str | None, gpu_name: str = "") -> Band:
        """This band for a figure on ``gpu_id``: where its deployments ran on other GPUs only, its source says so
        (the errors were measured elsewhere: a floor for this GPU, not a measurement of it); else itself. On a GPU
        with no measured run behind any stored band, widened to the unmeasured-GPU band (leave one GPU out:
        ``kvledger.ledgers.unmeasured_gpu``)."""
        if not gpu_id or not self.gpu_ids or gpu_id in self.gpu_ids:
            return self
        from kvledger.catalog.gpus import get_gpu

        if gpu_id not in _measured_gpus():
            return self._unmeasured(gpu_name or gpu_id)

        names = ", ".join(get_gpu(g).name for g in self.gpu_ids)
        said = f"measured on {names} only, not on {gpu_name or gpu_id}"
        floor = "" if FLOOR in self.source else f": {FLOOR}"  # said once
        return replace(self, source=self.source + f"; {said}{floor}", elsewhere=f"{said}: {FLOOR}")

    def _unmeasured(self, gpu_name: str) -> Band:
        """``on_gpu`` on a GPU with no measured run: widened, per side, to the unmeasured-GPU band of its architecture
        and engine (``unmeasured_gpu.widened``), said so; itself with that said where the file has none."""
        from kvledger.ledgers.unmeasured_gpu import unmeasured_entry, widened

        found = unmeasured_entry(_table(), self.regime, self.metric)
        if found is None:
            said = f"no measured run on {gpu_name} and no unmeasured-GPU band for {self.metric}: {FLOOR}"
            return replace(self, source=f"{self.source}; {said}", elsewhere=said)
        lo, hi, short, detail = widened(self.regime, self.errors(), found, gpu_name)
        return replace(self, low=1.0 / (1.0 + hi), high=1.0 / (1.0 + lo), num_runs=max(self.num_runs,
                       found[1]["num_runs"]), source=f"{self.source}; {short} {detail}", elsewhere=short)

    def beyond(self, setting: str | None) -> Band:
        """This band for a figure under a ``setting`` none of its measured runs had (data parallelism, a TP group
        across nodes): its source says so (``FLOOR``); itself for None."""
        if not setting:
            return self
        floor = "" if FLOOR in self.source else f": {FLOOR}"  # said once
        return replace(self, source=f"{self.source}; measured on runs without {setting} (none with it){floor}")

    def around(self, value: float) -> tuple[float, float]:
        """The band around a predicted ``value`` (same unit)."""
        return value * self.low, value * self.high

    def errors(self) -> tuple[float, float]:
        """(q10, q90) of the error predicted/measured − 1 the band stands for (``low`` = 1/(1+q90), ``high`` =
        1/(1+q10))."""
        return 1.0 / self.high - 1.0, 1.0 / self.low - 1.0


_FILE = "kvledger/ledgers/data/error_bands.json"


def _evidence_words(provenance: dict[str, Any]) -> str:
    """How many measured deployments the bands were built from, in words (never a path outside the package)."""
    n = len(provenance.get("deployments") or [])
    return f"out of {n} measured vLLM deployments, each left out in turn" if n else "out of the measured deployments"


def _pooled_words(e: dict[str, Any], metric: str) -> str:
    """" of K deployments with such a point (…), each weighted once" — which deployments a metric's band rests on:
    latency bands on stages below saturation, the throughput band on runs driven past it (lodo_bands); the method
    when it is not the pooled ranks."""
    k = e.get("num_deployments")
    if not k:
        return ""
    such = "a run past saturation" if metric == "throughput" else "a run or stage below saturation"
    method = str(e.get("method", ""))
    how = ("each weighted once" if method.startswith("split-conformal") else
           "too few for ranks: a t prediction interval" if method.startswith("t prediction") else method)
    return (f" of the one deployment with {such} ({how})" if k == 1 else
            f" of the {k} deployments with {such}, {how}")


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    path = Path(str(resources.files("kvledger.ledgers") / "data" / "error_bands.json"))
    return json.loads(path.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def _regimes() -> dict[str, dict[str, Any]]:
    """The regimes' bands, a GPU-calibrated regime's missing metric filled from the ``cross_model`` band of the same
    key: leaving each deployment out, its runs priced by a GPU profile are also the cross-model runs (a profile
    fitted on the other deployments' models), and latency is compared below saturation only, where the pool of a
    regime can be empty (every GPU-calibrated per-request run saturated). The entry says so (``cross_model``)."""
    table = _table()
    out = {k: dict(v) for k, v in table["regimes"].items()}
    for key, ms in (table.get("cross_model") or {}).items():
        if not isinstance(ms, dict) or not key.startswith("gpu/"):
            continue
        for m, b in ms.items():
            if isinstance(b, dict) and m not in out.get(key, {}):
                out.setdefault(key, {})[m] = {**b, "cross_model": b.get("data", "cross-model evidence")}
    return out


@functools.lru_cache(maxsize=1)
def _measured_gpus() -> frozenset[str]:
    """The GPUs with a measured run behind a stored band (``unmeasured_gpu.measured_gpu_ids`` of the file)."""
    from kvledger.ledgers.unmeasured_gpu import measured_gpu_ids

    return measured_gpu_ids(_table())


def stored_bands() -> dict[str, Any]:
    """The whole ``error_bands.json`` (regimes, provenance, coverage, and the ``cross_model`` band of
    ``kvledger.ledgers.profile_band``)."""
    return _table()


def scope_words(regime: str) -> str:
    """How a band's regime (``scope/architecture/engine``, :func:`regime_of`) names what priced the figure, in words:
    "uncalibrated roofline", "GPU-calibrated roofline" or "model-calibrated"."""
    return {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                         "model-calibrated")


def regime_of(scope: str | None, is_moe: bool = False, engine: str = "vllm") -> str:
    """The regime key ``scope/arch/engine`` (scope: "gpu", "model" or anything else → "uncalibrated")."""
    s = scope if scope in ("gpu", "model") else ("model" if scope and scope.startswith("model") else "uncalibrated")
    return f"{s}/{'moe' if is_moe else 'dense'}/{'sglang' if engine == 'sglang' else 'vllm'}"


def _nearest(regime: str, have: dict[str, Any], metric: str) -> str | None:
    scope, arch, engine = regime.split("/")
    lenders = (k for k, v in have.items() if metric in v and v[metric].get("method") != ONE_POINT)
    ranked = sorted(lenders, key=lambda k: (
        k.split("/")[0] != scope, k.split("/")[1] != arch, k.split("/")[2] != engine,
        _SCOPES.index(k.split("/")[0]) if k.split("/")[0] in _SCOPES else 9))
    # a calibrated regime may borrow from uncalibrated runs (wider), never the other way round
    if scope == "uncalibrated":
        ranked = [k for k in ranked if k.startswith("uncalibrated/")]
    return ranked[0] if ranked else None


def error_band(regime: str, metric: str) -> Band | None:
    """The 80% band of ``metric`` in ``regime`` (``regime_of``), or None when no measured run can stand for it. A
    regime with no interval of its own takes the nearest regime's band, widened to take in any single measured point
    (``ONE_POINT``) of its scope and architecture — its own, or another engine's (an SGLang MoE figure takes the vLLM
    MoE run's)."""
    table = _table()
    have = _regimes()
    own = have.get(regime, {}).get(metric)
    key = regime if own is not None and own.get("method") != ONE_POINT else _nearest(regime, have, metric)
    if key is None:
        return None
    e = have[key][metric]
    src = (f"leave-one-deployment-out errors at {e['num_runs']} measured points (runs or sweep stages)"
           f"{_pooled_words(e, metric)}; {_evidence_words(table['provenance'])}; {_FILE}") if "cross_model" not in e \
        else (
        f"errors of GPU profiles fitted on other models, on {e['num_runs']} measured points (no point of this "
        f"regime's own below saturation; {e['cross_model']}; {_FILE})")
    q10, q90, n = e["q10"], e["q90"], e["num_runs"]
    points = [] if key == regime else [(k, v[metric]["q10"]) for k, v in sorted(have.items()) if metric in v
                                         and v[metric].get("method") == ONE_POINT
                                         and k.split("/")[:2] == regime.split("/")[:2]]
    if points:
        q10, q90, n = min(q10, *(p for _, p in points)), max(q90, *(p for _, p in points)), n + len(points)
        src += (f"; regime {regime}: too few measured points for an interval of its own — "
                + ", ".join(f"{k} {p:+.1%}" for k, p in points) + f" —: band of {key} widened to take them in")
    elif key != regime:
        src += f"; no measured run in regime {regime}: band of {key}, {FLOOR}"
    return Band(regime, metric, 1.0 / (1.0 + q90), 1.0 / (1.0 + q10), n, src,
                lent_from=None if key == regime else key, cross_model="cross_model" in e,
                gpu_ids=tuple(e.get("gpu_ids") or ()) if not points else ())


def band_text(value: float, band: Band | None, fmt: str = "{:.3g}", label: str | None = None) -> str:
    """``"(80% band LOW–HIGH, LABEL)"`` for a predicted value, or a sentence saying no band exists."""
    if band is None:
        return "(no error band: no measured run stands for this regime)"
    lo, hi = band.around(value)
    scope = label or band.regime.split("/")[0].replace("uncalibrated", "uncalibrated roofline").replace(
        "gpu", "GPU-calibrated roofline").replace("model", "model-calibrated")
    return f"(80% band {fmt.format(lo)}–{fmt.format(hi)}, {scope})"


def flips_inside(value_a: float, value_b: float, band: Band | None) -> bool:
    """True when two predictions priced in the same regime are closer than the band's width: which is larger may
    flip inside the band (a decision between them is not settled by the simulator)."""
    if band is None or value_a <= 0 or value_b <= 0:
        return band is None
    ratio = max(value_a, value_b) / min(value_a, value_b)
    return ratio < band.high / band.low
