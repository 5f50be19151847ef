"""ServeGen-style workload generation: requests sampled from real per-client rate and length distributions.

ServeGen (Xiang et al., arXiv:2505.09999; ``alibaba/ServeGen``) publishes, per anonymised client of a
production model, one row per 600 s window (mean rate, gap CV, fitted Gamma/Weibull gap distribution)
and per 6 h window the PMFs of input and output lengths. Generation follows ServeGen's
``construct.generate_workload``: in each active window draw ``ceil(rate × 600)`` gaps from the fitted
distribution, rescale them so they sum to 600 s (the window then holds the measured mean rate), place
them from the window start, drop those past its end, and draw each request's lengths from the PMFs of
the 6 h window it falls in. A small subset of clients is bundled (see ``data/SOURCES.md``); pass
``data_dir`` to use a full ServeGen ``data/`` folder.
"""

from __future__ import annotations

import ast
import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.workload.synthetic import make_rng
from kvledger.errors import FormatError, InputError, UnknownNameError

__all__ = ["ClientWindow", "ServeGenClient", "list_clients", "load_client", "generate_servegen"]

WINDOW_S = 600.0
DATASET_WINDOW_S = 21600


@dataclass(frozen=True, slots=True)
class ClientWindow:
    """One 600 s window of a client: ``rate_per_s`` mean rate, ``cv`` of gaps, fitted ``pattern`` with
    scipy-style ``shape``/``scale`` (Gamma: a, scale; Weibull: c, scale); ``pattern`` None = idle."""

    start_s: float
    rate_per_s: float
    cv: float
    pattern: str | None
    shape: float
    scale: float


