"""The report's HTML kept on disk for identical data: drawing eight figures with matplotlib is most of a report's time
once its simulations are stored (kvledger.analyses.serving.sim_cache).

The HTML is a pure function of the report data (the figures are deterministic SVG: fixed hash salt, no
date), the code that draws it and matplotlib with its settings. It is stored under a SHA-256 key of the
data as strict JSON, the ``kvledger`` package fingerprint (every file's bytes, the Python and numpy
versions), matplotlib's version and any ``matplotlibrc`` it would read (the working folder's,
``$MPLCONFIGDIR``'s, the user's), in the same cache folder as the simulations (``reports/``);
``KVLEDGER_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from kvledger.analyses.serving import sim_cache
from kvledger.analyses.serving.report_data import ReportData
from kvledger.report.jsonout import strict_json

__all__ = ["report_html"]


def _matplotlib_part() -> str:
    try:
        parts = [version("matplotlib")]
    except PackageNotFoundError:
        parts = ["?"]
    parts += [os.environ.get(k, "") for k in ("MPLCONFIGDIR", "MPLBACKEND", "MATPLOTLIBRC")]
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    for d in (".", os.environ.get("MPLCONFIGDIR") or "", str(Path(xdg) / "matplotlib"),
              os.environ.get("MATPLOTLIBRC") or ""):
        p = Path(d) / "matplotlibrc" if d and Path(d).is_dir() else Path(d) if d else None
        try:
            parts.append(hashlib.sha256(p.read_bytes()).hexdigest() if p is not None and p.is_file() else "")
        except OSError:
            parts.append("")
    return "|".join(parts)


def report_html(data: ReportData, pool: Any = None) -> str:
    """``render_html(data, report_figures(data))``, from the store when the same data was drawn before; with a ``pool``
    (kvledger.report.report_pool) the figures are drawn there (same bytes)."""
    from kvledger.report.html_report import render_html, report_figures
    from kvledger.report.report_pool import figures_in_pool

    key = hashlib.sha256("\n".join((strict_json(data.to_dict()), sim_cache.code_fingerprint(),
                                    _matplotlib_part())).encode()).hexdigest() + ".html"
    got = sim_cache.load_bytes("reports", key)
    if got is not None:
        return got.decode("utf-8")
    html = render_html(data, report_figures(data) if pool is None else figures_in_pool(data, pool))
    sim_cache.store_bytes("reports", key, html.encode("utf-8"))
    return html
