"""A live "working…" line on the terminal for commands that can take more than a few seconds.

Shown on standard error and only when it is a terminal (rich turns live displays off otherwise), so
``--json`` output, pipes and tests see nothing of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["working"]


@contextmanager
def working(message: str) -> Iterator[None]:
    """Show ``message`` with a spinner and the elapsed time while the block runs."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        bar.add_task(message, total=None)
        yield
