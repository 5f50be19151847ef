"""``--plot FILE`` for the commands whose natural output is a figure: check the path first, then save PNG, SVG or PDF by suffix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.errors import InputError

__all__ = ["PLOT_SUFFIXES", "check_plot_path", "save_plot"]

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_path(path: Path | None, force: bool = False) -> None:
    """Refuse a suffix matplotlib should not guess and a file that exists unless ``force`` (nothing the user has is
    overwritten without asking)."""
    if path is None:
        return
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {path}: give a file ending in {', '.join(PLOT_SUFFIXES)}")
    if path.is_dir():
        raise InputError(f"--plot {path} is a directory; give a file name")
    if path.exists() and not force:
        raise InputError(f"--plot {path} already exists; refusing to overwrite it (pass --force, or choose another name)")
    if not path.parent.exists():
        raise InputError(f"--plot {path}: the folder {path.parent} does not exist")


def save_plot(fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` (format from the suffix; no date in the metadata, so the same data gives the same file)."""
    from kvledger.report.figure import png_of, svg_of

    suffix = path.suffix.lower()
    if suffix == ".png":
        path.write_bytes(png_of(fig))
    elif suffix == ".svg":
        path.write_text(svg_of(fig), encoding="utf-8")
    else:
        fig.savefig(path, format="pdf", metadata={"CreationDate": None, "ModDate": None})