@dataclass(frozen=True, slots=True, eq=False)
class ServeGenClient:
    """A client's windows and its per-6 h length PMFs (parsed on first use).

    Attributes:
        model: ServeGen model folder, e.g. "deepseek-r1", "m-large".
        client: client number (the N of ``chunk-N``).
        windows: 600 s windows in time order.
        dataset_path: the ``chunk-N-dataset.json`` file.
    """

    model: str
    client: int
    windows: tuple[ClientWindow, ...]
    dataset_path: Path
    _raw: dict = field(default_factory=dict, repr=False)

    @property
    def client_id(self) -> str:
        return f"{self.model}/{self.client}"

    def mean_rate_per_s(self, start_s: float, end_s: float) -> float:
        """Mean offered rate over ``[start_s, end_s)``, req/s (window rates weighted by overlap)."""
        total = sum(w.rate_per_s * _overlap(w.start_s, start_s, end_s) for w in self.windows if w.pattern)
        return total / (end_s - start_s)

    def lengths(self, t_s: float, field_name: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, cumulative probabilities) of a length PMF for the 6 h window holding ``t_s``; an empty
        window borrows the nearest non-empty one in time."""
        if not self._raw:
            self._raw.update(_read_dataset(self.dataset_path))
        key = int(t_s // DATASET_WINDOW_S) * DATASET_WINDOW_S
        candidates = sorted(self._raw, key=lambda k: (abs(k - key), k))
        for k in candidates:
            pmf = _pmf(self.dataset_path, k, field_name, self._raw[k].get(field_name, "{}"))
            if pmf is not None:
                return pmf
        raise FormatError(str(self.dataset_path), f"no window has a non-empty {field_name!r} distribution")


def _overlap(w_start: float, start_s: float, end_s: float) -> float:
    return max(0.0, min(w_start + WINDOW_S, end_s) - max(w_start, start_s))


def _data_root(data_dir: str | Path | None) -> Path:
    return (
        Path(data_dir)
        if data_dir is not None
        else Path(str(resources.files("kvledger.dynamics.workload") / "data" / "servegen"))
    )


def list_clients(data_dir: str | Path | None = None) -> list[tuple[str, int]]:
    """(model, client) pairs with both a trace CSV and a dataset JSON, sorted."""
    out = []
    for trace in _data_root(data_dir).glob("*/*/chunk-*-trace.csv"):
        client = trace.name.split("-")[1]
        if client.isdigit() and (trace.parent / f"chunk-{client}-dataset.json").is_file():
            out.append((trace.parent.name, int(client)))
    return sorted(out)


def _read_windows(path: Path) -> tuple[ClientWindow, ...]:
    windows = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            cells = line.rstrip("\r\n").split(",")
            if len(cells) != 6:
                raise FormatError(str(path), f"expected 6 fields (window_start_s,rate,cv,pattern,shape,scale), got "
                                  f"{len(cells)}", f"line {line_no}")
            names = ("window_start_s", "rate", "cv", None, "shape", "scale")
            nums = []
            for col, (name, cell) in enumerate(zip(names, cells), start=1):
                if name is None:
                    continue
                try:
                    nums.append(float(cell))
                except ValueError:
                    raise FormatError(str(path), f"{name} {cell!r} is not a number",
                                      f"line {line_no}, column {col}") from None
            pattern = cells[3] or None
            if pattern not in (None, "Gamma", "Weibull"):
                raise FormatError(str(path), f"unknown pattern {pattern!r} (Gamma, Weibull or empty)", f"line "
                    f"{line_no}, column 4")
            windows.append(ClientWindow(nums[0], nums[1], nums[2], pattern if nums[1] > 0 else None, nums[3], nums[4]))
    return tuple(sorted(windows, key=lambda w: w.start_s))


def _read_dataset(path: Path) -> dict[int, dict[str, str]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise FormatError(str(path), f"cannot read ServeGen dataset JSON: {err}") from None
    try:
        return {int(k): dict(v) for k, v in raw.items()}
    except (TypeError, ValueError, AttributeError):
        raise FormatError(str(path), "expected {window_start_s: {field: '<dict literal>'}}") from None


def _pmf(path: Path, window: int, field_name: str, text: str) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        pmf = ast.literal_eval(text)
        values = np.array(sorted(pmf), dtype=np.float64)
        probs = np.array([pmf[v] for v in sorted(pmf)], dtype=np.float64)
    except (ValueError, SyntaxError, TypeError):
        raise FormatError(str(path), "not a dict literal {value: probability}",
                          f"window {window}, field {field_name!r}") from None
    if len(values) == 0 or probs.sum() <= 0:
        return None
    return values, np.cumsum(probs) / probs.sum()


@functools.lru_cache(maxsize=32)
def _load_cached(root: str, model: str, client: int) -> ServeGenClient:
    traces = list(Path(root).glob(f"*/{model}/chunk-{client}-trace.csv"))
    if not traces:
        known = [f"{m}/{c}" for m, c in list_clients(root)]
        raise UnknownNameError("ServeGen client", f"{model}/{client}", known)
    trace = traces[0]
    dataset = trace.parent / f"chunk-{client}-dataset.json"
    if not dataset.is_file():
        raise InputError(f"ServeGen client {model}/{client} has no length distributions ({dataset.name} missing)")
    return ServeGenClient(model, client, _read_windows(trace), dataset)


def load_client(model: str, client: int, *, data_dir: str | Path | None = None) -> ServeGenClient:
    """A client by model folder and number (bundled: deepseek-r1 3/12/13/35/48/54, m-large 143)."""
    return _load_cached(str(_data_root(data_dir)), model, int(client))


def _window_times(w: ClientWindow, rate: float, rng: np.random.Generator) -> np.ndarray:
    n = int(math.ceil(rate * WINDOW_S))
    if w.pattern == "Gamma":
        gaps = rng.gamma(w.shape, w.scale, size=n)
    else:
        gaps = w.scale * rng.weibull(w.shape, size=n)
    total = gaps.sum()
    if not total > 0:
        gaps, total = np.ones(n), float(n)
    times = w.start_s + np.cumsum(gaps * (WINDOW_S / total))
    return times[times < w.start_s + WINDOW_S]


def _sample(dist: tuple[np.ndarray, np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    values, cdf = dist
    idx = np.minimum(np.searchsorted(cdf, rng.random(n), side="left"), len(values) - 1)
    return np.maximum(np.rint(values[idx]), 1).astype(np.int64)


def generate_servegen(
    clients: Sequence[ServeGenClient], *, start_s: float, duration_s: float, seed: int | np.random.Generator,
    rate: float | None = None, rate_scale: float | None = None,
) -> list[RequestSpec]:
    """Requests from ``clients`` over ``[start_s, start_s + duration_s)`` of their timeline, re-based to t = 0.

    Args:
        clients: from :func:`load_client`.
        start_s: where on the clients' timeline to start, s (ServeGen windows start at 0).
        duration_s: span to generate, s (> 0).
        seed: int or numpy Generator; draws go client by client, window by window.
        rate: target mean aggregate rate over the span, req/s (every client's rate scaled by one factor).
        rate_scale: multiply every client's rate by this factor instead.

    Returns:
        ``RequestSpec`` list sorted by arrival (ties by client order), ids ``servegen-<i>``,
        ``client_id`` = "model/client". Token counts below 1 are raised to 1.
    """
    if not (duration_s > 0 and math.isfinite(duration_s)) or not (start_s >= 0 and math.isfinite(start_s)):
        raise InputError(f"need start_s ≥ 0 and a finite duration_s > 0, got {start_s}, {duration_s}")
    if rate is not None and rate_scale is not None:
        raise InputError("give either rate (req/s) or rate_scale, not both")
    end_s = start_s + duration_s
    offered = sum(c.mean_rate_per_s(start_s, end_s) for c in clients)
    factor = 1.0 if rate_scale is None else float(rate_scale)
    if rate is not None:
        if not offered > 0:
            raise InputError(f"the clients are idle in [{start_s:g}, {end_s:g}) s; no rate to scale")
        factor = rate / offered
    if not (factor > 0 and math.isfinite(factor)):
        raise InputError(f"rate scale factor must be a finite number > 0, got {factor}")
    rng = make_rng(seed)
    rows: list[tuple[float, int, str, int, int]] = []
    for order, client in enumerate(clients):
        for w in client.windows:
            if not w.pattern or _overlap(w.start_s, start_s, end_s) <= 0:
                continue
            times = _window_times(w, w.rate_per_s * factor, rng)
            times = times[(times >= start_s) & (times < end_s)]
            if len(times) == 0:
                continue
            prompt = _sample(client.lengths(w.start_s, "input_tokens"), len(times), rng)
            output = _sample(client.lengths(w.start_s, "output_tokens"), len(times), rng)
            rows.extend(zip(times.tolist(), [order] * len(times), [client.client_id] * len(times),
                            prompt.tolist(), output.tolist()))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [RequestSpec(f"servegen-{i}", t - start_s, p, o, client_id=cid) for i, (t, _, cid, p, o) in enumerate(rows)]
