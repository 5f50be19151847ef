"""The optional compiled core (``stretch_core.c``): loaded when it was built and not switched off, else None.

``core`` is the C module, or None when it was not compiled (no compiler at install: hatch_build.py), was built from
another version of ``stretch_core.c``, or ``KVLEDGER_PURE_PYTHON=1`` is set in the environment. Its callers keep their
pure-Python code as the fallback and the reference: both give every figure bit for bit the same
(tests/dynamics/test_native_core.py runs the same simulations both ways).
"""

from __future__ import annotations

import os

__all__ = ["core", "CORE_VERSION", "load"]

CORE_VERSION = 10  # the VERSION stretch_core.c declares for the functions its callers here expect


def load():
    """The compiled core, or None (see the module doc)."""
    if os.environ.get("KVLEDGER_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from kvledger.dynamics.fast import stretch_core
    except ImportError:
        return None
    return stretch_core if getattr(stretch_core, "VERSION", None) == CORE_VERSION else None


core = load()
