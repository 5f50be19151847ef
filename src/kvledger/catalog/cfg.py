"""Typed, located access to fields of a raw ``config.json`` dict (every failure names the field)."""

from __future__ import annotations

import math
from typing import Any

from kvledger.errors import ConfigError

_MISSING = object()


class Cfg:
    """A view on a config dict that reads fields with type checks and ConfigErrors naming the field.

    Attributes:
        raw: the dict (the text config when the file nests one under ``text_config``).
        source: where the config came from (file path or hub id), for messages.
        prefix: the path of ``raw`` inside the file ("" or "text_config.").
    """

    def __init__(self, raw: dict[str, Any], source: str, prefix: str = "") -> None:
        self.raw, self.source, self.prefix = raw, source, prefix

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(self.source, message, field=self.prefix + key)

    def get(self, key: str, default: Any = _MISSING) -> Any:
        v = self.raw.get(key)
        if v is None:
            if default is _MISSING:
                raise self.error(key, "is missing (needed to size this model)")
            return default
        return v

    def int(self, key: str, default: Any = _MISSING, *, minimum: int = 1) -> int:
        v = self.get(key, default)
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            raise self.error(key, f"must be an integer, got {v!r}")
        if int(v) < minimum:
            raise self.error(key, f"must be ≥ {minimum}, got {v!r}")
        return int(v)

    def float(self, key: str, default: Any = _MISSING) -> float:
        v = self.get(key, default)
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.error(key, f"must be a finite number, got {v!r}")
        return float(v)

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise self.error(key, f"must be true or false, got {v!r}")
        return v

    def str(self, key: str, default: Any = _MISSING) -> str:
        v = self.get(key, default)
        if v is not None and not isinstance(v, str):
            raise self.error(key, f"must be a string, got {v!r}")
        return v

    def list(self, key: str, default: Any = _MISSING) -> list[Any]:
        v = self.get(key, default)
        if v is not None and not isinstance(v, list):
            raise self.error(key, f"must be a list, got {type(v).__name__}")
        return v
