"""``kvledger search --engine sglang``: the engine every candidate is planned, simulated and launched as, and the
refusal of the flags only vLLM has (each names what SGLang's search does instead), before any candidate is planned."""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["ENGINES", "check_search_engine", "search_engine", "with_dp_attention", "search_attn_dp", "checked_engine"]

ENGINES = ("vllm", "sglang")


def search_engine(text: str | None) -> str | None:
    """The spec's engine of ``--engine``: None for vLLM (the default; its ledgers unchanged), "sglang".

    Raises:
        InputError: another engine.
    """
    name = (text or "vllm").strip().lower()
    if name not in ENGINES:
        raise InputError(f"--engine {text!r}: search plans and simulates vllm (default) or sglang")
    return None if name == "vllm" else name


def _vllm_only(e: Any, ax: Any, run: Any, dp: Any) -> list[tuple[bool, str, str]]:
    """(given, the flag, what SGLang's search does instead) for each vLLM-only flag search takes."""
    return [
        (e.gpu_memory_utilization is not None, "--gpu-memory-utilization",
         "SGLang's pool is sized by --mem-fraction-static: give that, or leave both out for SGLang's default"),
        (e.quantization is not None, "--quantization", "SGLang's online quantization is not modelled"),
        (e.enable_expert_parallel is not None, "--enable-expert-parallel/--no-enable-expert-parallel",
         "SGLang's expert parallelism is --ep-size, not a search axis (`kvledger cost --simulate --engine sglang "
         "--ep-size N` runs it)"),
        (e.mamba_ssm_cache_dtype is not None, "--mamba-ssm-cache-dtype", "SGLang's SSM state dtype is its own"),
        (e.prefix_cache_retention_interval is not None, "--prefix-cache-retention-interval",
         "SGLang's radix cache keeps every prefix"),
        (dp.data_parallel_size is not None, "--data-parallel-size", "vLLM's DP ranks are not SGLang's layout"),
        (dp.all2all_backend is not None, "--all2all-backend", "SGLang's MoE all-to-all is --moe-a2a-backend"),
        (bool(ax.disagg), "--disagg", "the disaggregated units are simulated with vLLM's NIXL connector"),
        (run.offload not in (None, "none"), "--offload", "the KV tiers are vLLM's --kv-offloading-size"),
    ]


def check_search_engine(text: str | None, e: Any, ax: Any, run: Any, dp: Any) -> str | None:
    """The engine of ``--engine`` (``search_engine``); with sglang, every vLLM-only flag given refused (all of them
    named together); --mem-fraction-static and --enable-dp-attention, SGLang's, refused with vLLM.

    Raises:
        InputError: an unknown engine; the flags and, for each, why SGLang's search does not take it.
    """
    engine = search_engine(text)
    if engine != "sglang":
        if e.mem_fraction_static is not None:
            raise InputError(f"--mem-fraction-static {e.mem_fraction_static:g} is SGLang's fraction, and this search "
                             "plans and simulates vLLM: give --gpu-memory-utilization for vLLM's, or add --engine "
                             "sglang")
        if dp.enable_dp_attention:
            from kvledger.cli.dp_flags import DP_REFUSAL

            raise InputError(DP_REFUSAL.format(flags="--enable-dp-attention"))
        return engine
    bad = [f"{flag} is vLLM's ({why})" for given, flag, why in _vllm_only(e, ax, run, dp) if given]
    if bad:
        raise InputError("search --engine sglang plans and simulates SGLang, so it refuses vLLM's flags: "
                         + "; ".join(bad) + "; drop them, or search vLLM (--engine vllm, the default)")
    return engine


def with_dp_attention(spec: Any, model: str, axes: Any) -> Any:
    """``spec`` with SGLang's DP attention on every candidate at TP ≥ 2 (``screen.sim_args``), refused up front where
    it applies to none: a dense model (SGLang's lock-step DP attention is a MoE model's, ``sim_sglang_dp``), or a
    --tp axis of TP 1 only.

    Raises:
        InputError: either, with what SGLang runs instead.
    """
    import dataclasses

    from kvledger.catalog.models import load_model

    m = load_model(model)
    if not m.is_moe:
        raise InputError(f"--enable-dp-attention: {m.name} is dense (no MoE layers); SGLang's DP attention is "
                         "simulated for a MoE model (each rank's attention whole, the experts at EP = TP): drop it, "
                         "and the search sizes whole replicas")
    if axes.tps and max(axes.tps) < 2:
        raise InputError("--enable-dp-attention needs a candidate at TP ≥ 2 (it runs --attn-dp-size N --ep-size N at "
                         "--tp-size N): add one to --tp, or drop it")
    return dataclasses.replace(spec, enable_dp_attention=True)


def checked_engine(text: str | None, e: Any, axes: Any, run: Any, dp: Any) -> tuple[str | None, Any, Any]:
    """(the engine, axes, dp): ``check_search_engine``, then --attn-dp-size read (``search_attn_dp``)."""
    name = check_search_engine(text, e, axes, run, dp)
    return (name, *search_attn_dp(name, e.engine_version, axes, dp))


def search_attn_dp(engine: str | None, engine_version: str | None, axes: Any, dp: Any) -> tuple[Any, Any]:
    """(axes, dp) with --attn-dp-size N read as SGLang reads it (``accounting/attn_dp.py``): DP attention at TP N, the
    layout the search simulates (attention DP = TP, ``sim_sglang_dp.py``), the --tp axis N (N alone if given); 1,
    SGLang's default, no DP attention; both unchanged without it.

    Raises:
        InputError: --attn-dp-size with vLLM or a release before 0.5.22, or a --tp axis other than N.
    """
    import dataclasses

    from kvledger.accounting.attn_dp import resolve_attn_dp_size
    from kvledger.cli.dp_flags import DP_REFUSAL

    n = dp.attn_dp_size
    if n is None:
        return axes, dp
    if engine != "sglang":
        raise InputError(DP_REFUSAL.format(flags=f"--attn-dp-size {n}"))
    on, _ = resolve_attn_dp_size(n, dp.enable_dp_attention, None, engine="sglang", engine_version=engine_version)
    dp = dataclasses.replace(dp, enable_dp_attention=on, attn_dp_size=None)
    if n == 1:
        return axes, dp
    if axes.tp is not None and [t.strip() for t in axes.tp.split(",")] != [str(n)]:
        raise InputError(f"--attn-dp-size {n} with --tp {axes.tp}: the search simulates SGLang's DP attention at "
                         f"attention DP = TP (attention TP 1), so --attn-dp-size {n} runs at --tp {n}: give --tp {n} "
                         "(or leave --tp out), or --enable-dp-attention for DP attention at every candidate's TP")
    return dataclasses.replace(axes, tp=str(n)), dp
