"""Terminal tables that never cut a figure: a rich ``Table`` that folds text and, when even
folded it cannot fit the terminal, prints each row as a block of ``column: value`` lines.

Rich's default is to shorten a cell that does not fit with ``…`` (``111…`` for 111.3) or to crop
the line at the terminal's edge; a ledger must not lose a digit, so every table the tool prints
is a :class:`LedgerTable`.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

__all__ = ["LedgerTable", "ledger_table", "table", "print_verdict", "print_gpu_alias_note"]


def _plain(cell: object) -> str:
    """The text a cell shows: rich markup such as ``[bold]…[/]`` rendered away, not counted or printed."""
    if isinstance(cell, Text):
        return cell.plain
    text = str(cell)
    return Text.from_markup(text).plain if "[" in text else text


def _longest_word(texts: Iterable[str]) -> int:
    """Width of the longest run without spaces: what folding can never split without cutting a figure."""
    return max((cell_len(w) for t in texts for w in t.split()), default=0)


class LedgerTable(Table):
    """A rich table whose cells are never shortened with an ellipsis nor cropped at the edge.

    At render time every column folds at spaces only, and is at least as wide as its longest
    word (a number is one word). When the columns' minimum widths do not fit the width at hand,
    the rows are printed one after the other as ``column: value`` lines instead.
    """

    short_first = False
    """Where the natural widths do not fit: True gives the columns that need least their whole width first (a figure
    with its line reference stays on one line) and folds only the widest; False shares the room by what each lacks."""

    def _widths(self) -> tuple[list[int], list[int]]:
        """(minimum, natural) width of each column: its longest word, and its longest cell on one line."""
        mins, maxs = [], []
        for col in self.columns:
            cells = [_plain(c) for c in col.cells] + [_plain(col.header)]
            mins.append(max(1, _longest_word(cells)))
            maxs.append(max(1, max((max((cell_len(x) for x in c.splitlines()), default=0) for c in cells), default=0)))
        return mins, maxs

    def _room(self, width: int, columns: int) -> int:
        """The characters left for cells in ``width`` once the padding and rules of ``columns`` columns are drawn."""
        left, right = self.padding[3], self.padding[1]
        return width - columns * (left + right) - (columns + 1 if self.show_edge else columns - 1)

    def fits(self, width: int) -> bool:
        """Whether every column gets its longest word within ``width`` (else the rows print as records)."""
        mins, _ = self._widths()
        return sum(mins) <= self._room(width, len(mins))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        mins, maxs = self._widths()
        room = self._room(options.max_width, len(mins))
        if sum(mins) > room:
            yield from self._as_records(options.max_width)
            return
        widths = list(maxs)
        if sum(maxs) > room and self.short_first:
            widths = _short_first(mins, maxs, room)
        elif sum(maxs) > room:  # give every column its longest word, then share what is left by what each lacks
            spare, lack = room - sum(mins), [mx - mn for mn, mx in zip(mins, maxs)]
            total = sum(lack) or 1
            widths = [mn + (spare * lk) // total for mn, lk in zip(mins, lack)]
        for col, w in zip(self.columns, widths):
            col.overflow, col.no_wrap, col.width, col.min_width, col.max_width = "fold", False, w, None, None
        yield from super().__rich_console__(console, options)

    def _as_records(self, width: int) -> RenderResult:
        if self.title:
            yield Text(_plain(self.title), style="bold")
        headers = [_plain(c.header) or f"column {i + 1}" for i, c in enumerate(self.columns)]
        label_w = max((cell_len(h) for h in headers), default=0)
        columns = [list(col.cells) for col in self.columns]
        for r in range(self.row_count):
            yield Text("")
            for h, cells in zip(headers, columns):
                value = _plain(cells[r]) if r < len(cells) else ""
                yield Text(f"{h.ljust(label_w)} : {value}", overflow="fold", no_wrap=False)
        if self.caption:
            yield Text(_plain(self.caption))


def _short_first(mins: list[int], maxs: list[int], room: int) -> list[int]:
    """Widths within ``room`` (≥ the sum of ``mins``): each column its natural width up to one cap, the cap as high as
    the room allows, so only the columns wider than it fold; the columns at the cap share what is left over."""
    order = sorted(range(len(maxs)), key=lambda i: maxs[i])
    widths, left = list(mins), room - sum(mins)
    for k, i in enumerate(order):
        share = left // (len(order) - k)  # what each column still to place may take beyond its minimum
        give = min(maxs[i] - mins[i], share)
        widths[i] += give
        left -= give
    return widths


def ledger_table(title: str, *cols: str, **kwargs: object) -> LedgerTable:
    """A left-titled :class:`LedgerTable` with the given column headers."""
    t = LedgerTable(title=title, title_justify="left", title_style="bold", expand=False, **kwargs)
    for c in cols:
        t.add_column(c)
    return t


def table(title: str, *cols: str) -> LedgerTable:
    """The table every terminal view uses: left-titled, columns sized so nothing is cut (:class:`LedgerTable`)."""
    return ledger_table(title, *cols)


def print_verdict(console: Console, verdict: Iterable[str], notes: Iterable[str]) -> None:
    """The closing block of every judgment call: "Verdict", one bullet per sentence, then the notes dimmed."""
    console.print("[bold]Verdict[/]")
    for v in verdict:
        console.print(f"• {v}")
    for n in notes:
        console.print(f"· {n}", style="dim")


def print_gpu_alias_note(console: Console, gpu: str, brief: bool = False) -> None:
    """``note: --gpu H100 → NVIDIA H100 80GB SXM5 (also: …)`` when the --gpu name is one several catalog rows answer
    to (:func:`kvledger.catalog.gpus.gpu_alias_note`; ``brief``: the others by --gpu name alone); nothing when it
    names one row, a GPU file or no catalog GPU."""
    from kvledger.catalog.gpus import gpu_alias_note

    if (alias := gpu_alias_note(gpu, brief)) is not None:
        console.print(f"note: {alias}", markup=False, highlight=False)
