"""One field of a flag group: its spellings and help (``flag_groups`` and ``tier_flags`` declare theirs with it)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

__all__ = ["flag"]


def flag(*decls: str, help: str, default: Any = None) -> Any:  # noqa: A002  (typer's own keyword)
    """A group field: its flag spellings (vLLM's names), help text and default."""
    return field(default=default, metadata={"decls": decls, "help": help})
