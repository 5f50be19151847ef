"""The one check every name-or-path the user types goes through before it touches the file system."""

from __future__ import annotations

from pathlib import Path

from kvledger.errors import InputError

__all__ = ["check_name_or_path", "file_labels", "NAME_MAX_BYTES", "PATH_MAX_BYTES"]

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
    same file given twice keeps its plain name. (``calibrate`` and ``validate`` label their runs so; a GPU profile
    names its runs so.)

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
    return out
