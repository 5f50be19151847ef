"""The note of a reasoning model simulated on a trace: the trace's output lengths are those its service saw, and a
reasoning model's outputs, its thinking included, are likely far longer in use (``catalog.reasoning``). No reasoning
length is assumed: the note names the trace's mean and the flags that set the lengths."""

from __future__ import annotations

__all__ = ["reasoning_note"]


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
