"""``kvledger search``'s list flags read into its axes (GPUs, TPs, KV dtypes, engine settings, disaggregated splits)
and its session workload (``--workload chat|agent --sessions N``)."""

from __future__ import annotations

from typing import Any

__all__ = ["axes_of", "refuse_empty", "splits_of", "workload_of"]


def _split(text: str | None) -> list[str]:
    return [w.strip() for w in (text or "").split(",") if w.strip()]


def _ints(text: str | None, flag: str, *, tokens: bool = False, engine_version: str | None = None,
          engine: str = "vllm") -> tuple[int, ...]:
    """Whole numbers ≥ 1, comma-separated; ``tokens``: vLLM token counts as release ``engine_version`` reads the flag
    (``vllm_auto_len.read_engine_tokens``, the reader of ``plan`` and ``simulate``: t and T from 0.13.0)."""
    from kvledger.accounting.vllm_auto_len import read_engine_tokens
    from kvledger.errors import InputError
    from kvledger.ranges import check_options

    out = []
    name = flag.removeprefix("--").replace("-", "_")
    for w in _split(text):
        if tokens:
            out.append(read_engine_tokens(w, flag, engine, engine_version))
        elif w.isdigit():
            out.append(int(w))
        else:
            raise InputError(f"{flag} takes whole numbers ≥ 1 separated by commas, got {w!r}")
        check_options("search", {name: out[-1]}, {name: flag})  # each value in its range: kvledger.ranges
    return tuple(out)


def _onoff(text: str | None) -> tuple[bool | None, ...]:
    from kvledger.errors import InputError

    vals = {"on": True, "off": False, "true": True, "false": False}
    words = _split(text)
    bad = [w for w in words if w.lower() not in vals]
    if bad:
        raise InputError(f"--prefix-caching takes on, off or on,off; got {bad[0]!r}")
    return tuple(vals[w.lower()] for w in words) or (None,)


def splits_of(text: str) -> tuple[tuple[int, int], ...]:
    from kvledger.errors import InputError

    out = []
    for w in _split(text):
        p, _, d = w.partition(":")
        if not (p.isdigit() and d.isdigit() and int(p) >= 1 and int(d) >= 1):
            raise InputError(f"--disagg-splits takes P:D pairs of whole numbers ≥ 1 (prefill:decode replicas), got "
                             f"{w!r}")
        out.append((int(p), int(d)))
    return tuple(out)


def refuse_empty(given: dict[str, str | None]) -> None:
    """Refuse a list flag given with no value in it (``--gpus ""``, ``--tp ,``): left out, it means its default (every
    priced GPU), which an empty list must not select silently (a fresh-user trial searched every GPU); and one with an
    empty entry (``--tp 1,,2``), whose missing value was dropped without a word (another trial)."""
    from kvledger.errors import InputError

    for flag, text in given.items():
        if text is not None and not _split(text):
            raise InputError(f"{flag} {text!r} names no value; give at least one, comma-separated (e.g. {flag} "
                             f"{_EXAMPLE[flag]}), or leave {flag} out for its default")
        if text is not None and any(not w.strip() for w in text.split(",")):  # 1,,2 or 1,2,: never dropped silently
            raise InputError(f"{flag} {text!r} has an empty entry (two commas in a row, or one at an end); give the "
                             f"values separated by single commas (e.g. {flag} {_EXAMPLE[flag]})")


_EXAMPLE = {"--gpus": "H100,L40S", "--gpu": "H100", "--tp": "1,2", "--kv-cache-dtype": "auto,fp8",
            "--max-num-seqs": "128,256", "--max-num-batched-tokens": "2048,8192", "--prefix-caching": "on,off",
            "--disagg-splits": "1:1,1:2", "--data-parallel-size": "1,8"}


def axes_of(gpus: str | None, tp: str | None, kv: str | None, seqs: str | None, mnbt: str | None, pc: str | None,
            splits: tuple[tuple[int, int], ...], expert_parallel: bool | None = None, dp: str | None = None,
            engine_version: str | None = None, engine: str = "vllm") -> Any:
    """The ``Axes`` of the list flags; ``expert_parallel`` (--[no-]enable-expert-parallel) fixes that axis, None: both
    off and on for a MoE model at TP > 1; ``dp``: --data-parallel-size's sizes (None: none); ``engine_version``: the
    vLLM release that reads --max-num-batched-tokens."""
    from kvledger.analyses.search import Axes

    return Axes(disagg_splits=splits, gpus=tuple(_split(gpus)), tps=_ints(tp, "--tp"),
                data_parallel_sizes=_ints(dp, "--data-parallel-size"),
                kv_cache_dtypes=tuple(_split(kv)) or ("auto",),
                max_num_seqs=_ints(seqs, "--max-num-seqs") or (None,),
                max_num_batched_tokens=_ints(mnbt, "--max-num-batched-tokens", tokens=True,
                                             engine_version=engine_version, engine=engine) or (None,),
                prefix_caching=_onoff(pc), expert_parallel=() if expert_parallel is None else (expert_parallel,))


