"""Whether a validated run is one its pricing profile was fitted on (IN-SAMPLE): a GPU profile's or a model-scope
profile's data files against the run's source, matched on whole path components of its resolved path (so that the
path's spelling does not matter), or by content: the sha256 a profile (GPU or model scope) records of each fitted
run's file against the run's (as the stored bands' members are recognised, ``ledgers.band_members``), so that a copy
elsewhere is recognised too."""

from __future__ import annotations

from typing import Any

__all__ = ["fitted_data", "fitted_digests", "profile_words", "fitted_on", "run_in_sample"]


def fitted_data(cost_info: dict[str, Any]) -> list[str]:
    """The data files of the profile that priced a run, as it records them: a GPU profile's (``gpu_profile_data``)
    or a model-scope profile's (``profile_data``, its ``data_files``); empty for the plain roofline or a bundled
    table."""
    return list(cost_info.get("gpu_profile_data") or cost_info.get("profile_data") or [])


def fitted_digests(prof: Any) -> list[str]:
    """The sha256 a profile records of the files of the runs it was fitted on (its data files, or a file inside one of
    its run folders): a GPU profile (``accounting.gpu_profile.GpuProfile``: ``data``, ``runs``), or a model-scope
    profile's step-cost info (a dict: ``profile_data``, ``profile_runs``, ``accounting.calibration_profile``); None, or
    a profile written before it recorded them, has none."""
    if prof is None:
        return []
    if isinstance(prof, dict):
        data, runs = prof.get("profile_data") or [], prof.get("profile_runs") or []
    else:
        data, runs = getattr(prof, "data", ()) or (), getattr(prof, "runs", ()) or ()
    return [str(r["sha256"]) for r in runs if r.get("sha256") and r.get("source")
            and (r["source"] in data or fitted_on(str(r["source"]), list(data)))]


def run_in_sample(source: str, data: list[str] | tuple[str, ...], digests: list[str] | tuple[str, ...]) -> bool:
    """Whether the run in ``source`` is one a profile was fitted on: by path (``fitted_on``) or by its file's content
    (its sha256 among ``digests``)."""
    from kvledger.ledgers.band_members import file_sha256

    if fitted_on(source, data):
        return True
    digest = file_sha256(source) if digests else None
    return digest is not None and digest in set(digests)


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
    from pathlib import Path, PurePosixPath

    try:  # the path as the file system has it: typed from inside the run's folder or through a link, the same run
        source = str(Path(source).resolve())
    except (OSError, ValueError, RuntimeError):
        pass
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
