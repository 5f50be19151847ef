"""``--plot FILE`` for the commands whose natural output is a figure: check the path first, then save PNG, SVG or PDF
by suffix."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvledger.errors import InputError

__all__ = ["PLOT_SUFFIXES", "check_plot_path", "save_plot"]

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_path(path: Path | None, force: bool = False, inputs: Iterable[Any] = ()) -> None:
    """Refuse a suffix matplotlib should not guess, an input of the command (or a file read beside one), an
    unwritable folder, and a file that exists unless ``force`` (nothing the user has is overwritten without asking;
    see kvledger.outputs)."""
    from kvledger.evidence.sidecars import implicit_inputs
    from kvledger.outputs import prepare_output_file

    if path is None:
        return
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {path}: give a file ending in {', '.join(PLOT_SUFFIXES)}")
    inputs = list(inputs)  # and the files a reader takes in beside them (a stage file's config.yaml…)
    prepare_output_file(path, force=force, inputs=[*inputs, *implicit_inputs(inputs)], flag="--plot")


def save_plot(fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` atomically (format from the suffix; no date in the metadata, so the same data gives
    the same file)."""
    from kvledger.outputs import write_atomic, write_bytes_atomic, write_text_atomic
    from kvledger.report.figure import png_of, svg_of

    suffix = path.suffix.lower()
    if suffix == ".png":
        write_bytes_atomic(path, png_of(fig))
    elif suffix == ".svg":
        write_text_atomic(path, svg_of(fig))
    else:
        write_atomic(path, lambda tmp: fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "ModDate": None}))
