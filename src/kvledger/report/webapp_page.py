"""The single page of ``kvledger ui`` (``report/data/webapp.html``): a form, the headline numbers and the figures,
updated from the JSON endpoints (inline CSS and script, nothing fetched from elsewhere)."""

from __future__ import annotations

from importlib import resources

__all__ = ["PAGE"]

PAGE = (resources.files("kvledger.report") / "data" / "webapp.html").read_text(encoding="utf-8")
