"""The client's and the server front end's latency (``--client-latency``), added to a simulated run's records.

A measured TTFT and E2E run from the client's send to the tokens it receives: they include HTTP, the gateway,
tokenisation and the SSE stream, which the engine simulator does not model. A user who measured that latency for
their own client (e.g. ``kvledger calibrate --scope gpu --fit-frontend``, stored as ``fit.set_up_frontend_s``) adds
it here: every request's arrival moves that much earlier, so its TTFT and E2E grow by it exactly and its TPOT and ITL
do not (the same shift as ``kvledger.calibration.replay.with_frontend``). The simulator itself is untouched: the shift
is applied to its records afterwards, so the engine's schedule is the one simulated (in a closed loop, a user's next
request is not delayed by it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kvledger.errors import InputError
from kvledger.ranges import check_options

__all__ = ["FLAG", "ClientLatency", "client_latency_of", "client_latency_for", "profile_latency", "with_client_latency"]

FLAG = "--client-latency"
_WHAT = "the client's and front end's latency, not the engine's"
_HOW = "fit it with kvledger calibrate --scope gpu --fit-frontend"


@dataclass(frozen=True)
class ClientLatency:
    """A latency added to every request's TTFT and E2E: ``seconds`` (s) and where it came from, in words."""

    seconds: float
    source: str

    def note(self) -> str:
        """The line the outputs print."""
        return f"client latency {self.seconds * 1e3:.4g} ms added to every request's TTFT and E2E (not TPOT/ITL): " \
               f"{self.source}"

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "source": self.source}


def client_latency_of(text: str | None, gpu_profile: str | None = None, gpu_name: str | None = None
                      ) -> ClientLatency | None:
    """``--client-latency`` as given (a duration with its unit, e.g. ``21ms``; or ``profile:NAME``, a set-up's fitted
    latency in the GPU profile ``gpu_profile`` for ``gpu_name``; ``profile:FILE.json``, that file's own fitted
    ``fit.frontend_s``), or None when absent or a given zero (a fitted zero is kept, so its note says so).

    Raises:
        InputError: not a duration, negative, not finite or above 10 s; a profile with no such set-up, or a
            ``profile:FILE.json`` fitted without --fit-frontend (its frontend_s 0, nothing fitted).
    """
    if text is None:
        return None
    if str(text).startswith("profile:"):
        seconds, source = profile_latency(str(text).removeprefix("profile:"), gpu_profile, gpu_name)
        check_options("simulate", {"client_latency": seconds}, {"client_latency": FLAG})  # [0, 10] s: kvledger.ranges
    else:
        from kvledger.units import parse_duration_s

        check_options("simulate", {"client_latency": str(text)}, {"client_latency": FLAG})  # read with its unit
        seconds = parse_duration_s(text, what=FLAG)
        source = f"given: {FLAG} {seconds * 1e3:.4g} ms"
    if seconds == 0 and not str(text).startswith("profile:"):  # a given 0 adds nothing; a fitted 0 is kept and said
        return None
    return ClientLatency(seconds, f"{source}; {_WHAT}; {_HOW}")


def client_latency_for(a: Any, gpu_name: str, notes: list[str]) -> ClientLatency | None:
    """The ``--client-latency`` of a simulation's args (``sim_setup.SimRequestArgs``: ``client_latency``,
    ``gpu_profile``) on the catalog GPU ``gpu_name``, its note appended to ``notes``; None when none was given."""
    got = client_latency_of(a.client_latency, a.gpu_profile, gpu_name) if a.client_latency else None
    notes += [got.note()] if got is not None else []
    return got


