"""The launch commands of a candidate that ``search --engine sglang`` planned and simulated as SGLang: SGLang's
``python -m sglang.launch_server`` line carrying every setting its memory plan resolved, and the ``kvledger plan
--engine sglang`` line that re-derives its KV pool.

SGLang 0.5.23's flags (``sglang.launch_server --help``, ``srt/server_args.py``): ``--tp-size``, ``--context-length``,
``--mem-fraction-static`` (the plan's, computed as SGLang computes its default when not given, so the line sizes the
pool that was simulated), ``--kv-cache-dtype`` (``auto``, ``fp8_e4m3``, ``fp8_e5m2``), ``--max-running-requests`` and
``--chunked-prefill-size`` (server-wide: under DP attention SGLang divides both by the DP size), ``--page-size`` (the
plan's tokens per page), ``--attn-dp-size N --ep-size N`` under DP attention (``--enable-dp-attention --dp-size N``
before 0.5.22) and
``--disable-radix-cache`` where the search turned prefix caching off. There is no vLLM line: vLLM's pool and scheduler
were not simulated.
"""

from __future__ import annotations

import shlex
from typing import Any

from kvledger.accounting.attn_dp import dp_attention_argv
from kvledger.analyses.search.launch_len import launch_len_note

__all__ = ["SGLANG_KV_DTYPES", "server_limits", "sglang_launch_commands"]

SGLANG_KV_DTYPES = {"auto": "auto", "bf16": "auto", "fp16": "auto", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
                    "fp8_e5m2": "fp8_e5m2", "fp8_inc": "fp8_e4m3"}
"""vLLM ``--kv-cache-dtype`` → SGLang ``--kv-cache-dtype`` (SGLang's ``auto`` is the model dtype; its FP8 is e4m3 or
e5m2: vLLM's fp8_inc, in no SGLang release's choices (``accounting.kv_dtype_choices``), becomes e4m3, 1 B as well)."""


def _join(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def server_limits(p: dict[str, Any]) -> tuple[int, int]:
    """(``--max-running-requests``, ``--chunked-prefill-size``) as the server takes them, for plan figures ``p`` that
    hold one DP rank's: under DP attention the rank's figures × dp, which SGLang 0.5.23 divides back to the rank's
    (``mem_cache/kv_cache_configurator.py::resolve_max_num_reqs``: max(1, max_running_requests // attn_dp_size), then
    at most the rank's pool tokens // 2, which the rank's figure already is; ``arg_groups/parallel_hook.py::
    handle_data_parallelism``: chunked_prefill_size // attn_dp_size); the figures themselves without it."""
    dp = p["dp_size"] if p.get("enable_dp_attention") else 1
    return p["max_num_seqs"] * dp, p["max_num_batched_tokens"] * dp


def _settings(p: dict[str, Any], tp: int, length: int, pc: bool | None, version: str | None) -> list[str]:
    """The flags SGLang's server and ``kvledger plan --engine sglang`` both take (SGLang's spellings, DP attention as
    the ``version`` spells it: ``accounting/attn_dp.py``; the server-wide limits, ``server_limits``, which the plan
    divides per DP rank as SGLang does)."""
    running, chunk = server_limits(p)
    words = ["--tp-size", str(tp), "--context-length", str(length),
             "--mem-fraction-static", f"{p['mem_fraction_static']:g}", "--kv-cache-dtype",
             SGLANG_KV_DTYPES.get(p["kv_cache_dtype"], p["kv_cache_dtype"]),
             "--max-running-requests", str(running), "--chunked-prefill-size", str(chunk),
             "--page-size", str(p["block_size"])]
    if p.get("enable_dp_attention"):  # SGLang's DP attention: --dp-size = --ep-size = --tp-size (sim_sglang_dp.py)
        words += [*dp_attention_argv(p["dp_size"], version), "--ep-size", str(p["ep_size"])]
    return words + (["--disable-radix-cache"] if pc is False else [])


def sglang_launch_commands(model_id: str, gpu_id: str, entry: dict[str, Any], engine_version: str | None, *,
                           plan_model: str, model_note: str | None, overrides_arg: str | None) -> dict[str, str]:
    """``{"sglang": …, "check": …, "note": …}`` (and ``max_model_len_note`` where the line's length is lowered:
    ``launch_len``) for one colocated candidate's ledger entry planned with SGLang's rules; ``overrides_arg``: the
    JSON of the config keys the served checkpoint takes at launch (``--json-model-override-args``)."""
    p, tp = entry["plan"], entry["tp"]
    length = p.get("launch_max_model_len", p["max_model_len"])
    flags = _settings(p, tp, length, entry.get("enable_prefix_caching"), engine_version)
    sglang = ["python", "-m", "sglang.launch_server", "--model-path", model_id,
              *(["--json-model-override-args", overrides_arg] if overrides_arg else []), *flags]
    check = ["kvledger", "plan", plan_model, "--gpu", gpu_id, "--engine", "sglang",
             *[w for w in flags if w != "--disable-radix-cache"],
             *(["--engine-version", engine_version] if engine_version else [])]
    version = f"SGLang {p['engine_version']}" + ("" if engine_version else " (the newest rules read; pass "
                                                                            "--engine-version for yours)")
    pool = p["num_gpu_blocks"] * p["block_size"]
    scope = (f"per DP rank ({p['dp_size']} ranks, attention TP 1, experts at EP {p['ep_size']}; each rank's "
             f"max_running_requests {p['max_num_seqs']:,} and prefill chunk {p['max_num_batched_tokens']:,}, the "
             f"line's ÷ {p['dp_size']} as SGLang divides them)"
             if p.get("enable_dp_attention") else f"per TP group ({tp} GPUs)" if tp > 1 else "per GPU")
    note = (f"the plan follows {version}: {pool:,} KV tokens {scope} (mem_fraction_static "
            f"{p['mem_fraction_static']:g}, as SGLang computes it unless given), the pool and scheduler simulated; "
            "no vLLM command: search --engine sglang planned and simulated SGLang's engine only"
            + (f"; {model_note}" if model_note else ""))
    out = {"sglang": _join(sglang), "check": _join(check), "note": note}
    return out | ({"max_model_len_note": n} if (n := launch_len_note(p)) else {})
