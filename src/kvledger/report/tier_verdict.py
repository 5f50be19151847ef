"""The first line of ``kvledger offload`` (and the last of ``simulate`` with tier flags): whether the host KV tier
helps, and why not, in the judgment's figures (``analyses/judgments/offload_verdict.py``)."""

from __future__ import annotations

__all__ = ["tier_verdict_line"]


def tier_verdict_line(j, sessions: bool = True, workload: str = "", report: bool = False) -> str:
    """The answer first: whether the host tier adds prefix hits on this workload, and why not when it does not
    (``sessions``: a session workload, whose flags the hint names; else a trace, whose load flags it names;
    ``workload``: the session preset, so an agent run is not told to try agent sessions; ``report``: ``kvledger
    report``'s tier run, whose load is the capacity rate its --slo and --target size, so the hint names those, not
    simulate's --rate or --concurrency); then what strained the tiers (host tier full, loads unused, the engine
    overloaded) when reusable tokens were recomputed or the run queued."""
    pressure = _pressure(j)
    if j["helps"] and not j.get("adds_hits", True):  # under 1% of prompt tokens, yet TTFT cut beyond the noise
        return _join(f"The host tier helps this workload's TTFT: {_cuts(j)}, each cut over the "
                     f"{j['ttft_noise']:.0%} kvledger takes for the two runs' noise, though it served only "
                     f"{j['host_hit_rate']:.2%} of prompt tokens (simulated below)", pressure)
    if j["helps"] and j["host_hit_rate"] < j["threshold"] and j.get("resume_reloaded_tokens"):  # resumes only
        cut = f"; TTFT {_cuts(j)}" if j.get("ttft_better") else ""
        return _join(f"The host tier helps this workload on resume after preemption: it reloaded "
                     f"{j['resume_reloaded_tokens']:,} of the {j['resume_tokens']:,} tokens the resumed requests "
                     f"needed back ({j['resume_recomputed_tokens']:,} recomputed){cut}, though it served only "
                     f"{j['host_hit_rate']:.2%} of prompt tokens at first arrival (simulated below)", pressure)
    if j["helps"]:
        cut = f"; TTFT {_cuts(j)}" if j.get("ttft_better") else ""
        return _join(f"The host tier helps this workload: it serves {j['host_hit_rate']:.1%} of prompt tokens that "
                     f"HBM had evicted{_resumed(j)}{cut} (simulated below)", pressure)
    if j.get("adds_hits") and j.get("ttft_worse"):
        t = j["ttft_s"]
        worse = ", ".join(f"{q} {t[q]['with_tier']:,.3g} s with it against {t[q]['without_tier']:,.3g} s without"
                          for q in j["ttft_worse"])
        return _join(f"The host tier does not help this workload's TTFT: it serves {j['host_hit_rate']:.1%} of prompt "
                     f"tokens that HBM had evicted, but TTFT {worse}: its loads cost more than the recompute they "
                     "save, or the run queues either way (simulated below)", pressure)
    head = (f"The host tier does not help this workload: it served {j['host_hit_rate']:.2%} of prompt tokens "
            f"(under {j['threshold']:.0%}){_resumed(j)}")
    turn = "turn" if sessions else "request"
    if j["cause"] == "none_admitted":
        return (f"The host tier cannot be judged on this run: no {turn} was admitted (the engine rejected every one; "
                "the warning above says why and what serves them).")
    if j["cause"] == "no_reuse":
        return f"{head}; no {turn} reused an earlier prefix."
    if j["cause"] == "served_below_hbm":  # nothing recomputed, yet under 1% of prompt tokens: little reuse
        return _join(f"{head}; {_split(j, turn)}: the {_owner(sessions)} prompts reuse little", pressure)
    if j["cause"] == "fits_in_hbm":
        fits = f"{head}; {_fits(j, turn, sessions)}"
        if j.get("overload"):  # more in flight would only queue longer
            return _join(fits, pressure, _advice(j, sessions, report))
        return _join(f"{fits}. It would help with {_more_hint(sessions, workload, report)}", pressure)
    return _join(f"{head}; {_split(j, turn)}", pressure, _advice(j, sessions, report))


def _resumed(j) -> str:
    """The reloads of requests resumed after preemption, a clause (empty without any)."""
    if not j.get("resume_reloaded_tokens"):
        return ""
    return (f", and reloaded {j['resume_reloaded_tokens']:,} tokens for requests resumed after preemption (of "
            f"{j['resume_tokens']:,} they needed back; {j['resume_recomputed_tokens']:,} recomputed)")


def _cuts(j) -> str:
    """The TTFT statistics the tier cut, in ms: "mean 389 ms with it against 487 ms without (−20%), p90 …"."""
    t = j["ttft_s"]
    return ", ".join(f"{q} {t[q]['with_tier'] * 1e3:,.0f} ms with it against {t[q]['without_tier'] * 1e3:,.0f} ms "
                     f"without ({t[q]['with_tier'] / t[q]['without_tier'] - 1:+.0%})".replace("-", "−")
                     for q in j["ttft_better"])


def _owner(sessions: bool) -> str:
    return "sessions'" if sessions else "workload's"


def _fits(j, turn: str, sessions: bool) -> str:
    return (f"HBM already held {j['hbm_share_of_reusable']:.0%} of the {_reusable(j)} when the next {turn} came "
            f"({j['hbm_hit_tokens']:,}; {j['recomputed_reusable_tokens']:,} recomputed): the {_owner(sessions)} "
            "working set fits in HBM")


def _reusable(j) -> str:
    """The reusable prefix tokens, with what they are: the reused ones where the workload's reuse is not known."""
    if j.get("reusable_tokens") is None:
        return f"reused prefix tokens ({j['reused_tokens']:,})"
    return (f"{j['reusable_tokens']:,} reusable prefix tokens (those an earlier request had computed: what a cache "
            "that never evicts would serve)")


