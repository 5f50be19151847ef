"""Whether a measured-run file is one of the points the stored error bands were built from.

``benchmarks/lodo_bands.py --write-bands`` keeps, beside the bands, the sha256 of every measured file behind them with
its deployment (``member_files``). A run validated from such a file is in sample for the bands: its deployment's
errors helped set them (below saturation its stages' TTFT and TPOT, past it the sweep's or run's saturation
throughput), so "inside its band" there is partly by construction (a fresh-user trial found kubecon's 1 req/s TTFT
error, −71.14%, to be exactly the band's lower end). The bands' own check leaves each deployment out in turn
(``coverage_leave_one_out``), which :func:`held_out_coverage` reports. The file's bytes are compared, not its path, so
a copy elsewhere is recognised and an edited file is not.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from kvledger.ledgers.error_band import stored_bands

__all__ = ["band_member", "file_sha256", "held_out_coverage"]

_MAX_BYTES = 1 << 28  # a file above 256 MiB is not hashed (the bands' files are a few MB at most)


def file_sha256(path: str | Path) -> str | None:
    """The sha256 of the file at ``path`` (its bytes, so a copy elsewhere has the same and an edited file another), or
    None: not a file, above 256 MiB, or unreadable. The run's fingerprint for the bands' members and for a GPU profile's
    fitted runs (``calibration.in_sample``)."""
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > _MAX_BYTES:
            return None
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except (OSError, ValueError):  # a name the file system refuses, or a NUL byte: no file
        return None


def band_member(path: str | Path) -> str | None:
    """The deployment of the stored bands whose measured file ``path`` is (by content), or None: not one, not a file,
    or unreadable."""
    members: dict[str, Any] = stored_bands().get("member_files") or {}
    digest = file_sha256(path) if members else None
    found = members.get(digest) if digest else None
    return str(found) if found else None


def held_out_coverage(regime: str) -> dict[str, tuple[int, int]]:
    """metric → (covered, checked) points of ``regime`` when each deployment's band was built without it (the bands'
    leave-one-deployment-out check); empty when the file has none for the regime."""
    cov = (stored_bands().get("coverage_leave_one_out") or {}).get(regime) or {}
    return {m: (int(v[0]), int(v[1])) for m, v in cov.items() if isinstance(v, list) and len(v) == 2}
