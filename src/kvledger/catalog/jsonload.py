"""Reading JSON files the way users have them: non-strict literals allowed, syntax errors located by line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvledger.errors import ConfigError


def load_json_file(path: Path, *, what: str = "config") -> Any:
    """Parse a JSON file, accepting the non-strict literals ``Infinity``, ``-Infinity`` and ``NaN``.

    Real model configs contain them (Nemotron-H's ``time_step_limit`` holds ``Infinity``);
    Python's ``json`` module accepts them, strict parsers do not.

    Raises:
        ConfigError: unreadable file, not UTF-8, or a syntax error (message gives line and column).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), f"{what} file not found") from None
    except IsADirectoryError:
        raise ConfigError(str(path), f"is a folder, expected a {what} JSON file") from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), f"not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ConfigError(str(path), f"cannot read: {err.strerror}") from None
    return loads_located(text, str(path))


def loads_located(text: str, source: str) -> Any:
    """``json.loads`` with a ConfigError that names ``source``, line and column on a syntax error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(source, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