def profile_latency(name: str, gpu_profile: str | None, gpu_name: str | None) -> tuple[float, str]:
    """(seconds, source) of set-up ``name`` in the profile's ``fit.set_up_frontend_s``; or, when ``name`` is a
    ``.json`` path, the ``fit.frontend_s`` that profile's own ``calibrate --scope gpu --fit-frontend`` fitted (it names
    no set-up).

    Raises:
        InputError: no such set-up (the keys listed, and the file to pass when the profile has only ``frontend_s``),
            or a value that is not a number. FormatError: a ``.json`` that is not a readable GPU profile.
    """
    from kvledger.accounting.gpu_profile import profile_fit

    if name.lower().endswith(".json"):
        return _file_latency(name)
    got = profile_fit(gpu_profile, gpu_name or "")
    if got is None:
        raise InputError(f"{FLAG} profile:{name} reads a set-up's fitted latency from the GPU profile, but none prices "
                         f"this run on {gpu_name}; pass --gpu-profile FILE from `kvledger calibrate --scope gpu "
                         "--fit-frontend`, or a duration such as 21ms")
    fit, where = got
    table = fit.get("set_up_frontend_s") or {}
    if not isinstance(table, dict) or name not in table:
        keys = ", ".join(repr(k) for k in table) if isinstance(table, dict) and table else "none (fit with " \
            "`kvledger calibrate --scope gpu --fit-frontend`)"
        own = fit.get("frontend_s")
        hint = f"; its own fitted latency (fit.frontend_s, {float(own) * 1e3:.4g} ms) is read with {FLAG} " \
            f"profile:{where}" if isinstance(own, (int, float)) and where.lower().endswith(".json") else ""
        raise InputError(f"{FLAG} profile:{name}: the GPU profile {where} has no set-up {name!r} in "
                         f"fit.set_up_frontend_s; its set-ups: {keys}{hint}")
    try:
        seconds = float(table[name])
    except (TypeError, ValueError):
        raise InputError(f"{FLAG} profile:{name}: {where} gives {table[name]!r}, not a number of seconds") from None
    return seconds, f"fitted: set-up {name!r} in {where} (fit.set_up_frontend_s, {seconds * 1e3:.4g} ms)"


def _file_latency(path: str) -> tuple[float, str]:
    """(seconds, source): ``fit.frontend_s`` of the GPU profile at ``path`` (``calibrate --scope gpu --fit-frontend``).

    Raises:
        FormatError: not a readable GPU profile. InputError: it fitted no frontend latency.
    """
    import json

    from kvledger.accounting.gpu_profile import load_gpu_profile

    load_gpu_profile(path)  # a readable GPU profile, or its one-paragraph error
    fit = json.loads(open(path, encoding="utf-8").read()).get("fit")
    fit = fit if isinstance(fit, dict) else {}
    seconds, fitted = fit.get("frontend_s"), fit.get("frontend_fitted")
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    # a fit without --fit-frontend writes frontend_s 0 (calibrate marks it "frontend_fitted": false; a file
    # written before that mark has a 0 alone): a latency nobody fitted, which would add nothing without saying so
    if not number or fitted is False or (seconds == 0 and fitted is not True):
        raise InputError(f"{FLAG} profile:{path}: the GPU profile fitted no client latency ("
                         + (f"fit.frontend_s is {seconds!r}: " if number else "no fit.frontend_s: ")
                         + "it was calibrated without --fit-frontend), so it would add nothing; re-fit it with "
                         "`kvledger calibrate --scope gpu --fit-frontend --out FILE.json`, or give "
                         f"{FLAG} in ms (a duration such as 21ms){_set_ups_hint(fit, path)}")
    return float(seconds), f"fitted: fit.frontend_s of {path} ({float(seconds) * 1e3:.4g} ms)"


def _set_ups_hint(fit: dict[str, Any], path: str) -> str:
    """Where a profile holds set-ups' latencies (``fit.set_up_frontend_s``) but no own one: how to read them."""
    table = fit.get("set_up_frontend_s")
    if not isinstance(table, dict) or not table:
        return ""
    return (f"; its set-ups' fitted latencies (fit.set_up_frontend_s: {', '.join(repr(k) for k in table)}) are read "
            f"with {FLAG} profile:NAME --gpu-profile {path}")


def with_client_latency(result: Any, d: float) -> Any:
    """A copy of the simulator's ``result`` (``dynamics.simulator.SimResult``) with every arrival ``d`` s earlier: each
    request's TTFT and E2E grow by ``d``; its TPOT and ITL do not. The summary's TTFT and E2E distributions, duration
    and throughput are read again off the shifted records; its ITL, TPOT and engine figures are kept."""
    from kvledger.dynamics.outputs.metrics import summarize_records
    from kvledger.record_columns import with_arrivals_earlier

    if d <= 0:
        return result
    run = with_arrivals_earlier(result.records, d)
    fig = summarize_records(run, exact_itl_mean=True)
    keep = ("itl_s", "tpot_s")
    shifted = {f.name: getattr(fig, f.name) for f in dataclasses.fields(fig) if f.name not in keep}
    return dataclasses.replace(result, records=run, summary=dataclasses.replace(result.summary, **shifted))
