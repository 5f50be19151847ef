"""The vLLM releases published on PyPI, so that a version no release carries (``--engine-version 0.19.7``) is named.

``LAST_PATCH``: for each minor release from 0.5 on, its newest patch release, read from PyPI's JSON index of the
``vllm`` project (``https://pypi.org/pypi/vllm/json``, read 2026-12-06; post releases such as 0.10.1.1 and
0.8.5.post1 are left out: ``version_tuple`` reads them as their release). Every minor's patches run from 0 up to it
without a gap (0.19: 0.19.0, 0.19.1; 0.20: 0.20.0–0.20.2). A newer patch of the newest minor may have been published
since the list was read, so the note says when the list was read.
"""

from __future__ import annotations

import re

from kvledger.accounting.notes import NEWER_THAN_READ, NO_SUCH_RELEASE

__all__ = ["RELEASE_STRING", "LAST_PATCH", "RELEASES_READ_ON", "PRE_RELEASE", "DEV_BUILD", "NOT_READ_HERE",
           "release_exists", "unknown_release_note", "dev_build_base", "prerelease_note", "assumed_rules_note",
           "release_lines"]

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


PRE_RELEASE = "is a pre-release, planned with the rules of"
"""Words of :func:`prerelease_note` for an alpha, beta or release candidate (the plan's summary and simulate's notes
show every note with them)."""
DEV_BUILD = "is a development build, planned with the rules of"
"""Words of :func:`prerelease_note` for a ``.devN`` build (:func:`dev_build_base`)."""
NOT_READ_HERE = "not read in this release's code"
"""Words of :func:`assumed_rules_note`."""
_PRE = re.compile(r"(?:a|b|rc|c|alpha|beta|pre|dev)\d*", re.IGNORECASE)
_DEV_ONLY = re.compile(r"^[-_.]?dev\d*$", re.IGNORECASE)
_UNREAD = re.compile(r"(?:(\d+)\.(\d+)(?:\.\d+)?(?:–(\d+)\.(\d+))?|(this version's)) not read")


def _release_and_rest(text: str | None) -> tuple[str, str] | None:
    """(the release, what follows it up to a local tag) of a whole release string: ("0.11.1", ".dev3") for
    0.11.1.dev3+g1234abc; None for no release string."""
    t = str(text or "").strip()
    m = RELEASE_STRING.match(t) and re.match(r"^v?(\d+\.\d+(?:\.\d+)?)", t)
    return (m.group(1), t[m.end():].split("+")[0]) if m else None


def dev_build_base(text: str, ver: tuple[int, int, int]) -> tuple[int, int, int] | None:
    """The newest release before a development build ``text`` (its release part ``ver``), whose code it holds; None
    for anything else (a release, a release candidate, a post release).

    vLLM numbers its builds with setuptools-scm at its defaults (0.11.0's pyproject.toml: ``[tool.setuptools_scm]``
    with no settings; setup.py ``get_vllm_version``: ``get_version``), whose ``guess-next-dev`` scheme writes a commit
    N past tag X.Y.Z as X.Y.(Z+1).devN (``version.py::guess_next_dev_version`` and ``_modify_version._bump_regex``,
    setuptools-scm 8.1): 0.11.1.dev3 is main three commits after 0.11.0, holding 0.11.0's code and more, not a
    state before 0.11.0. A build past a release candidate (0.11.1rc2.dev140, after tag 0.11.1rc1) precedes 0.11.1 and
    is a pre-release of it instead. X.Y.0.devN follows the previous minor's releases: the newest listed one."""
    parts = _release_and_rest(text)
    if parts is None or not _DEV_ONLY.match(parts[1]):
        return None
    major, minor, patch = ver
    if patch > 0:
        return major, minor, patch - 1
    if minor > 0:
        return major, minor - 1, LAST_PATCH.get((major, minor - 1), 0)
    return None


def prerelease_note(text: str | None) -> str | None:
    """The note for a pre-release (``0.33.0rc1``) planned as the release it precedes, or for a development build
    (``0.11.1.dev3+g1234abc``) planned as the release before it (:func:`dev_build_base`); None for a release."""
    parts = _release_and_rest(text)
    if parts is None or not _PRE.search(parts[1]):
        return None
    release, _ = parts
    major, minor, patch = (*map(int, release.split(".")), 0)[:3]
    base = dev_build_base(str(text), (major, minor, patch))
    if base is not None:
        b = ".".join(map(str, base))
        return (f"vLLM {text.strip()} {DEV_BUILD} {b}, the newest release before it: vLLM numbers its builds with "
                f"setuptools-scm, a .devN build being main's code past the release before it, so it holds {b}'s code "
                "and more; kvledger reads released code only, and the commits after it may change a rule")
    return (f"vLLM {text.strip()} {PRE_RELEASE} {release}, the release it precedes: kvledger reads released "
            f"code only, and a pre-release's code may differ from its release's")


def assumed_rules_note(ver: tuple[int, int, int], notes: list[str]) -> str | None:
    """One line for the summary where a note of the plan says the rule it applied to ``ver`` came from a release
    next to it ("0.21–0.32 not read; assumed the same", "0.15 not read: 0.14.1's …"), or None: the notes name
    their releases, so a note about a range that leaves ``ver`` out (the same note on 0.19) does not count."""
    n = 0
    for note in notes:
        for m in _UNREAD.finditer(note):
            lo = (int(m.group(1)), int(m.group(2))) if m.group(1) else ver[:2]
            hi = (int(m.group(3)), int(m.group(4))) if m.group(3) else lo
            n += bool(m.group(5) or lo <= ver[:2] <= hi)
    if not n:
        return None
    v = ".".join(map(str, ver))
    return (f"vLLM {v}: {n} rule{'s' * (n > 1)} of this plan {'were' if n > 1 else 'was'} {NOT_READ_HERE}; the "
            f"nearest release read was assumed to behave the same (--verbose: its notes say which)")


def release_lines(notes: list[str], engine: str, engine_version: str, keep: tuple[str, ...] = ()) -> list[str]:
    """The notes a short output shows about whose rules were applied (a release newer than read, no such release, a
    pre-release or development build; those with a word of ``keep``), in order, and for vLLM
    :func:`assumed_rules_note`'s line."""
    words = (NEWER_THAN_READ, NO_SUCH_RELEASE, PRE_RELEASE, DEV_BUILD, *keep)
    out = [n for n in notes if any(w in n for w in words)]
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", engine_version or "")
    ver = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None
    return out + [a for a in [assumed_rules_note(ver, notes) if engine == "vllm" and ver else None] if a]
