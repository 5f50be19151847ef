"""dir(kvledger) lists the lazily imported calls (PEP 562 __dir__), so a user exploring the API finds plan et al."""

from __future__ import annotations

import kvledger


def test_dir_lists_every_exported_name_before_first_use():
    names = dir(kvledger)
    assert set(kvledger.__all__) <= set(names)
    assert {"plan", "simulate", "goodput", "cost", "search"} <= set(names)
