"""The notes a stage comparison adds about the stage's own file, each with its own figures: why the TPOT compared is
derived (``tpot_note``), why its output throughput differs from the replay's where the client fixed the output length
(``counted_output_note``), and why ``--slo`` gives no goodput on it (``stage_goodput_note``). ``stage``: a
``kvledger.calibration.sweep.Stage``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.evidence.inference_perf_client import client_config as _client_config

__all__ = ["FILE_TPOT", "tpot_note", "counted_output_note", "stage_goodput_note"]

#: the comparison rows of inference-perf's own time_per_output_token: shown beside the TPOT judged, never judged
FILE_TPOT = "TPOT (file's field)"


def tpot_note(stage: Any) -> str:
    """Why the TPOT compared is derived, with this stage's own figures: its ``time_per_output_token`` mean against
    (E2E mean − TTFT mean)/(output mean − 1) from the same file."""
    said, derived = stage.stats["tpot_file"]["mean"], stage.stats["tpot"]["mean"]
    return (f"TPOT: inference-perf's time_per_output_token (\"{FILE_TPOT}\", shown only) disagrees with the "
            "file's own TTFT, E2E and output length; the TPOT compared is (E2E mean − TTFT mean)/(output mean − 1), "
            "with the client config's fixed output length where it states one (this stage: the field's mean "
            f"{said * 1e3:.2f} ms against {derived * 1e3:.2f} ms so derived)")


def stage_goodput_note(stage_path: str | Path, slo: str) -> str:
    """Why ``--slo`` (``slo``: its description) gives no goodput on a stage file, and which file would.

    Goodput counts the requests that met every SLO at once, so it needs each request's TTFT and TPOT together; a
    stage file keeps each metric's quantiles apart (which request was slow is lost), and its TPOT is itself derived
    from means (``tpot_note``). Marginal quantiles only bound the joint share (between P(TTFT ok) + P(TPOT ok)
    − 1 and the smaller of the two), too wide to compare a replay against, so no figure is made up. inference-perf
    writes each request to ``per_request_lifecycle_metrics.json`` when its config's
    ``report.request_lifecycle.per_request`` is true; the note says whether this run's config asked for it and
    whether that file lies beside the stage."""
    here = Path(stage_path).resolve().parent
    cfg = _client_config(stage_path)
    report = cfg[1].get("report") if cfg is not None and isinstance(cfg[1], dict) else None
    life = report.get("request_lifecycle") if isinstance(report, dict) else None
    asked = isinstance(life, dict) and life.get("per_request") is True
    per_request = here / "per_request_lifecycle_metrics.json"
    if per_request.is_file():
        where = f"it lies beside the stage: kvledger validate {per_request} --slo …"
    elif asked:
        where = (f"{cfg[0]} asks for it (report.request_lifecycle.per_request: true), but it is not in {here}: "
                 "validate that file with --slo")
    else:
        where = ("this run's client config does not ask for it (set report.request_lifecycle.per_request: true in "
                 "inference-perf's config and rerun), or give any per-request benchmark file")
    return (f"goodput under {slo}: not compared. A stage file keeps each metric's quantiles apart, not which request "
            "met which SLO, and goodput counts the requests that met all of them at once; the marginal quantiles "
            "only bound that share, too loosely to judge a replay. Per-request records allow it: inference-perf "
            f"writes them to per_request_lifecycle_metrics.json; {where}")


#: a counted output mean within this share of the fixed length is the same length (no note)
_SAME_LENGTH = 0.01


def counted_output_note(stage: Any) -> str | None:
    """Why the stage's output throughput and the replay's differ where its client asked for a fixed output length
    (``stage.counted_output``: the counted min and mean, set only then): the file's tokens/s counts each response by
    re-tokenizing its text (``fixed_output_tokens``: it under-counts some), while the replay generates the length the
    client config asked the engine for under ``ignore_eos``. So the output throughput differs by fixed/mean − 1 at one
    request rate, and it is that count, not a step-cost error. None when the two lengths agree within
    ``_SAME_LENGTH``."""
    if stage.counted_output is None or not stage.output_quantiles:
        return None
    lo, mean = stage.counted_output
    fixed = stage.output_quantiles[-1][1]
    if mean <= 0 or abs(fixed / mean - 1) <= _SAME_LENGTH:
        return None
    cfg = _client_config(stage.path) if Path(stage.path).is_file() else None
    return (f"output throughput: the file's tokens/s counts each response's tokens as the client re-tokenized its "
            f"text (successes.output_len), while {cfg[0] if cfg else 'the client config'} asks the engine for "
            f"{fixed:g} tokens per request under ignore_eos, which the replay generates; at the same request rate the "
            f"two lengths alone make them differ by {fixed:g}/mean − 1: a count, not a step-cost error (TPOT is "
            f"compared on the {fixed:g} tokens) (this stage: {stage.output_tokens_per_s:,.2f} tokens/s, output_len "
            f"mean {mean:,.2f}, min {lo:g}: {fixed:g}/{mean:,.2f} − 1 = {fixed / mean - 1:+.1%})")
