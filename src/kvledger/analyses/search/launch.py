"""The launch commands a candidate's plan assumed: ``vllm serve …``, SGLang's equivalent, and the ``kvledger plan``
line that re-derives its KV pool.

Every engine flag is written out with the value the memory plan resolved (defaults included), so the command starts
the engine the search simulated (but for a --max-model-len lowered where the model's default may not start, which
serves the same run: ``launch_len``): vLLM's flags are the plan's own inputs (``--tensor-parallel-size``,
``--max-model-len``, ``--gpu-memory-utilization``, ``--kv-cache-dtype``, ``--max-num-seqs``,
``--max-num-batched-tokens``; prefix caching only when the search set it, on the check line too; ``--quantization fp8``
when the search was given it, on SGLang's line too; an all-to-all backend as ``VLLM_ALL2ALL_BACKEND`` before 0.11.1).
``kvledger plan`` takes the same flags, so the check line gives the same blocks. SGLang's flags carry the same TP,
context, running-request cap and chunk budget; its KV pool follows ``mem_fraction_static`` rules, not vLLM's, so the
command leaves that at SGLang's default and says the simulated pool is vLLM's (``plan --engine sglang``: SGLang's).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from kvledger.accounting.attn_dp import dp_attention_argv
from kvledger.accounting.max_model_len import ALLOW_LONG_ENV, engine_config_len
from kvledger.accounting.sglang_rules import SGLANG_LATEST, sglang_version_text
from kvledger.accounting.vllm_all2all import all2all_launch
from kvledger.analyses.search.launch_len import launch_len_note
from kvledger.analyses.search.launch_nodes import on_nodes
from kvledger.analyses.search.reasons import PRICE_REASONS
from kvledger.analyses.search.serve_model import serve_model, serve_model_id, serve_target
from kvledger.analyses.search.sglang_launch import SGLANG_KV_DTYPES, sglang_launch_commands
from kvledger.analyses.serving.retention_flag import launch_words
from kvledger.catalog.config_overrides import overrides_json

__all__ = ["launch_commands", "CandidateCommands", "candidate_commands", "serve_model_id", "serve_model", "launch_for",
           "SGLANG_KV_DTYPES"]

def _join(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


NIXL_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""vLLM's ``--kv-transfer-config`` for a disaggregated pair (its NixlConnector usage guide: both sides ``kv_both``)."""


def _engine(model_id: str, gpu_id: str, tp: int, p: dict[str, Any], pc: bool | None,
            engine_version: str | None, plan_model: str,
            overrides: dict[str, Any] | None) -> tuple[list[str], list[str], list[str]]:
    """(vllm serve words, SGLang words, kvledger plan words) for one engine with plan figures ``p``; ``overrides``:
    the config keys the served checkpoint takes at launch (``catalog.config_overrides``)."""
    length = p.get("launch_max_model_len", p["max_model_len"])  # lowered where the default may not start (launch_len)
    flags = ["--tensor-parallel-size", str(tp), "--max-model-len", str(length),
             "--gpu-memory-utilization", f"{p['gpu_memory_utilization']:g}", "--kv-cache-dtype", p["kv_cache_dtype"],
             "--max-num-seqs", str(p["max_num_seqs"]), "--max-num-batched-tokens", str(p["max_num_batched_tokens"])]
    quant = ["--quantization", p["quantization"]] if p.get("quantization") else []  # online FP8 weights, planned
    dp = p.get("data_parallel_size", 1)  # vLLM's DP ranks of a MoE model, each TP GPUs (dp_axis.py)
    flags += (["--data-parallel-size", str(dp)] if dp > 1 else []) + quant + (
        ["--enable-expert-parallel"] if p.get("enable_expert_parallel") else [])  # vLLM and the plan
    flags += ["--mamba-ssm-cache-dtype", p["mamba_ssm_cache_dtype"]] if p.get("mamba_ssm_cache_dtype") else []
    flags += ["--all2all-backend", p["all2all_backend"]] if p.get("all2all_backend") else []  # plan's; vLLM ≥0.11.1
    flags += [] if pc is None else ["--enable-prefix-caching" if pc else "--no-enable-prefix-caching"]  # plan too
    env, retention = launch_words(p.get("prefix_cache_retention_interval"), engine_version)  # 0.23–0.28: the env
    deprecated = ["--allow-deprecated-quantization"] if p.get("allow_deprecated_quantization") else []  # vLLM only
    a2a_env, vflags = all2all_launch(engine_version, flags)  # before 0.11.1 the backend is VLLM_ALL2ALL_BACKEND
    over = overrides_json(overrides) if overrides else None  # the same JSON object for both engines
    vllm = [*env, *a2a_env, "vllm", "serve", model_id, *(["--hf-overrides", over] if over else []), *vflags,
            *retention, *deprecated]  # not plan flags: check leaves
    check = ["kvledger", "plan", plan_model, "--gpu", gpu_id, *flags] + (["--engine-version", engine_version]
                                                                       if engine_version else []) + (
        ["--wddm"] if p.get("wddm") else [])
    sglang = ["python", "-m", "sglang.launch_server", "--model-path", model_id,
              *(["--json-model-override-args", over] if over else []), "--tp-size", str(tp * dp),
              *(dp_attention_argv(dp, None) if dp > 1 else []),  # SGLang's newest read (accounting/attn_dp.py)
              "--context-length", str(length), "--kv-cache-dtype", SGLANG_KV_DTYPES.get(p["kv_cache_dtype"], "auto"),
              # server-wide: SGLang 0.5.23 divides both by the DP size under DP attention (kv_cache_configurator.py
              # resolve_max_num_reqs, parallel_hook.py handle_data_parallelism); vLLM's are each DP rank's own
              "--max-running-requests", str(p["max_num_seqs"] * dp), "--chunked-prefill-size",
                  str(p["max_num_batched_tokens"] * dp), *quant,
              *(["--ep-size", str(tp * dp)] if p.get("enable_expert_parallel") else [])]  # whole experts: sglang_ep
    if pc is False:
        sglang.append("--disable-radix-cache")
    if (n := p.get("nnodes", 1)) > 1:
        check += ["--nnodes", str(n)]
    return vllm, sglang, check