def _model_context(model: str) -> int:
    """The model's context by the default vLLM version's rule, tokens (search_flags.session_cap passes the cap of the
    version given; this is only its fallback)."""
    from kvledger.accounting.max_model_len import default_max_model_len
    from kvledger.catalog.models import load_model

    return default_max_model_len(load_model(model), "vllm", None)


def _synthetic_read(flags: Any, disagg: bool) -> Any:
    """The trace or synthetic flags' workload (``sim_opts.synthetic_spec``; None: a trace), its lengths and document
    pool read before any candidate (each one's simulation failed on them: exit 1, not 2).

    Raises:
        InputError: unreadable lengths or pool (the flag named); a shared prefix or pool with ``--disagg``.
    """
    from kvledger.cli.sim_opts import synthetic_spec
    from kvledger.dynamics.workload.synthetic import parse_lengths
    from kvledger.errors import InputError

    for name in ("shared_prefix_tokens", "document_pool"):
        if disagg and getattr(flags, name, None) is not None:
            flag = "--" + name.replace("_", "-")
            raise InputError(f"{flag} is not simulated for --disagg candidates (their probes draw the requests "
                             f"without it): drop {flag}, or drop --disagg")
    wl = synthetic_spec(flags)
    if wl is not None:
        for flag, text in (("--prompt-lengths", wl.prompt), ("--output-lengths", wl.output)):
            try:
                parse_lengths(text)
            except InputError as err:  # say which of the two flags (the parser knows only the text)
                raise InputError(f"{flag}: {err}") from None
        if getattr(flags, "document_pool", None) is not None:
            from kvledger.dynamics.workload.document_pool import parse_document_pool

            parse_document_pool(flags.document_pool)
    return wl


def workload_of(flags: Any, session_workload: str | None, sessions: int | None, session_rate: float | None,
                rate: float | None, monthly_tokens: float | None, model: str, max_model_len: int | None,
                seed: int, disagg: bool, cap_source: str = "") -> tuple[Any, float | None, list[str]]:
    """(the workload spec of every probe, the load in req/s, notes): the trace or synthetic flags
    (``sim_opts.synthetic_spec``), or with ``--workload chat|agent`` a session workload
    (``analyses/serving/session_spec.SessionSpec``) whose ``--session-rate`` (session starts per second, the load to
    size for) becomes turns per second: × the drawn sessions' turns per session. ``max_model_len`` and
    ``cap_source``: the sessions' context cap and where it came from (``search_flags.session_cap``).

    Raises:
        InputError: a session flag without ``--workload``, ``--workload`` with a trace, a synthetic workload or
            ``--disagg``, two loads at once, or lengths the synthetic workload cannot read (the flag named).
    """
    from kvledger.analyses.serving.session_spec import SessionSpec
    from kvledger.cli.sim_opts import synthetic_spec
    from kvledger.errors import InputError

    if session_workload is None:
        if sessions is not None or session_rate is not None:
            raise InputError("--sessions and --session-rate describe a session workload: give --workload chat|agent")
        return _synthetic_read(flags, disagg), rate, []
    if getattr(flags, "shared_prefix_tokens", None) is not None:
        from kvledger.dynamics.workload.shared_prefix import shared_prefix_refusal

        raise InputError(shared_prefix_refusal(f"--workload {session_workload} (each session's system prompt and "
                                               "earlier turns)"))
    if flags.trace is not None or synthetic_spec(flags) is not None:
        raise InputError("--workload chat|agent is a session workload: give it without --trace or "
                         "--prompt-lengths/--output-lengths")
    if disagg:
        raise InputError("--disagg is not simulated on a session workload (its units replay open-loop requests)")
    spec = SessionSpec(session_workload.strip().lower(), 200 if sessions is None else sessions, max_model_len,
                       cap_source)
    mml = max_model_len or _model_context(model)
    reach = [f"sessions per probe: {spec.reach_words(seed, mml)}"]
    if session_rate is None:
        return spec, rate, reach
    if rate is not None or monthly_tokens is not None:
        raise InputError("give the load as --session-rate, --rate or a monthly volume (--monthly-tokens, or "
                         "--monthly-input-tokens with --monthly-output-tokens), only one")
    if not (session_rate > 0 and session_rate < 1e6):
        raise InputError(f"--session-rate must be in (0, 1,000,000) sessions/s, got {session_rate!r}")
    turns = spec.turns_per_session(seed, mml)
    return spec, session_rate * turns, [
        f"load: --session-rate {session_rate:g} sessions/s × {turns:.4g} turns per session (the {spec.num_sessions:,} "
        f"sessions drawn with seed {seed}, context ≤ {mml:,} tokens) = {session_rate * turns:.4g} req/s"] + reach
