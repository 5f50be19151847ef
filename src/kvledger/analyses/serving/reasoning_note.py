"""The note of a reasoning model simulated on a trace: the trace's output lengths are those its service saw, and a
reasoning model's outputs, its thinking included, are likely far longer in use (``catalog.reasoning``). No reasoning
length is assumed: the note names the trace's mean and the flags that set the lengths."""

from __future__ import annotations

from typing import Any

__all__ = ["reasoning_note", "search_reasoning_note", "trace_notes"]


def reasoning_note(model: str, trace: str, output_tokens_mean: float) -> str | None:
    """The note for ``model`` (its name as given, or a ``ModelSpec``'s name: "alias (config of X)" is the alias) on
    ``trace``, whose outputs average ``output_tokens_mean`` tokens; None for a model not marked as a reasoning model
    (a config path says nothing of its template)."""
    from kvledger.catalog.reasoning import reasoning_template

    given = model.split(" (config of ")[0]
    if (words := reasoning_template(given)) is None:
        return None
    return (f"{given} is a reasoning model ({words}); the trace {trace}'s outputs average {output_tokens_mean:,.0f} "
            "tokens, and the model's in use, thinking included, are likely far longer: --prompt-lengths with "
            "--output-lengths simulates the lengths you expect")


def search_reasoning_note(spec: Any, entries: list[dict[str, Any]]) -> str | None:
    """``reasoning_note`` for a search's model on its trace, the same seeded requests every candidate's probes replayed
    (a feasible entry's ``workload``: its trace and output mean); None for a synthetic or session workload, whose
    lengths the user set, and where no candidate was simulated to a capacity."""
    if spec.synthetic is not None:
        return None
    wl = next((e["workload"] for e in entries if e.get("status") == "feasible" and e.get("workload")), None)
    return None if wl is None else reasoning_note(spec.model, wl["trace"], wl["output_tokens_mean"])


def trace_notes(trace: str, model: Any, output_tokens_mean: float) -> list[str]:
    """The notes a simulation on ``trace`` gets: the trace's own (rows its reader left out) and a reasoning model's."""
    from kvledger.dynamics.workload.traces import trace_note

    return [n for n in (trace_note(trace), reasoning_note(model.name, trace, output_tokens_mean)) if n is not None]
