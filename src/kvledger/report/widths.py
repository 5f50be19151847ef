"""Console widths the CLI and the views agree on (no imports: ``cli/main.py`` reads it before anything is built)."""

from __future__ import annotations

__all__ = ["PIPE_COLUMNS"]

#: the width of every rich console when stdout is not a terminal and $COLUMNS is not set, columns: wider than any
#: table or paragraph we print (the widest, the ledger table of ``plan --verbose``, is 1,431 columns on
#: Llama-3.1-8B), so a file or pipe gets whole lines; rich tables and paragraphs take their own width, not this one
PIPE_COLUMNS = 10_000