def _split(j, turn: str) -> str:
    """Where the reusable tokens came from: HBM, the tiers below it, recomputed."""
    return (f"of the {_reusable(j)}, HBM held {j['hbm_hit_tokens']:,} ({j['hbm_share_of_reusable']:.0%}) when the "
            f"next {turn} came, the tiers below it served {j['served_below_hbm_tokens']:,}, and "
            f"{j['recomputed_reusable_tokens']:,} ({j['recomputed_share_of_reusable']:.0%}) missed every tier and "
            "were recomputed")


def _pressure(j) -> list[str]:
    """What strained the tiers, in figures: the host tier full (when reusable tokens were recomputed), tiers that read
    more than they served, the engine overloaded."""
    out = []
    full = j.get("host_full")
    if full and j.get("cause") == "misses":
        unit = f"{full['unit']}s" + (f" of {full['unit_tokens']:,} tokens" if full.get("unit_tokens") else "")
        wanted = full.get("evicted_wanted_units")
        cost = "" if wanted is None else (
            ", none of which a later lookup wanted: the evictions cost nothing (a larger tier would serve no more)"
            if wanted == 0 else f", {wanted:,} of which a later lookup wanted and missed")
        out.append(f"the host tier was full ({full['peak_units']:,} / {full['capacity_units']:,} {unit} held at "
                   f"its peak) and evicted {full['evicted_units']:,} {full['unit']}s{cost}")
    wasted = [f"the {t['tier']} tier read {t['loaded_tokens']:,} tokens ({t['loaded_bytes'] / 2**30:,.2f} GiB) into "
              f"HBM and served {t['served_tokens']:,} of them" for t in j.get("wasted_loads", ())]
    if wasted:
        out.append(", ".join(wasted) + ": the rest were evicted from HBM before their request was admitted, and "
                   "recomputed")
    o = j.get("overload")
    if o:
        out.append(_overloaded(o))
    return out


def _overloaded(o) -> str:
    if o["kind"] == "session_queue":
        return (f"the engine was overloaded: the turns spent {o['ttft_share']:.0%} of their time waiting for their "
                f"first token (TTFT mean {o['ttft_mean_s']:,.3g} s)")
    if o["kind"] == "queue_growth":
        return (f"the engine was overloaded: requests arrived at {o['arrived_per_s']:,.3g}/s and finished at "
                f"{o['finished_per_s']:,.3g}/s, the backlog growing {o['backlog_mid']:,} → {o['backlog_last']:,}")
    return (f"the clients fell behind their rate ({o['sent_per_s']:,.3g} of {o['offered_per_s']:,.3g} requests/s "
            "sent): the engine was overloaded")


#: report's load words: its tier run is at the capacity rate, which --slo and --target size (a stricter SLO or a
#: higher target share: a lower rate per replica, and more replicas for the same volume)
_REPORT_LOAD = "requests in flight per replica (a stricter --slo or a higher --target sizes a lower rate per replica)"


def _advice(j, sessions: bool, report: bool = False) -> str:
    """What to change, by the strongest strain: overload first (a queueing engine churns HBM and no tier keeps
    up), then a full host tier, then loads evicted before use (``sessions``: a session run, whose flags it names;
    ``report``: report's tier run, whose rate --slo and --target size)."""
    load = "sessions per replica (lower --sessions or --session-rate)" if sessions else _REPORT_LOAD if report else \
        "requests in flight per replica (lower --rate, --rate-scale or --concurrency)"
    if j.get("overload") and report:
        return (f"Serve fewer {load}: the report then counts more replicas for the volume. Do that before sizing the "
                "tier: while the engine queues, HBM churns and the tier's loads wait behind the queue")
    if j.get("overload"):
        more = "simulate --replicas N --router session_affinity; offload --compare-replicas N" if sessions else \
            "simulate --replicas N"
        return (f"Serve fewer {load} or add replicas ({more}) before sizing the tier: while the engine queues, HBM "
                "churns and the tier's loads wait behind the queue")
    if j.get("host_full") and j.get("cause") == "misses" and j["host_full"].get("evicted_wanted_units") != 0:
        return (f"The host tier is too small for the working set: a larger one (--kv-offloading-size; SGLang "
                f"--hicache-size or --hicache-ratio), or fewer {load}")
    if j.get("wasted_loads"):
        return (f"HBM evicted the loaded blocks before their request was admitted: fewer {load}, or more KV "
                "memory per replica (--gpu-memory-utilization, --tp)")
    return ""


def _more_hint(sessions: bool, workload: str, report: bool = False) -> str:
    longer = "" if workload == "agent" else " or longer sessions (--workload agent)"
    if report:
        return ("more requests in flight per replica (a looser --slo or a lower --target sizes a higher rate), whose "
                "prefixes HBM cannot keep, or a workload (--trace, --document-pool) whose shared prefixes come back "
                "after HBM has evicted them.")
    if sessions:
        return f"more sessions in flight (--sessions, --session-rate){longer}, whose prefixes HBM cannot keep."
    return ("more requests in flight (--rate, --rate-scale or --concurrency), whose prefixes HBM cannot keep, or a "
            "trace whose shared prefixes come back after HBM has evicted them.")


def _join(head: str, pressure: list[str], advice: str = "") -> str:
    """``head``, then the strains (one sentence, ``; ``-joined), then the advice; each ends in a full stop."""
    out = head.rstrip(".") + "."
    if pressure:
        text = "; ".join(pressure)
        out += f" {text[0].upper()}{text[1:]}."
    if advice:
        out += f" {advice.rstrip('.')}."
    return out
