"""The table of ``kvledger goodput``'s runs (a model column when the runs' models differ), the answer of several runs,
and the tool-reported goodput as a sentence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["LEGEND", "best_answer", "deployment_name", "deployments_differ", "fmt_or_na",
           "goodput_table", "models_differ", "run_name", "single_answer",
           "tool_goodput_text"]

LEGEND = ("#: run (details below); req: all requests; fail: failed; good: completed and every SLO met; attain: good ÷ "
          "req; good/s: goodput, req/s; done/s: completed req/s; good tok/s: output tokens of good requests per s; "
          "mult: done/s ÷ good/s, the effective-cost multiplier (what you pay for ÷ what is usable). ≥/≤: bounds of "
          "an estimate; ≈: estimated with the mean output length")
_NO_MODEL = "not stated"


def fmt_or_na(x: Any, spec: str = ",.3f", none: str = "n/a") -> str:
    return none if x is None else format(x, spec)


def models_differ(results: list[Any]) -> bool:
    """Several runs whose models differ, or are stated for some and not for others."""
    return len(results) > 1 and len({r.model for r in results}) > 1


def deployment_name(r: Any) -> str:
    """A run's deployment as the table's column and the answer name it: the model, then what its record states served
    it (GPU, GPU count, TP/PP/DP, quantization), e.g. 'org/A on H100, GPUs 2, TP 2'."""
    rest = ", ".join(f"{label} {v}" if label != "GPU" else str(v) for label, v in r.deployment)
    return (r.model or _NO_MODEL) + (f" on {rest}" if rest else "")


def deployments_differ(results: list[Any]) -> bool:
    """Several runs whose deployments (``deployment_name``: model, GPU and launch settings) differ."""
    return len(results) > 1 and len({deployment_name(r) for r in results}) > 1


def _mult(r: Any) -> str:
    """The multiplier cell: the value and its bound side as the JSON carries them (``multiplier_bounded``)."""
    value, bound = r.multiplier_bounded()
    if value is None:
        return "∞" if r.num_completed else "n/a"
    return {"upper": "≤", "lower": "≥"}.get(bound or "", "") + f"{value:.2f}×"


def goodput_table(results: list[Any]) -> Any:
    """One row per run; a model column after # when the runs' models differ, a deployment column when only what
    served them does (GPU, TP, ...)."""
    from kvledger.report.tables import LedgerTable as Table

    with_model = deployments_differ(results)
    column = "model" if models_differ(results) and all(not r.deployment for r in results) else "deployment"
    cell = (lambda r: r.model or _NO_MODEL) if column == "model" else deployment_name
    t = Table(title="Goodput under the SLO", title_justify="left")
    for col in ("#", *([column] if with_model else []), "req", "fail", "good", "attain", "good/s", "done/s",
                "good tok/s", "mult"):
        t.add_column(col, justify="left" if col == column else "right", no_wrap=True)
    for k, r in enumerate(results, start=1):
        # an estimate whose bounds meet (e.g. every percentile within the SLO) knows the count exactly: no ≥/≤ then;
        # its token goodput still assumes the mean output length, hence ≈
        exact = r.exact_count
        good = f"{r.num_good:,}" if exact or r.num_good_upper is None else f"≥{r.num_good:,} ≤{r.num_good_upper:,}"
        lo = "" if exact else "≥"  # an estimate from percentiles: goodput and good tokens are lower bounds
        tok = r.goodput_output_tok_per_s
        tok_mark = "" if tok is None else ("≈" if r.estimate and exact else lo)
        t.add_row(str(k), *([cell(r)] if with_model else []), f"{r.num_requests:,}",
                  f"{r.num_failed:,}", good, lo + f"{r.attainment:.1%}", lo + fmt_or_na(r.goodput_req_per_s),
                  fmt_or_na(r.throughput_req_per_s), tok_mark + fmt_or_na(tok, ",.1f"), _mult(r))
    return t


def run_name(k: int, r: Any) -> str:
    """'#K FILE [LABEL]': a run as its section below the table is headed."""
    return f"#{k} {Path(r.file).name}" + (f" [{r.run_label}]" if r.run_label else "")


def single_answer(r: Any) -> str:
    """The answer of one run, first: its goodput and attainment (lower bounds, ≥, for an estimate from percentiles),
    and what served it (the run's model and GPU, where its record names them)."""
    lo = "" if r.exact_count else "≥"
    what = " on ".join(x for x in (r.model, r.hardware) if x)
    return (f"answer: {lo}{fmt_or_na(r.goodput_req_per_s)} good req/s ({lo}{r.attainment:.1%} of "
            f"{r.num_requests:,} requests within the SLO)" + (f" — {what}" if what else ""))


def _rivals(results: list[Any], k: int, ks: list[int]) -> str:
    """Where run ``k``'s goodput is a lower bound (an estimate from percentiles), the runs among ``ks`` whose upper
    bound (``GoodputResult.at_upper_bound``: every request its percentiles leave open counted good) passes it, said
    with that bound; "" when none does, so that ``k`` is the best whichever way the open requests fall."""
    low = results[k - 1].goodput_req_per_s or 0.0
    up = {j: results[j - 1].at_upper_bound() for j in ks if j != k and not results[j - 1].exact_count}
    over = [f"#{j} may reach {u.goodput_req_per_s:,.3f}" for j, u in up.items()
            if u is not None and (u.goodput_req_per_s or 0.0) > low]
    if not over:
        return ""
    return (f"from their percentiles, {', '.join(over)} good req/s at most, more than its {low:,.3f}, so which run "
            "serves the most within the SLO is not settled by these files (per-request times settle it: vLLM's "
            "--save-detailed, for one)")


def best_answer(results: list[Any], empty: dict[int, str]) -> str:
    """Several runs' answer, first: ``single_answer`` of the one with the most good req/s among those where some
    request completed (``empty``: those without), named as its section below is. Runs of different models, or of one
    model on different GPUs or launch settings (``deployment_name``), are different deployments: then no run is named
    the best of all, but the best of each deployment."""
    def best(ks: list[int]) -> int:
        return max(ks, key=lambda k: results[k - 1].goodput_req_per_s or 0.0)

    measured = [k for k in range(1, len(results) + 1) if k not in empty]
    if not deployments_differ(results):
        k = best(measured)
        rivals = _rivals(results, k, measured)
        if rivals:
            return (f"{single_answer(results[k - 1])}, {run_name(k, results[k - 1])}: the largest lower bound of "
                    f"{len(results)} runs, not necessarily the best: {rivals} (each run in the table)")
        return (f"{single_answer(results[k - 1])}; the best of {len(results)} runs: {run_name(k, results[k - 1])} "
                "(each run in the table)")
    by_model: dict[str, list[int]] = {}
    for k in measured:
        by_model.setdefault(deployment_name(results[k - 1]), []).append(k)
    each = "; ".join(f"{m}: {single_answer(results[best(ks) - 1]).removeprefix('answer: ').split(' — ')[0]}, "
                     f"{run_name(best(ks), results[best(ks) - 1])}"
                     + (f" (the largest lower bound, {r})" if (r := _rivals(results, best(ks), ks)) else "")
                     for m, ks in by_model.items())
    unstated = "; a model not stated counts as its own" if any(r.model is None for r in results) else ""
    if not any(r.deployment for r in results):  # only the models tell the runs apart
        return (f"answer: the {len(results)} runs are of {len({r.model for r in results})} models (the table's model "
                f"column{unstated}), so they are different deployments and no run is the best of all; the most "
                f"goodput of each model: {each}")
    n = len({deployment_name(r) for r in results})
    return (f"answer: the {len(results)} runs are of {n} deployments (the table's deployment column: model, GPU and "
            f"the launch settings each record states{unstated}), so no run is the best of all; the most goodput of "
            f"each deployment: {each}")


def tool_goodput_text(tg: dict[str, Any]) -> str:
    """The goodput a benchmark tool reported itself, as a sentence: under which SLO (the file's, or one not stored in
    it), its rate and counts, and the field they came from."""
    rate = tg.get("req_per_s")
    said = [f"{fmt_or_na(rate)} good req/s" if rate is not None else "no rate stated"]
    if tg.get("good_requests") is not None:
        said.append(f"{tg['good_requests']:,} good requests")
    if tg.get("percentage_of_successful") is not None:
        said.append(f"{tg['percentage_of_successful']:g}% of the successful ones")
    slo = "under the SLO the file states" if tg.get("slo_source") else "its SLO is not in the file"
    where = [f"the file's {tg['field']}"] if tg.get("field") else []
    if tg.get("slo_as_kvledger"):
        where.append(f"that SLO as kvledger's --slo: {tg['slo_as_kvledger']}")
    elif tg.get("slo_source") and isinstance(tg.get("slo"), dict):
        where.append("that SLO: " + ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
                                              for k, v in tg["slo"].items()))
    return f"tool-reported goodput ({slo}): {', '.join(said)}" + (f" ({'; '.join(where)})" if where else "")
