"""A JSON Lines file whose last line stops inside its value: a run killed mid-write or a partial copy, said as such in
the readers' error (``_io.load_document``, ``llmservingsim``) rather than as a bare JSON error."""

from __future__ import annotations

__all__ = ["line_cut_off"]


def line_cut_off(lines: list[str], lineno: int) -> str:
    """"; it is the file's last line …" when the bad JSON Lines line ``lineno`` (1-based, of ``lines``, the file's
    lines) is the last non-empty one and does not close its value (a run killed mid-write, a partial copy), with how
    many lines come before it; else ""."""
    last = max((i for i, ln in enumerate(lines, 1) if ln.strip()), default=0)
    if lineno != last or lines[lineno - 1].rstrip().endswith(("}", "]")):
        return ""
    return (f"; it is the file's last line and stops before its JSON closes, so it looks cut off (the writer was "
            f"stopped or the copy is partial): remove that line to read the {lineno - 1:,} before it")
