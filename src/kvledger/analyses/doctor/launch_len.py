"""``doctor --max-model-len``, for a log that does not print it, read as the server's vLLM release reads the flag
(``accounting/vllm_auto_len.read_max_model_len``, the reader of ``plan``, ``simulate`` and ``search``): the suffixes
that release takes (t and T from 0.13.0) and, from 0.14.0, ``-1``/``auto``, which the plan then fits to the KV pool as
that release does."""

from __future__ import annotations

from typing import Any

__all__ = ["read_launch_len", "auto_len_notes"]


def read_launch_len(launch: dict[str, Any], version: str | None) -> tuple[dict[str, Any], bool]:
    """(``launch`` with its ``max_model_len`` text read as vLLM ``version`` reads it (None: the newest read), None
    where it is auto; whether it is ``-1``/``auto``).

    Raises:
        InputError: a count that release refuses (its words), or auto before 0.14.0.
    """
    from kvledger.accounting.vllm_auto_len import read_max_model_len

    text = launch.get("max_model_len")
    if text is None or isinstance(text, int):
        return launch, False
    n, auto = read_max_model_len(str(text), "vllm", version)
    return {**launch, "max_model_len": n}, auto


def auto_len_notes(kw: dict[str, Any], src: dict[str, str], auto: bool) -> list[str]:
    """With ``--max-model-len auto``: where the log prints no max_model_len, the plan's settings ``kw`` fit it as vLLM
    does (``auto_max_model_len``, its source in ``src``); where it prints one, the note that the flag was not used."""
    if not auto:
        return []
    if kw.get("max_model_len") is None:
        kw["auto_max_model_len"] = True
        src["max_model_len"] = ("--max-model-len auto (the log does not print it): vLLM's fit of the model's length "
                                "to the KV pool")
        return []
    return [f"--max-model-len auto not used: the log prints max_model_len {kw['max_model_len']:,} "
            f"({src['max_model_len']}), the length the server ran with"]