def launch_commands(model_id: str, gpu_id: str, entry: dict[str, Any], engine_version: str | None = None, *,
                    plan_model: str | None = None, model_note: str | None = None,
                    overrides: dict[str, Any] | None = None) -> dict[str, str]:
    """``{"vllm": …, "sglang": …, "check": …, "note": …}`` for one planned candidate's ledger entry (a disaggregated
    unit gets one line per pool, prefixed ``prefill ×P:`` / ``decode ×D:``), with ``max_model_len_note`` when the lines
    carry a --max-model-len below the model's default (``launch_len``: the default may not start).

    Args:
        model_id: the Hub id to serve (the catalog's repository id for a bundled model).
        gpu_id: the catalog GPU id (for the ``kvledger plan`` check).
        entry: the ledger entry (``tp``, ``enable_prefix_caching``, the ``plan`` figures; ``decode_tp``,
            ``decode_plan`` and the replica counts for a disaggregated unit).
        engine_version: the vLLM version whose rules the plan used, when the user fixed one.
        plan_model, model_note: the model as given to kvledger (for the check line; default ``model_id``) and why the
            engine commands name another (``serve_model``).
        overrides: config keys the engine commands pass at launch (``--hf-overrides``, SGLang's
            ``--json-model-override-args``): a config file that is a bundled checkpoint but for those keys.
    """
    plan_model = plan_model or model_id
    extra = f"; {model_note}" if model_note else ""
    p = entry["plan"]
    version = f"vLLM {p['engine_version']}" + ("" if engine_version else " (the newest rules read; pass "
                                                                         "--engine-version for yours)")
    sglang_note = ("the SGLang command keeps SGLang's own mem_fraction_static, whose pool differs "
                   "(kvledger plan --engine sglang shows it), and carries the simulated vLLM candidate's batch limits "
                   "(max_num_seqs as --max-running-requests, max_num_batched_tokens as --chunked-prefill-size), not "
                   "SGLang's own defaults: the search simulated vLLM's engine (simulate --policy sglang runs SGLang's)")
    if p.get("enable_expert_parallel"):  # SGLang's nearest: --ep-size = its TP (accounting/sglang_ep.py)
        sglang_note += ("; its --ep-size (= its --tp-size: experts whole on every GPU) is SGLang's nearest to the vLLM "
                        "command's --enable-expert-parallel, which is what was simulated (`kvledger simulate --engine "
                        "sglang --ep-size` runs SGLang's)")
    if (dp := p.get("data_parallel_size", 1)) > 1:  # SGLang's DP attention runs inside one TP group of DP × TP GPUs
        sglang_note += (f"; its --attn-dp-size {dp} is SGLang's nearest layout (DP attention inside "
                        f"one TP group of {dp * entry['tp']} GPUs), its batch limits {dp} × each vLLM rank's (SGLang "
                        f"divides them by its {dp} DP ranks), planned by `kvledger plan --engine sglang` but not "
                        f"simulated: the vLLM command's {dp} DP ranks in lock-step are what was simulated")
    if not entry.get("prefill_replicas"):
        vllm, sglang, check = _engine(model_id, gpu_id, entry["tp"], p, entry.get("enable_prefix_caching"),
                                      engine_version, plan_model, overrides)
        vl, sg, nodes = on_nodes(vllm, sglang, p) if p.get("nnodes", 1) > 1 else (_join(vllm), _join(sglang), "")
        out = {"vllm": vl, "sglang": sg, "check": _join(check),
               "note": f"the plan follows {version}: {p['num_gpu_blocks']:,} KV blocks of {p['block_size']} tokens "
                       f"{_pool_scope(entry['tp'], dp)}; {nodes + '; ' if nodes else ''}{sglang_note}{extra}"
                       + (f"; {p['startup']['message']}" if p.get("startup") else "")}
        return out | ({"max_model_len_note": n} if (n := launch_len_note(p)) else {})
    lines: dict[str, list[str]] = {"vllm": [], "sglang": [], "check": []}
    for role, tp, plan, n in (("prefill", entry["tp"], p, entry["prefill_replicas"]),
                              ("decode", entry["decode_tp"], entry["decode_plan"], entry["decode_replicas"])):
        vllm, sglang, check = _engine(model_id, gpu_id, tp, plan, None, engine_version, plan_model, overrides)
        lines["vllm"].append(f"{role} ×{n}: " + _join(vllm + ["--kv-transfer-config", NIXL_CONFIG]))
        lines["sglang"].append(f"{role} ×{n}: " + _join(sglang + ["--disaggregation-mode", role]))
        lines["check"].append(f"{role}: " + _join(check))
    d = entry["decode_plan"]
    lowered = "; ".join(f"{role}: {n}" for role, n in (("prefill", launch_len_note(p)), ("decode", launch_len_note(d)))
                        if n)
    return {k: "\n".join(v) for k, v in lines.items()} | ({"max_model_len_note": lowered} if lowered else {}) | {
        "note": f"the plans follow {version}: prefill {p['num_gpu_blocks']:,} KV blocks "
                f"{_pool_scope(entry['tp'], 1)} and decode {d['num_gpu_blocks']:,} "
                f"{_pool_scope(entry['decode_tp'], 1)}; a router in front sends each request to a prefill engine, "
                f"then its decode engine (vLLM's disaggregated-serving proxy examples); {sglang_note}{extra}"}


