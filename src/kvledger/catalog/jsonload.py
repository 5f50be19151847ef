"""Reading JSON files the way users have them: non-strict literals allowed, syntax errors located by line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvledger.errors import ConfigError

MAX_JSON_BYTES = 16 * 2**20
"""Largest JSON file read, B (a real config.json is a few KB; Nemotron-H's, among the largest, is 4 KB)."""
MAX_DEPTH = 64
"""Deepest nesting of objects and lists accepted (real configs nest 3 levels: quantization_config.config_groups.g)."""


def load_json_file(path: Path, *, what: str = "config") -> Any:
    """Parse a JSON file, accepting the non-strict literals ``Infinity``, ``-Infinity`` and ``NaN``.

    Real model configs contain them (Nemotron-H's ``time_step_limit`` holds ``Infinity``);
    Python's ``json`` module accepts them, strict parsers do not.

    Raises:
        ConfigError: unreadable file, not UTF-8, or a syntax error (message gives line and column).
    """
    try:
        size = Path(path).stat().st_size
        if size > MAX_JSON_BYTES:
            raise ConfigError(str(path), f"{what} file is {size:,} B; at most {MAX_JSON_BYTES:,} B is read (a "
                                         f"config.json is a few KB)")
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


def _depth(text: str) -> int:
    """Deepest bracket nesting outside strings (checked before parsing, so a hostile file cannot exhaust the stack)."""
    depth = worst = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            worst = max(worst, depth)
        elif ch in "]}":
            depth -= 1
    return worst


def loads_located(text: str, source: str) -> Any:
    """``json.loads`` with a ConfigError that names ``source``, line and column on a syntax error.

    Also refuses nesting deeper than MAX_DEPTH and integers longer than Python's 4,300-digit limit,
    each with a message naming the file.
    """
    if (d := _depth(text)) > MAX_DEPTH:
        raise ConfigError(source, f"JSON nested {d} levels deep; at most {MAX_DEPTH} levels are accepted")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(source, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    except ValueError as err:  # an integer literal past int_max_str_digits
        raise ConfigError(source, f"invalid JSON: {str(err).splitlines()[0][:120]}") from None
    except RecursionError:
        raise ConfigError(source, f"JSON nested too deeply; at most {MAX_DEPTH} levels are accepted") from None
