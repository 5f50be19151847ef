"""Whether a validated run is one its pricing profile was fitted on (IN-SAMPLE): a GPU profile's or a model-scope
profile's data files against the run's source, matched on whole path components."""

from __future__ import annotations

from typing import Any

__all__ = ["fitted_data", "profile_words", "fitted_on"]


def fitted_data(cost_info: dict[str, Any]) -> list[str]:
    """The data files of the profile that priced a run, as it records them: a GPU profile's (``gpu_profile_data``)
    or a model-scope profile's (``profile_data``, its ``data_files``); empty for the plain roofline or a bundled
    table."""
    return list(cost_info.get("gpu_profile_data") or cost_info.get("profile_data") or [])


def profile_words(scope: str | None) -> str:
    """The profile that priced a run, in words, for the IN-SAMPLE notes: "GPU profile" or "calibration profile"."""
    return "GPU profile" if scope == "gpu" else "calibration profile"


def fitted_on(source: str, data: list[str] | tuple[str, ...]) -> bool:
    """Whether the run in ``source`` is one of a GPU profile's fitted runs (``data``: their sources, as the profile
    records them: absolute, or relative to where it was fitted, e.g. under ../shared/data/measured-runs); matched on
    whole path components at the end, so that stage_1 is not stage_10 and a run's folder holds its files.

    >>> fitted_on("/d/runs/t/results/stage_0_lifecycle_metrics.json", ["t/results/stage_0_lifecycle_metrics.json"])
    True
    >>> fitted_on("/d/runs/t/results/stage_10_lifecycle_metrics.json", ["t/results/stage_1_lifecycle_metrics.json"])
    False
    """
    from pathlib import PurePosixPath

    here = PurePosixPath(str(source).replace("\\", "/"))
    parts = here.parts
    for d in data:
        want = PurePosixPath(str(d).replace("\\", "/").removeprefix("./")).parts
        want = tuple(p for p in want if p != "..")
        if not want:
            continue
        n = len(want)
        if any(parts[i:i + n] == want for i in range(len(parts) - n + 1)):
            return True
    return False
