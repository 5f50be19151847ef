"""Where simulate's error bands come from, said once: the band sources of several figures (TTFT mean, TPOT mean,
throughput) differ mostly in their percentages, so the words shared by all are printed once, each on its own short
line, with each figure's percentages in place, and the clause "measured on … only, not on …" says whose errors."""

from __future__ import annotations

import re

__all__ = ["band_source_lines", "clauses"]

#: a band's range as the ledgers write it: "-64.7% … +183.1%"
_RANGE = re.compile(r"[-−+]?\d[\d,]*(?:\.\d+)?% … [-−+]?\d[\d,]*(?:\.\d+)?%")
#: ``ledgers.error_band.Band.on_gpu``'s clause for a GPU none of the band's deployments ran on
_ELSEWHERE = re.compile(r"^measured on (.+?) only, not on (.+?)(?:: its width a floor for the error there, not a "
                        r"measurement)?$")


#: where a profile's name ends and the regime whose errors make its band begins: "… (fitted on …): calibrated regime …"
_PROFILE_THEN_REGIME = re.compile(r"(?<=\)): (?=(?:calibrated |uncalibrated )?regime )")


def clauses(text: str) -> list[str]:
    """``text`` split at its top-level "; " (not inside parentheses) and where a profile's name gives way to its
    regime's errors, each clause stripped."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i].strip())
            start = i + 2
    out.append(text[start:].strip())
    return [part.strip() for c in out for part in _PROFILE_THEN_REGIME.split(c, maxsplit=1) if part.strip()]


def _whose(clause: str) -> str:
    """The "measured on X only, not on Y" clause as whose errors they are (the GPU profile itself may be fitted on Y:
    its runs price the simulator, the band's errors come from X)."""
    m = _ELSEWHERE.match(clause)
    if not m:
        return clause
    return (f"the band's errors were measured on {m.group(1)} only, none on {m.group(2)}: its width a floor for the "
            f"error on the {m.group(2)}, not a measurement")


def _merged(sources: dict[str, str]) -> str | None:
    """One source for every figure where they differ only in their ranges: each range replaced by the figures'
    ("TTFT mean -64.7% … +183.1%, TPOT mean -7.1% … +7.6%"), or by the one range all share; None where the words
    differ."""
    templates = {_RANGE.sub("\0", s) for s in sources.values()}
    if len(templates) != 1:
        return None
    template = templates.pop()
    ranges = {label: _RANGE.findall(s) for label, s in sources.items()}
    pieces = template.split("\0")
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        values = {label: r[i] for label, r in ranges.items()}
        same = len(set(values.values())) == 1
        out.append(next(iter(values.values())) if same else
                   "[" + ", ".join(f"{label} {v}" for label, v in values.items()) + "]")
        out.append(piece)
    return "".join(out)


def band_source_lines(sources: dict[str, str]) -> list[str]:
    """The sources of the figures' bands (figure label → its source) as short lines, one clause a line: a clause all
    figures share (their words equal but for the ranges) once, each figure's range in place; a clause only some have
    under their labels ("TPOT mean only: …")."""
    by_label = {label: clauses(src) for label, src in sources.items()}
    order: list[str] = []
    for cs in by_label.values():
        order += [t for t in (_RANGE.sub("\0", c) for c in cs) if t not in order]
    lines = []
    for template in order:
        held = {label: next(c for c in cs if _RANGE.sub("\0", c) == template) for label, cs in by_label.items()
                if any(_RANGE.sub("\0", c) == template for c in cs)}
        said = _whose(_merged(held) or next(iter(held.values())))
        lines.append(said if len(held) == len(sources) else f"{', '.join(held)} only: {said}")
    return lines
