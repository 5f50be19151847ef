"""Whether an AIPerf aggregate export (``profile_export_aiperf.json``) is of a multi-turn or agentic run, and the
note that says what its replay leaves out.

AIPerf sends a multi-turn dataset (``--conversation-turn-mean`` > 1, ``--custom-dataset-type multi_turn``) or an
agentic trace (a ``--public-dataset`` of coding-agent traces replayed with the delays between a turn's end and the
next turn's start, ``input.use_end_to_start_delays``; subagent branches counted in ``branch_stats``) as sessions: each
turn re-sends the conversation so far and waits for the previous turn. Its per-request export (``profile_export.jsonl``)
records each request's session and place in it — ``metadata.conversation_id``, ``x_correlation_id``, ``turn_index``,
``session_num``, with ``request_start_ns``/``request_end_ns`` (aiperf ``common/models/record_models.py``:
``MetricRecordMetadata``, in 0.8.0 and 0.13.0 alike) — but the aggregate export keeps none of them: only
distributions. So a replay of the aggregate can only be a closed loop of single-turn synthetic requests, and the note
says so with the figures the file gives for what that loses (its prefix reuse, its in-flight count above the cap).
"""

from __future__ import annotations

from typing import Any

__all__ = ["multi_turn_extra", "session_extra"]


def _avg(obj: dict[str, Any], tag: str, stat: str = "avg") -> float | None:
    v = obj.get(tag)
    x = v.get(stat) if isinstance(v, dict) else None
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _signs(obj: dict[str, Any]) -> list[str]:
    """The input_config fields and run tables that make the run multi-turn, as the file names them."""
    cfg = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    inp = cfg.get("input") if isinstance(cfg.get("input"), dict) else {}
    conv = inp.get("conversation") if isinstance(inp.get("conversation"), dict) else {}
    turn = conv.get("turn") if isinstance(conv.get("turn"), dict) else {}
    signs = []
    mean = turn.get("mean")
    if isinstance(mean, (int, float)) and not isinstance(mean, bool) and mean > 1:
        signs.append(f"input.conversation.turn.mean {mean:g}")
    if inp.get("custom_dataset_type") == "multi_turn":
        signs.append("input.custom_dataset_type multi_turn")
    if inp.get("use_end_to_start_delays") is True:
        data = inp.get("public_dataset")
        signs.append("input.use_end_to_start_delays" + (f" over the trace dataset {data}" if data else ""))
    if isinstance(obj.get("branch_stats"), dict):
        spawned = obj["branch_stats"].get("children_spawned")
        signs.append("branch_stats" + (f" ({spawned:,} subagent branches spawned)" if isinstance(spawned, int) else ""))
    return signs


def multi_turn_extra(obj: Any) -> dict[str, str]:
    """``{"multi_turn": note}`` for a multi-turn or agentic AIPerf run (module docstring), else {}."""
    if not isinstance(obj, dict) or not (signs := _signs(obj)):
        return {}
    lost = []
    hit = _avg(obj, "theoretical_prefix_cache_hit")
    if hit is not None:
        lost.append(f"its turns re-sent earlier turns' tokens (theoretical_prefix_cache_hit {hit:.1f}% of input "
                    "tokens), which the synthetic prompts do not")
    peak, cfg = _avg(obj, "effective_concurrency", "max"), obj.get("input_config")
    cap = (cfg.get("loadgen") or {}).get("concurrency") if isinstance(cfg, dict) else None
    if peak is not None and isinstance(cap, int) and peak > cap:
        lost.append(f"its sessions put up to {peak:,.0f} requests in flight (effective_concurrency max) against a "
                    f"concurrency of {cap:,}, the replay at most {cap:,}")
    return {"multi_turn": (
        f"AIPerf multi-turn run ({'; '.join(signs)}): replayed as a closed loop of single-turn synthetic requests, not "
        "as its sessions: the aggregate export keeps no session ids, turn order or delays between turns (AIPerf's "
        "per-request profile_export.jsonl records them: metadata.conversation_id, x_correlation_id, turn_index, "
        "request_start_ns, request_end_ns: give it, and its sessions are replayed)" + (f"; {'; '.join(lost)}" if lost
                                                                                  else ""))}


def session_extra(metadata: list[Any]) -> dict[str, list[tuple[str, int]]]:
    """``{"sessions": [(session, turn), ...]}``, one pair per record in ``metadata``'s order (AIPerf per-request
    ``metadata``: the session instance ``x_correlation_id``, else ``conversation_id``, and ``turn_index``), when some
    record is a later turn (``turn_index`` ≥ 1) and every record names its session and turn; else {} (single-turn)."""
    pairs = []
    for md in metadata:
        key = md.get("x_correlation_id") or md.get("conversation_id") if isinstance(md, dict) else None
        turn = md.get("turn_index") if isinstance(md, dict) else None
        if not isinstance(key, str) or not isinstance(turn, int) or isinstance(turn, bool) or turn < 0:
            return {}
        pairs.append((key, turn))
    return {"sessions": pairs} if any(t >= 1 for _, t in pairs) else {}
