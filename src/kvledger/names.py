"""The one check every name-or-path the user types goes through before it touches the file system."""

from __future__ import annotations

import re
from pathlib import Path

from kvledger.errors import InputError

__all__ = ["check_name_or_path", "file_labels", "stage_label", "NAME_MAX_BYTES", "PATH_MAX_BYTES"]

NAME_MAX_BYTES = 255
"""Longest file name (one path component) on common file systems (ext4, XFS, APFS, NTFS), bytes."""
PATH_MAX_BYTES = 4096
"""Longest path Linux accepts (PATH_MAX), bytes."""


def check_name_or_path(text: str, what: str) -> None:
    """Raise InputError when ``text`` cannot name anything: empty, a NUL byte, a component over 255 bytes, or over
    4,096.

    ``what`` names the input in the message ("trace", "model", "GPU").
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{what}: give a name or a path")
    raw = text.encode("utf-8", "surrogatepass")
    if b"\x00" in raw or len(raw) > PATH_MAX_BYTES or any(
            len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES for part in text.replace("\\", "/").split("/")):
        raise InputError(f"{what} {text[:60]!r}...: not a usable name or path (a NUL byte, a name or path component "
                         f"longer than {NAME_MAX_BYTES} bytes, or a path longer than {PATH_MAX_BYTES:,} bytes)")


def file_labels(paths: list[str]) -> list[str]:
    """Each file's name in tables and notes: its name without the suffix (a folder: its whole name), or, where that
    name is shared by several files in different folders, the nearest folder above it that tells them apart with the
    file's short name (the name less ``_lifecycle_metrics``): ``vllm/stage_0`` and ``vllm+batch_size/stage_0``. The
    same file given twice keeps its plain name. An inference-perf stage file (``stage_N.json``,
    ``stage_N_lifecycle_metrics.json``) has a name that every experiment's stage N shares, so one whose name is not
    shared among ``paths`` is named by its folder too (``stage_label``: ``data/inference-perf/stage_0``). (``calibrate``
    and ``validate`` label their runs so; a GPU profile names its runs so.)

    >>> file_labels(["a/results/stage_0_lifecycle_metrics.json", "b/results/stage_0_lifecycle_metrics.json"])
    ['a/stage_0', 'b/stage_0']
    """
    stems = [Path(p).name if Path(p).is_dir() else Path(p).stem for p in paths]  # a folder keeps its dots (3.1-8B)
    out = list(stems)
    for stem in sorted(set(stems)):
        idx = [i for i, s in enumerate(stems) if s == stem]
        if len(idx) < 2:
            continue
        parents = [Path(paths[i]).resolve().parent.parts for i in idx]
        for d in range(1, max(len(x) for x in parents) + 1):
            names = [x[-d] if len(x) >= d else "" for x in parents]
            if len(set(names)) == len(names):
                for i, n in zip(idx, names):
                    out[i] = f"{n}/{stem.removesuffix('_lifecycle_metrics')}"
                break
    return [stage_label(p) if o == s and _STAGE.fullmatch(s) and not Path(p).is_dir() else o
            for p, s, o in zip(paths, stems, out)]


_STAGE = re.compile(r"stage_\d+(_lifecycle_metrics)?")
"""inference-perf's per-stage report names (``stage_0_lifecycle_metrics.json``; ``stage_0.json`` as copied)."""


def stage_label(path: str) -> str:
    """A stage file's name: the two folders it lies in and its short name (less the suffix and
    ``_lifecycle_metrics``), its path's tail, so that stage 0 of one experiment is not read as another's
    (``20260217-llama-2-7b-tp1-general/results/stage_0``; inference-perf writes every run's ``stage_0`` under a
    ``results``-like folder of its own). The folders are read off the resolved path (a file typed as ``stage_0.json`` is
    named as from anywhere else)."""
    p = Path(path)
    try:
        p = p.resolve()
    except (OSError, RuntimeError):
        pass
    return "/".join([*p.parent.parts[-2:], p.stem.removesuffix("_lifecycle_metrics")]).lstrip("/")
