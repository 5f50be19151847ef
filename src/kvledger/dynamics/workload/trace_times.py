"""Azure LLM inference trace timestamps, row by row: the 2023 release's naive ``YYYY-MM-DD HH:MM:SS.fffffff`` and the
2024 release's ``YYYY-MM-DD HH:MM:SS.ffffff+00:00`` (Azure/AzurePublicDataset, AzureLLMInferenceDataset2023.md and
AzureLLMInferenceDataset2024.md; the 2024 files also hold rows without a fraction, ``00:00:00+00:00``).

A time with a UTC offset is converted to UTC, so a file mixing offsets still gives true gaps; a naive time is taken as
written. The vectorised readers (``trace_arrow.py``) read the same forms and hand anything else to this one, which
names the row.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from kvledger.errors import FormatError

__all__ = ["azure_ns", "AZURE_TIME_FORMS"]

AZURE_TIME_FORMS = "'YYYY-MM-DD HH:MM:SS.fffffff' (Azure 2023) or 'YYYY-MM-DD HH:MM:SS.ffffff+00:00' (Azure 2024)"


def _offset_s(text: str) -> tuple[str, int]:
    """(the clock without its UTC offset, the offset in s east of UTC); 0 for a naive clock. Raises ValueError."""
    if text.endswith("Z"):
        return text[:-1], 0
    for sign in ("+", "-"):
        clock, found, zone = text.rpartition(sign)
        if found:
            hh, colon, mm = zone.partition(":")
            if not (len(hh) == 2 and hh.isdigit() and (not colon or (len(mm) == 2 and mm.isdigit()))):
                raise ValueError
            minutes = int(hh) * 60 + int(mm or "0")
            if minutes >= 24 * 60:
                raise ValueError
            return clock, (1 if sign == "+" else -1) * minutes * 60
    return text, 0


def azure_ns(text: str, path: Path, where: str, days: dict[str, int]) -> int:
    """``YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]`` → integer ns on a day-ordinal clock, UTC when an offset is given
    (fraction of any length, truncated to ns). ``days`` caches each date's ordinal. Raises FormatError naming ``where``.
    """
    try:
        date, clock = text.strip().split(" ")
        clock, offset_s = _offset_s(clock)
        hms, _, frac = clock.partition(".")
        h, m, s = (int(x) for x in hms.split(":"))
        if date not in days:
            days[date] = _dt.date.fromisoformat(date).toordinal()
        if not (0 <= h < 24 and 0 <= m < 60 and 0 <= s < 61) or (frac and not frac.isdigit()):
            raise ValueError
        seconds = days[date] * 86400 + h * 3600 + m * 60 + s - offset_s
        return seconds * 10**9 + int((frac or "0").ljust(9, "0")[:9])
    except ValueError:
        raise FormatError(str(path), f"{text!r} is not a time {AZURE_TIME_FORMS}", where) from None
