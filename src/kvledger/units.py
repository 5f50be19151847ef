"""Units: byte and time constants, parsing of user-given sizes and durations, and formatting.

GiB (2**30 bytes) and GB (10**9 bytes) are never mixed: every constant and every
formatter names its unit, and parsers accept only explicit unit suffixes (a bare
number of bytes is the one exception, because bytes are the base unit) — except the
command line's size flags (:func:`parse_memory_flag`), where a bare number is GiB as
in vLLM's ``--kv-offloading-size``.
"""

from __future__ import annotations

import math
import re

from kvledger.errors import InputError
from kvledger.token_counts import TOKEN_SUFFIXES, parse_tokens, token_suffix_note  # noqa: F401 - re-exported

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_BYTE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
    "kb": KB, "mb": MB, "gb": GB, "tb": TB,
}
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0}
_NUMBER_UNIT = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-zµ]*)\s*$")


def parse_bytes(text: str | int | float, *, what: str = "size") -> int:
    """Parse a memory size such as ``"51.38GiB"``, ``"16 GB"`` or ``"4096"`` (bytes).

    Returns an integer number of bytes (fractional bytes round down, as an engine
    would floor them). Units: B, KiB/MiB/GiB/TiB (powers of 2), KB/MB/GB/TB
    (powers of 10); case-insensitive.

    Raises:
        InputError: unparseable text, unknown unit, negative, NaN or infinite value.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = _NUMBER_UNIT.match(str(text))
        if not m:
            raise InputError(f"{what}: cannot read {text!r} as a size; write e.g. '51.38GiB', '16GB' or a number of "
                             f"bytes")
        value, unit = float(m.group(1)), m.group(2).lower()
    if unit not in _BYTE_UNITS:
        raise InputError(f"{what}: unknown unit {unit!r} in {text!r}; use B, KiB, MiB, GiB, TiB (2^10 steps) or KB, "
                         f"MB, GB, TB (10^3 steps)")
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{what}: {text!r} must be a finite, non-negative size")
    return int(value * _BYTE_UNITS[unit])


def parse_memory_flag(text: str, *, what: str, positive: bool = False) -> int:
    """A size typed on the command line (``--gpu-memory 80GiB``, ``--kv-offloading-size 256``): :func:`parse_bytes`,
    except that a bare number is GiB (2^30 B). One rule for every size flag, the convention of vLLM's own
    ``--kv-offloading-size`` (vllm/config/cache.py: "in GiB"); a byte count needs its unit ("16094076928B").
    ``0`` stays 0 B; ``positive``: a size under 1 B (0 included) is refused too, as a negative one is.

    Raises:
        InputError: as :func:`parse_bytes`; a bare number of 2^20 GiB (1 PiB) or more (a byte count without its unit).
    """
    m = _NUMBER_UNIT.match(str(text))
    if not m:  # parse_bytes' hint would offer "a number of bytes", which a size flag reads as GiB
        raise InputError(f"{what}: cannot read {text!r} as a size; write e.g. '51.38GiB', '16GB', or a bare number "
                         "of GiB (as vLLM's --kv-offloading-size)")
    if positive and (float(m.group(1)) < 0 or parse_memory_flag(text, what=what) < 1):  # -3 said so, as 0 is
        raise InputError(f"{what}: {text!r} must be a finite, positive size")
    if not m.group(2):
        if abs(float(m.group(1))) >= 2**20:  # ≥ 1 PiB read as GiB: a byte count with its unit left off
            raise InputError(f"{what}: {text!r} has no unit, and a bare number is GiB (as vLLM's "
                             f"--kv-offloading-size): {float(m.group(1)):,.0f} GiB is more than any device or host. "
                             f"For bytes write '{m.group(1)}B', for GiB '{m.group(1)}GiB'")
        return parse_bytes(f"{m.group(1)}GiB", what=what)
    return parse_bytes(text, what=what)


#: the largest size a KV-tier flag takes, GiB (per GPU, or summed over the ranks for ``--kv-offloading-size``): 2^20
#: GiB = 1 PiB, the bound of a bare size (:func:`parse_memory_flag`) and of ``--hicache-size`` (2^20 GB, ranges.py);
#: no host memory, disk or remote store holds that for one GPU, so a larger value is a unit or typing slip
TIER_GIB_MAX = 2**20


def parse_tier_gib(text: str, *, what: str) -> float:
    """A KV-tier size flag in GiB (``--kv-offloading-size``, ``--kv-tier-host``, ``--kv-tier-nvme``,
    ``--kv-tier-remote``, ``search --offload``): a bare number is GiB, kept exact (not rounded to whole bytes), or a
    size with its unit (256GiB, 300GB, 2TiB).

    Raises:
        InputError: unreadable text, a unit that is not a size, a negative or non-finite value, or
            :data:`TIER_GIB_MAX` (1 PiB) or more.
    """
    m = _NUMBER_UNIT.match(str(text))
    value = float(m.group(1)) if m and not m.group(2) else None
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise InputError(f"{what}: {text!r} must be a finite, non-negative size (a bare number is GiB)")
    gib_value = value if value is not None else parse_memory_flag(text, what=what) / GiB
    if gib_value >= TIER_GIB_MAX:
        shown = f"{gib_value:,.0f}" if gib_value < 1e15 else f"{gib_value:.3g}"
        raise InputError(f"{what}: {text!r} is {shown} GiB, more than any host memory, disk or remote store a GPU "
                         f"server has (the bound is {TIER_GIB_MAX:,} GiB = 1 PiB); a bare number is GiB, as "
                         "for every size flag: check the size and its unit")
    return gib_value


_COUNT = re.compile(r"^\s*((?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([kKmMbBtT]?)\s*$")
_COUNT_STEPS = {"": 0, "k": 1, "m": 2, "b": 3, "t": 4}


def parse_count(text: str | int | float, *, what: str = "count") -> float:
    """Parse a count: ``"3000000000"``, ``"3_000_000_000"``, ``"3e9"`` or a suffixed ``"3B"`` (K, M, B, T; any case).

    The reader of every count the user types but token counts (:func:`parse_tokens`, vLLM's suffixes). The suffixes
    are powers of 1000 (3B tokens a month = 3 × 10^9, as the outputs write them).

    Raises:
        InputError: unparseable text, a negative, NaN or infinite value.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = _COUNT.match(str(text))
        if m is None and _COUNT.match(str(text).strip().removeprefix("-")):  # a readable count, negative
            raise InputError(f"{what}: {text!r} is negative; a count is 0 or more")
        if not m or "__" in m.group(1) or m.group(1).endswith("_"):
            raise InputError(f"{what}: cannot read {text!r} as a count; write e.g. 3000000000, 3_000_000_000, 3e9 or "
                             "3B (K, M, B, T: powers of 1000)")
        value, unit = float(m.group(1).replace("_", "")), m.group(2).lower()
    value *= 1000.0 ** _COUNT_STEPS[unit]
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{what}: {text!r} must be a finite, non-negative count")
    return value


def count_option(what: str, *, positive: bool = False):  # noqa: ANN201 - a typer ``parser=``: str -> float
    """A ``parser=`` for a typer option that takes a count (:func:`parse_count`, powers of 1000), naming ``what``;
    ``positive``: 0 is refused too (a monthly volume of nothing prices nothing)."""
    def parse(text: str) -> float:
        if positive and str(text).strip().startswith("-"):  # the volume's own bound, not a count's "0 or more"
            raise InputError(f"{what}: {text!r} is negative; a volume must be more than 0 (leave the flag out for "
                             "the per-token ledgers alone)")
        value = parse_count(text, what=what)
        if positive and value == 0:
            raise InputError(f"{what}: {text!r} is zero; a volume must be more than 0 (leave the flag out for the "
                             "per-token ledgers alone)")
        return value

    return parse


def parse_duration_s(text: str, *, what: str = "duration") -> float:
    """Parse a duration with an explicit unit (``"200ms"``, ``"0.2s"``, ``"50us"``) into seconds.

    Raises:
        InputError: missing or unknown unit, negative, NaN or infinite value.
    """
    m = _NUMBER_UNIT.match(str(text))
    if not m:
        raise InputError(f"{what}: cannot read {text!r} as a duration; write e.g. '200ms' or '0.5s'")
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit == "":
        raise InputError(f"{what}: {text!r} has no unit; write e.g. '{text}ms' or '{text}s'")
    if unit not in _TIME_UNITS:
        raise InputError(f"{what}: unknown time unit {unit!r} in {text!r}; use ns, us, ms, s, min or h")
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{what}: {text!r} must be a finite, non-negative duration")
    return value * _TIME_UNITS[unit]


def cdiv(a: int, b: int) -> int:
    """``cdiv`` as engines write it: ceil(a / b) for non-negative integers."""
    return -(-a // b)


def gib(n_bytes: float) -> float:
    """Bytes to GiB (2**30)."""
    return n_bytes / GiB


def gb(n_bytes: float) -> float:
    """Bytes to GB (10**9)."""
    return n_bytes / GB


def fmt_bytes(n_bytes: float, *, both: bool = True) -> str:
    """Human text for a byte count: ``"14.96 GiB (16.06 GB)"``; small values in KiB/MiB."""
    n = float(n_bytes)
    sign = "-" if n < 0 else ""
    a = abs(n)
    if a >= GiB:
        main = f"{sign}{a / GiB:,.2f} GiB"
        return f"{main} ({sign}{a / GB:,.2f} GB)" if both else main
    if a >= MiB:
        main = f"{sign}{a / MiB:,.2f} MiB"
        return f"{main} ({sign}{a / MB:,.2f} MB)" if both else main
    # a fractional byte count (e.g. 584 B / 128 per token) is not cut
    exact = f"{a:,.0f}" if a.is_integer() else f"{a:,.2f}"
    if a >= KiB:
        return f"{sign}{a / KiB:,.3g} KiB ({sign}{exact} B)"
    return f"{sign}{exact} B"


def fmt_plain(x: float) -> str:
    """A figure without exponent notation: 4 significant digits below 1,000, thousands grouped above."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def fmt_rate(x: float) -> str:
    """A rate (req/s, per GPU or not): two decimals from 1 up, three significant digits below (0.0505 and 0.0550 are
    not both 0.05)."""
    return f"{x:,.2f}" if abs(x) >= 1 or x == 0 else f"{x:.3g}"


def fmt_low(x: float) -> str:
    """A range's low end (a concurrency ×) with two decimals rounded down, so that the whole requests it holds
    (its floor) read off it: 19.996x prints 19.99x, not 20.00x beside "as few as 19"."""
    return f"{math.floor(x * 100) / 100:,.2f}" if math.isfinite(x) else f"{x}"


def fmt_ratio(x: float) -> str:
    """A speed-up or ratio with two decimals, more where two would round a loss or a gain to 1.00 (0.998×, 1.003×)."""
    for digits in (2, 3, 4):
        text = f"{x:.{digits}f}"
        if x == 1.0 or float(text) != 1.0:
            break
    return text + "×"


def fmt_duration(seconds: float) -> str:
    """Human text for a duration in the most readable unit (µs, ms or s)."""
    if seconds != seconds:  # NaN
        return "n/a"
    a = abs(seconds)
    if a < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if a < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"