def _pool_scope(tp: int, dp: int) -> str:
    """Whose pool ``num_gpu_blocks`` is: each vLLM engine's (a TP group shares one block table, each GPU its heads'
    slice), so per GPU at TP 1, per TP group above, per DP rank with DP ranks."""
    group = f"a TP group of {tp} GPUs" if tp > 1 else "one GPU"
    return f"per DP rank ({group})" if dp > 1 else f"per TP group ({tp} GPUs)" if tp > 1 else "per GPU"


def launch_for(model: str, gpu_id: str, entry: dict[str, Any], engine_version: str | None = None) -> dict[str, str]:
    """``launch_commands`` for the model as the user gave it (bundled name, Hub id or config path; ``serve_model``)."""
    target = serve_target(model)
    if entry["plan"].get("engine") == "sglang":  # search --engine sglang: SGLang's line only (sglang_launch.py)
        out = sglang_launch_commands(target.model, gpu_id, entry, engine_version, plan_model=model,
                                     model_note=target.note, overrides_arg=overrides_json(target.overrides)
                                     if target.overrides else None)
        if long := _sglang_long_context(model, entry):
            out["sglang"] = out["sglang"].replace("python -m sglang", f"{ALLOW_LONG_ENV['sglang']} python -m sglang")
            out["note"] += f"; {long}"
        return out
    out = launch_commands(target.model, gpu_id, entry, engine_version, plan_model=model if target.note else None,
                          model_note=target.note, overrides=target.overrides)
    wide = entry["tp"] * (entry.get("data_parallel_size") or 1)  # SGLang's line: DP attention in one TP group
    refused = _sglang_refusal(model, (wide, entry.get("decode_tp") or wide), bool(entry["plan"].get(
        "enable_expert_parallel")))
    if refused:  # vLLM starts this candidate (its rules were simulated), SGLang does not: no SGLang line to run
        out["sglang"] = f"# no SGLang line: {refused}"
    elif long := _sglang_long_context(model, entry):
        out["sglang"] = out["sglang"].replace("python -m sglang", f"{ALLOW_LONG_ENV['sglang']} python -m sglang")
        out["note"] += f"; {long}"
    return out


