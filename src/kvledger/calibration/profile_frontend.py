"""The front-end latency a GPU profile carries but never adds: ``calibrate --scope gpu --fit-frontend`` fits the
set-up's per-request latency outside the engine (``fit.frontend_s``: HTTP, tokenisation, streaming to the client) with
the fractions, and each fitted run's TTFT and E2E errors include it; the profile prices the GPU, so it adds none. A
run validated under the profile alone then lacks that latency, and an in-sample TTFT error of −3% reads −68%.

The rule (``RULE``), unless ``--client-latency`` is given (it wins; ``--client-latency 0ms`` adds nothing): the
latency is the set-up's (the client and front end that timed the fitted runs), so ``validate`` adds it to the runs of
that set-up — a run the profile was fitted on (IN-SAMPLE, by path or by content: its errors are then the fit's own), or
a run whose file lies in the same folder as a fitted run's (another stage of the same sweep: the same client and
deployment, held out, predicted as the fit would) — and not to a run elsewhere (another set-up: its client's latency
was never measured, so adding this one would be a guess), where a note says it is not applied and how to add it
(``--client-latency profile:FILE``, when the same client timed it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

__all__ = ["RULE", "FRONTEND_HEAD", "fitted_frontend", "same_set_up", "with_profile_frontend"]

RULE = ("added to the runs of the set-up the profile was fitted on (those it was fitted on, and runs in the same "
        "folder as one: the same client and deployment), not to runs elsewhere (another set-up, whose client latency "
        "was not measured); a --client-latency given wins")
#: how the applied note starts (``report.validation_figures.warnings_first`` prints it above the figures)
FRONTEND_HEAD = "front-end latency added:"


def fitted_frontend(gpu_profile: str | None, gpu_name: str) -> tuple[float, str] | None:
    """(seconds, file) of the ``fit.frontend_s`` a GPU profile FILE.json (``--gpu-profile``) fitted with
    ``--fit-frontend``; None for no file, a bundled profile, or one fitted without it (its 0 or ``frontend_fitted``
    false)."""
    from kvledger.accounting.gpu_profile import profile_fit

    if not gpu_profile or not str(gpu_profile).lower().endswith(".json"):
        return None
    got = profile_fit(gpu_profile, gpu_name)
    if got is None:
        return None
    fit, where = got
    s = fit.get("frontend_s")
    if isinstance(s, bool) or not isinstance(s, (int, float)) or s <= 0 or fit.get("frontend_fitted") is False:
        return None
    return float(s), where


def _folder(path: str) -> Path:
    """The folder holding a run, resolved: the path itself for a run folder, else its file's folder."""
    p = Path(path).resolve()
    return p if p.is_dir() else p.parent


def same_set_up(source: str, prof: Any) -> bool:
    """Whether the run in ``source`` lies in the very folder of one of the GPU profile ``prof``'s fitted runs (their
    ``source``s, resolved from here as calibrate recorded them; a run folder's own folder is the run). Resolved folders
    are compared whole: a ``results/`` folder of another client does not match (every inference-perf run sits in
    one), nor does a sub-folder; a fitted run recorded relative to another working directory matches nothing, and the
    latency is then only offered, not added."""
    fitted = {_folder(str(r["source"])) for r in getattr(prof, "runs", ()) or () if r.get("source")}
    return _folder(source) in fitted


def with_profile_frontend(setup: Any, a: Any, source: str, in_sample: bool) -> tuple[Any, dict[str, Any] | None,
                                                                                       str | None]:
    """(setup, JSON block, note): the setup with the profile's fitted front-end latency as its client latency where
    ``RULE`` adds it (``a``: the validation's ``SimRequestArgs``; ``in_sample``: the run is one the profile was fitted
    on); the block (``profile_frontend`` in ``validate --json``) and the note say what was done. Unchanged, with no
    block or note, when ``--client-latency`` was given or the profile fitted none."""
    got = None if a.client_latency is not None or setup.gpu_profile is None else \
        fitted_frontend(a.gpu_profile, setup.gpu_name)
    if got is None:
        return setup, None, None
    from kvledger.analyses.serving.client_latency import ClientLatency

    seconds, where = got
    ms = f"{seconds * 1e3:.4g} ms"
    apply = in_sample or same_set_up(source, setup.gpu_profile)
    block = {"seconds": seconds, "profile": where, "applied": apply, "rule": RULE}
    if not apply:
        return setup, block, (
            f"WARNING: the GPU profile {where} carries a front-end latency fitted with --fit-frontend ({ms}, "
            "fit.frontend_s: the client's and front end's, outside the engine), not added to this run: its file lies "
            "outside the folders of the runs it was fitted on (another set-up), so its TTFT and E2E are the "
            f"engine's alone; if the same client timed it, add it with --client-latency profile:{where}")
    src = f"fit.frontend_s of {where} ({ms}), the set-up's: validate's default for runs of the set-up it was fitted on"
    note = (f"{FRONTEND_HEAD} the GPU profile {where} carries a front-end latency fitted with --fit-frontend ({ms}, "
            "fit.frontend_s: the client's and front end's, which the profile never adds itself); validate adds it to "
            "every simulated TTFT and E2E of the runs it was fitted on (IN-SAMPLE: their errors are then the fit's "
            "own) and of runs in the same folder (the same client and deployment), not to runs elsewhere; "
            "--client-latency 0ms leaves it out")
    return replace(setup, client_latency=ClientLatency(seconds, src)), block, note
