"""``--kv-cache-dtype`` checked against the engine the user names, where the typed value and the engine are both known:
the engines' choices release by release and the check itself are ``accounting.kv_dtype_choices`` (the web app reads
them too); a simulation's engine follows its policy."""

from __future__ import annotations

from kvledger.accounting.kv_dtype_choices import check_kv_dtype_for_engine, vllm_cache_dtypes

__all__ = ["check_kv_dtype_for_engine", "sim_kv_dtype_check", "vllm_cache_dtypes"]


def sim_kv_dtype_check(values: str | list[str] | tuple[str, ...] | None, policy: str | None,
                       engine_version: str | None) -> None:
    """``check_kv_dtype_for_engine`` for a simulation: SGLang's names under ``--policy sglang`` (its plan is
    SGLang's), vLLM's under every other policy (``sim_setup.plan_engine``)."""
    engine = "sglang" if (policy or "").strip().lower() == "sglang" else "vllm"
    check_kv_dtype_for_engine(values, engine, engine_version)