def _sglang_long_context(model: str, entry: dict[str, Any]) -> str | None:
    """Why the SGLang line sets SGLang's long-context switch: its --context-length (the vLLM candidate's length) is
    above the context SGLang derives itself (``accounting/max_model_len.py``; SGLang raises "User-specified
    context_length … is greater than the derived context_length" without it, ``configs/model_config.py``), else
    None (also when the model cannot be read here)."""
    from kvledger.catalog.models import load_model
    from kvledger.errors import KvLedgerError

    try:
        ctx, _ = engine_config_len(load_model(model), "sglang", None)
    except KvLedgerError:
        return None
    plans = [pl for pl in (entry["plan"], entry.get("decode_plan")) if pl]
    length = max(pl.get("launch_max_model_len", pl["max_model_len"]) for pl in plans)
    if length <= ctx:
        return None
    return (f"the SGLang line's --context-length {length:,} is above the {ctx:,} tokens SGLang "
            f"{sglang_version_text(SGLANG_LATEST)}'s get_context_length derives from the config, which it refuses "
            f"unless {ALLOW_LONG_ENV['sglang']} (set on the line; configs/model_config.py)")


def _sglang_refusal(model: str, tps: tuple[int, ...], ep: bool = False) -> str | None:
    """SGLang's refusal of a candidate's TP (quantized shards it cannot create, catalog/quant_tp_sglang.py; ``ep``:
    the line's --ep-size = TP, experts whole); None when it starts or the model cannot be read here (the search itself
    reports that)."""
    from kvledger.catalog.models import load_model
    from kvledger.catalog.quant_tp_sglang import check_sglang_quant_tp
    from kvledger.errors import InputError, KvLedgerError

    try:
        spec = load_model(model)
    except KvLedgerError:
        return None
    for tp in dict.fromkeys(tps):
        try:
            check_sglang_quant_tp(spec, tp, ep=tp if ep else 1)
        except InputError as err:
            return str(err)
    return None


@dataclass(frozen=True)
class CandidateCommands:
    """What ``--show-command`` prints for one candidate: its id and layout, its pool's plan figures (and the decode
    pool's, disaggregated), the launch commands (``launch_for``), and its rank when the search ranked it."""

    id: str
    layout: str
    plan: dict[str, Any]
    launch: dict[str, str]
    decode_plan: dict[str, Any] | None = None
    rank: int | None = None

    __json__ = ("rank", "id", "layout", "plan", "decode_plan", "launch")
    __json_optional__ = ("rank", "decode_plan")

    @classmethod
    def of_entry(cls, e: dict[str, Any], launch: dict[str, str], rank: int | None = None) -> CandidateCommands:
        """From a ledger entry (planned or ranked) and its launch commands."""
        return cls(e["id"], e["layout"], e["plan"], launch, e.get("decode_plan"), rank)


def candidate_commands(spec: Any, candidate_id: str) -> CandidateCommands:
    """The launch commands of one candidate id of ``spec``'s search, planned but not simulated.

    Raises:
        InputError: a malformed id, or a candidate the engine could not start (its rejection, with the numbers).
        UnknownNameError: an unknown GPU.
    """
    from dataclasses import replace

    from kvledger.analyses.search.naming import parse_candidate_id
    from kvledger.analyses.search.screen import screen_candidate
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.errors import InputError

    cand = parse_candidate_id(candidate_id)
    g = resolve_gpu(cand.gpu_id)
    cand = replace(cand, gpu_id=cand.gpu_id if g.gpu_id == "custom" else g.gpu_id)
    e = screen_candidate(spec, cand)
    if e["status"] == "rejected" and e["reason"] not in PRICE_REASONS:
        raise InputError(f"{cand.id} is rejected ({e['reason']}): {e['detail']}")
    return CandidateCommands.of_entry(e, launch_for(spec.model, cand.gpu_id, e, spec.engine_version))
