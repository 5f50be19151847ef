"""A monthly volume typed as a rate: ``"100M/day"``, ``"4M/h"``, ``"20/s"``, ``"3B/month"`` or a bare ``"3B"``.

One reader for ``--monthly-tokens``, ``--monthly-requests``, ``--monthly-input-tokens``/``--monthly-output-tokens``
in the CLI, ``kvledger.cost`` and the web app's volume fields. A per-day or per-hour figure becomes a monthly one with
the ledgers' month (``ledgers.month.HOURS_PER_MONTH``, 730 h; a day is 24 h, so a month is 730 ÷ 24 =
30.42 days; a second is 1/3600 h, so a month is 730 × 3600 = 2,628,000 s, as ``search --rate`` sizes a req/s load),
and the value keeps what was typed (:class:`RateVolume`) so the answer can restate the conversion it
priced with.
"""

from __future__ import annotations

from kvledger.errors import InputError
from kvledger.ledgers.month import HOURS_PER_MONTH
from kvledger.units import count_option

__all__ = ["RateVolume", "volume_option", "rate_words", "given_clause", "DAYS_PER_MONTH", "PER_MONTH"]

#: days in the cost ledger's month: 730 h ÷ 24 h (30.416…), derived, never a second constant
DAYS_PER_MONTH = HOURS_PER_MONTH / 24.0

#: the rate units read after ``/`` → (the unit's word, how many of it make a month)
PER_MONTH = {"month": ("month", 1.0), "mo": ("month", 1.0),
             "day": ("day", DAYS_PER_MONTH), "d": ("day", DAYS_PER_MONTH),
             "hour": ("hour", HOURS_PER_MONTH), "hr": ("hour", HOURS_PER_MONTH), "h": ("hour", HOURS_PER_MONTH),
             "minute": ("minute", HOURS_PER_MONTH * 60), "min": ("minute", HOURS_PER_MONTH * 60),
             "second": ("second", HOURS_PER_MONTH * 3600), "sec": ("second", HOURS_PER_MONTH * 3600),
             "s": ("second", HOURS_PER_MONTH * 3600)}


class RateVolume(float):
    """A monthly volume (the float) that was typed per day or per hour: ``per`` the unit's word, ``rate`` the count per
    that unit, ``given`` the text as typed."""

    per: str
    rate: float
    given: str

    def __new__(cls, monthly: float, per: str, rate: float, given: str) -> RateVolume:
        obj = super().__new__(cls, monthly)
        obj.per, obj.rate, obj.given = per, rate, given
        return obj

    def __reduce__(self):  # noqa: ANN204 - pickles as itself (the simulator's worker processes)
        return (RateVolume, (float(self), self.per, self.rate, self.given))


def volume_option(what: str, *, positive: bool = False):  # noqa: ANN201 - a typer ``parser=``: str -> float
    """A ``parser=`` for a monthly volume: ``units.count_option``'s count (K, M, B, T: powers of 1000), optionally
    ``/month``, ``/day`` (× 30.42), ``/hour`` (× 730), ``/min`` (× 43,800) or ``/s`` (× 2,628,000) after it;
    ``positive`` as ``count_option``'s.

    Raises:
        InputError: an unread unit after ``/`` (a week or a year: no fixed number of the ledger's months), or the
            count's own errors (unreadable, negative, zero where ``positive``), naming ``what``.
    """
    count = count_option(what, positive=positive)

    def parse(text: str) -> float:
        head, slash, unit = str(text).partition("/")
        if not slash:
            return count(text)
        key = unit.strip().lower()
        if key not in PER_MONTH:
            raise InputError(f"{what}: {text!r}: cannot read the rate unit {unit.strip()!r}; write the volume per "
                             "/month, /day, /hour, /min or /s (e.g. 100M/day, 20/s; a month is 730 h = 30.42 days), "
                             "or per month with no unit")
        per, months = PER_MONTH[key]
        try:
            rate = count(head.strip())
        except InputError as err:
            raise InputError(f"{err} (the count before /{unit.strip()} in {str(text).strip()!r})") from None
        if per == "month":
            return rate
        return RateVolume(rate * months, per, rate, str(text).strip())

    return parse


def rate_words(value: object, noun: str, fmt) -> str:  # noqa: ANN001 - fmt: a count formatter (tokens_text)
    """``100M tokens/day × 30.42 days = 3.04B tokens/month`` for a :class:`RateVolume`; ``""`` for a plain number."""
    if not isinstance(value, RateVolume):
        return ""
    months = PER_MONTH[value.per][1]
    many = {"day": f"{months:,.2f} days", "hour": f"{months:,.0f} h", "minute": f"{months:,.0f} min",
            "second": f"{months:,.0f} s"}[value.per]
    return f"{fmt(value.rate)} {noun}/{value.per} × {many} = {fmt(float(value))} {noun}/month"


def given_clause(given: str) -> str:
    """``"; 100M tokens/day × 30.42 days = 3.04B tokens/month"`` after an answer's volume, where it was typed per day
    or hour (``given``: ``volume.given_words`` over :func:`rate_words`, a ``Volume``'s ``given``); "" where it was not.
    The clause of every answer that restates a volume: cost's verdict and no-verdict lines, search's header."""
    return f"; {given}" if given else ""
