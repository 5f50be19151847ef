"""The vLLM releases published on PyPI, so that a version no release carries (``--engine-version 0.19.7``) is named.

``LAST_PATCH``: for each minor release from 0.5 on, its newest patch release, read from PyPI's JSON index of the
``vllm`` project (``https://pypi.org/pypi/vllm/json``, read 2026-12-06; post releases such as 0.10.1.1 and
0.8.5.post1 are left out: ``version_tuple`` reads them as their release). Every minor's patches run from 0 up to it
without a gap (0.19: 0.19.0, 0.19.1; 0.20: 0.20.0–0.20.2). A newer patch of the newest minor may have been published
since the list was read, so the note says when the list was read.
"""

from __future__ import annotations

import re

from kvledger.accounting.notes import NO_SUCH_RELEASE

__all__ = ["RELEASE_STRING", "LAST_PATCH", "RELEASES_READ_ON", "release_exists", "unknown_release_note"]

RELEASE_STRING = re.compile(r"^v?\d+\.\d+(?:\.\d+){0,2}(?:[-_.]?(?:a|b|rc|c|alpha|beta|pre|post|dev)\d*)*"
                            r"(?:\+[0-9a-z.]+)?$", re.IGNORECASE)
"""A whole release string as PEP 440 writes one (0.10.1.1, 0.24.0rc1, 0.13.1.dev8+g2841a84ac, 0.11.2+rhai1): nothing
after it, so "0.19.0,0.33.0" is refused instead of read as 0.19.0."""

RELEASES_READ_ON = "2026-12-06"
"""The day PyPI's release list below was read."""

LAST_PATCH: dict[tuple[int, int], int] = {
    (0, 5): 5, (0, 6): 6, (0, 7): 3, (0, 8): 5, (0, 9): 2, (0, 10): 2, (0, 11): 2, (0, 12): 0, (0, 13): 0,
    (0, 14): 1, (0, 15): 1, (0, 16): 0, (0, 17): 1, (0, 18): 1, (0, 19): 1, (0, 20): 2, (0, 21): 0, (0, 22): 1,
    (0, 23): 0, (0, 24): 0, (0, 25): 1, (0, 26): 0, (0, 27): 1, (0, 28): 0, (0, 29): 0, (0, 30): 0, (0, 31): 0,
    (0, 32): 0, (0, 33): 0, (0, 34): 0,
}


def release_exists(ver: tuple[int, int, int]) -> bool | None:
    """Whether PyPI lists ``ver``; None where its minor is outside the list (before 0.5 or after the newest)."""
    last = LAST_PATCH.get(ver[:2])
    if last is None:
        return None
    return ver[2] <= last


def unknown_release_note(ver: tuple[int, int, int]) -> str | None:
    """The note for a version whose minor release is listed but whose patch release is not, or None."""
    if release_exists(ver) is not False:
        return None
    major, minor, patch = ver
    last = LAST_PATCH[(major, minor)]
    listed = ", ".join(f"{major}.{minor}.{p}" for p in range(last + 1))
    newest = f"{major}.{minor}.{last}"
    return (f"vLLM {major}.{minor}.{patch} {NO_SUCH_RELEASE} {listed} for {major}.{minor} (its release list, "
            f"read {RELEASES_READ_ON}); planned with the rules of {newest}, the newest {major}.{minor} release. A "
            f"typo? Pass the version your server prints (`vllm --version`)")
