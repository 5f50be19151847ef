"""What a directory given as a measured run lacks (``_io.load_document``'s error for a folder no reader took): run
folders are inputs too (an LLMServingSim run's ``requests.jsonl`` with its ``meta.json``, ``evidence.llmservingsim``),
so "pass the files themselves" is the wrong advice for one. Said instead: an empty ``requests.jsonl``, a folder with no
``requests.jsonl``, a folder with no run files, or — for a parent of run folders — the run folders under it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["folder_problem", "beside_run"]

#: files a benchmark writes, looked for under a parent folder (beside run folders' requests.jsonl)
_RUN_FILES = ("*_lifecycle_metrics.json", "profile_export*.jsonl")
_DEPTH = 3  # folder levels searched under a parent
_SHOWN = 8  # run folders or files named, then a count
#: an LLMServingSim run folder's own files (upstream bench/core/runner.py writes them); other data files beside
#: requests.jsonl are not part of that run
_RUN_OWN = ("requests.jsonl", "meta.json", "timeseries.csv")
_DATA = (".json", ".jsonl", ".csv")  # the endings of the files a benchmark writes (JSON, JSON Lines, CSV)


def beside_run(p: Path) -> list[str]:
    """The data files (JSON, JSON Lines, CSV) directly in the folder ``p`` that are not an LLMServingSim run's own
    (``_RUN_OWN``), sorted, as paths: files a folder read as one run would leave out."""
    try:
        return sorted(str(f) for f in p.iterdir() if f.is_file() and f.suffix.lower() in _DATA
                      and f.name not in _RUN_OWN)
    except OSError:
        return []


def _named(paths: list[str]) -> str:
    more = f" (and {len(paths) - _SHOWN} more)" if len(paths) > _SHOWN else ""
    return " ".join(paths[:_SHOWN]) + more


def _under(p: Path) -> list[str]:
    """Run folders (holding a non-empty requests.jsonl) and benchmark files up to ``_DEPTH`` levels under ``p``,
    sorted, as paths under it."""
    found: list[str] = []
    for level in range(1, _DEPTH + 1):
        stars = "/".join(["*"] * level)
        found += [str(f.parent) for f in p.glob(f"{stars}/requests.jsonl") if f.is_file() and f.stat().st_size > 0]
        found += [str(f) for pat in _RUN_FILES for f in p.glob(f"{'/'.join(['*'] * (level - 1) + [pat])}")]
    return sorted(dict.fromkeys(found))


def folder_problem(p: Path) -> str:
    """Why the folder ``p`` is no run, and what to pass instead (one sentence or two, for a ``FormatError``)."""
    req = p / "requests.jsonl"
    if req.is_file():
        try:
            empty = not req.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            empty = False
        if empty:
            return ("is a run folder whose requests.jsonl is empty: the run recorded no request, so there is nothing "
                    "to compare; pass a run folder whose requests.jsonl holds the run's requests")
        others = beside_run(p)
        if others:
            return (f"holds an LLMServingSim run's requests.jsonl and {len(others)} other data file(s) beside it: a "
                    "folder is read as that one run, which would leave them out unread; pass the files themselves: "
                    + _named([str(req), *others]))
    runs = _under(p)
    if runs:
        return (f"is not one run but holds {len(runs)} under it (run folders or benchmark files): pass them "
                "themselves: " + _named(runs))
    if (p / "meta.json").is_file() or (p / "timeseries.csv").is_file():
        return ("is a run folder with no requests.jsonl: its meta.json or timeseries.csv says how the run was "
                "launched, but the requests it timed (requests.jsonl, one JSON object per request) are missing; pass "
                "a run folder that has them")
    files = beside_run(p)
    if files:  # data files a folder-reader does not take (only a run folder is one run): name them
        return (f"is a folder of {len(files)} data file(s), not one run folder (a run folder holds requests.jsonl "
                "with its meta.json); pass the files themselves: " + _named(files))
    what = "is empty" if not any(p.iterdir()) else \
        "holds no run files (no requests.jsonl, meta.json or benchmark output)"
    return (f"{what}; pass a run folder (requests.jsonl with its meta.json) or the benchmark output files themselves "
            "(e.g. profile_export.jsonl, stage_0_lifecycle_metrics.json)")
