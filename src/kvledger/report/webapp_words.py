"""Error texts in the web app's words: the core's messages name command-line flags (``--gpu FILE.json``,
``--gpu-memory``, ``--gpu-provider``), which the app's form does not have; each is reworded for the app's fields, and
a flag left over is said to be the command line's."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["in_app_words", "request_errors"]

_FIELDS = ("model, GPU, engine, engine_version, tensor parallel (TP), max_model_len, KV cache dtype, quantization, "
           "gpu_memory_utilization, mem_fraction_static, data_parallel_size, enable_dp_attention, attn_dp_size, "
           "ep_size, enable_expert_parallel, max_num_seqs, host KV tier, Windows/WSL2 (WDDM), SLOs, API price row, "
           "GPU provider, GPU price (gpu_usd_per_hour), traffic, volume, input/output tokens per month, "
           "peak-to-mean, batch share, cache-hit rate, cache-write rate, team capability, engineer-months, "
           "engineer cost, utilization, requests per simulation, client latency, prompt lengths, output lengths, "
           "shared prefix tokens, document pool")
# (pattern, replacement), most specific first
_WORDS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"for another GPU pass --gpu FILE\.json/\.toml \(fields: ([^)]*)\)",
     r"for another GPU write a GPU file (.json/.toml; fields: \1) into the folder given to `kvledger ui --data-dir "
     r"DIR` and name it in the GPU field"),
    (r",? or a catalog GPU adjusted with --gpu-memory/--gpu-bandwidth/--gpu-bf16-tflops(?: \(`kvledger plan`'s "
     r"options\))?\.?",
     r". A catalog GPU with other memory, bandwidth or peak is a command-line option (`kvledger plan --gpu-memory "
     r"…`), not a field here."),
    (r"Pick one with --gpu-provider \(and --instance\), or give --gpu-usd-per-hour",
     r"Pick one with the GPU provider field (gpu_provider; `kvledger cost --gpu-provider P --instance I` picks one "
     r"instance), or give your own price in the GPU price field (gpu_usd_per_hour)"),
    (r"^unknown GPU price provider ('[^']*')\. \(", r"gpu_provider \1 (the GPU provider field) is not in the price "
     r"table ("),
    (r"; or pass --gpu-usd-per-hour\)", r"; or give your own price in the GPU price field, gpu_usd_per_hour)"),
    (r"pass --gpu-provider to choose another", r"name another in the GPU provider field (gpu_provider)"),
    (r"(?<!cost )--gpu-provider(?![\w-])", r"the GPU provider field (gpu_provider)"),
    (r"--batch-share", r"the batch share field (batch_share)"),
    (r"--cache-hit-rate", r"the cache-hit rate field (cache_hit_rate)"),
    (r"--cache-write-rate", r"the cache-write rate field (cache_write_rate)"),
    (r"--engineer-months-per-month", r"the engineer-months field (engineer_months_per_month)"),
    (r"--engineer-usd-per-month", r"the engineer cost field (engineer_usd_per_month)"),
    (r"^team capability must be", r"the team capability field (team_capability) must be"),
    (r"--peak-to-mean", r"the peak-to-mean field (peak_to_mean)"),
    (r"\(or pass --gpu-usd-per-hour to give your own price\)",
     r"(or give your own price in the GPU price field, gpu_usd_per_hour, in USD per GPU-hour)"),
    (r"given \(--gpu-usd-per-hour\)", r"given (the GPU price field, gpu_usd_per_hour)"),
    (r"--gpu-usd-per-hour", r"the GPU price field (gpu_usd_per_hour)"),
    # a command named with its flags is the command line's, quoted as one (its flag is no field of the app)
    (r"(?<!`)kvledger prices --kind gpu(?![\w-])", r"`kvledger prices --kind gpu`"),
    (r"(?<![\w`-])(?:--quantization|-q)(?![\w-])", r"the quantization field"),
    (r"\(--max-model-len (\d+)\)", r"(max_model_len \1 in the context field)"),
    (r"--max-model-len", r"the context field (max_model_len)"),
    (r"--kv-cache-dtype", r"the KV cache dtype field"),
    (r"--gpu-memory-utilization", r"gpu_memory_utilization"),  # the request's own fields of those names
    (r"--mem-fraction-static", r"mem_fraction_static"),
    (r"(?<![\w-])(?:--data-parallel-size|--dp-size)(?![\w-])", r"data_parallel_size"),
    (r"--enable-dp-attention", r"enable_dp_attention"),
    (r"(?<![\w-])--attn-dp-size(?![\w-])", r"attn_dp_size"),
    (r"(?<![\w-])--enable-expert-parallel(?![\w-])", r"enable_expert_parallel"),
    (r"(?<![\w-])--ep-size(?![\w-])", r"ep_size"),
    (r"--engine-version", r"engine_version"),
    (r"--max-num-seqs", r"max_num_seqs"),
    (r"--kv-offloading-size", r"the host KV tier field (kv_offloading_size)"),
    (r"drop --wddm", r"untick the Windows/WSL2 (WDDM) box"),
    (r"--wddm", r"Windows/WSL2 (WDDM)"),
    (r"--client-latency", r"the client latency field"),
    (r"--prompt-lengths", r"the prompt lengths field (prompt_lengths)"),
    (r"--output-lengths", r"the output lengths field (output_lengths)"),
    (r"--shared-prefix-tokens", r"the shared prefix field (shared_prefix_tokens)"),
    (r"--document-pool (K|zipf=S)(?![\w=-])", r"the document pool field's \1 (document_pool)"),  # its range's names
    (r"--document-pool(?![\w-])", r"the document pool field (document_pool)"),
    (r"(?<![\w-])--trace(?![\w-])", r"the traffic (trace) field"),
    (r"pass --num-requests ([\d,]+) or fewer", r"set the requests per simulation field (num_requests) to \1 or fewer"),
    (r"--num-requests", r"the requests per simulation field (num_requests)"),
    (r"--slo is empty", r"the SLO field is empty"),  # ledgers.slo.parse_slo's refusal of nothing
    (r"--slo(?![\w-])", r"the SLO field"),
    (r"^--utilization (\S+) cannot", r"utilization \1 (the utilization field) cannot"),  # volume.refuse_utilization_...
    (r"\(--monthly-tokens, --monthly-requests, or --monthly-input-tokens with --monthly-output-tokens\)",
     r"(the volume field, or the input and output tokens fields)"),
    (r"--monthly-tokens", r"the volume field (monthly_tokens)"),
    (r"--monthly-input-tokens", r"monthly_input_tokens"),  # the request's own fields of those names
    (r"--monthly-output-tokens", r"monthly_output_tokens"),
    (r"Drop --utilization", r"Empty the utilization field"),
    (r"leave the flag out for the per-token ledgers alone", r"empty the volume field for the per-token ledgers alone"),
    (r"\(given \(--utilization\)\)", r"(given: the utilization field)"),  # cost's secondary line: the utilization
    (r"assumed: --max-utilization, no volume given",
     r"assumed: `kvledger cost --max-utilization`'s default, with the utilization and volume fields empty"),
    (r"--engine must be one of", r"the engine field must be one of"),  # PlanSettings' refusal only
    (r"with (?:--engine|--policy) (vllm|sglang|trtllm)", r"with the engine field at \1"),
    (r"use (?:--engine|--policy) (vllm|sglang|trtllm)", r"set the engine field to \1"),
    (r"or (?:--engine|--policy) (vllm|sglang|trtllm)", r"or set the engine field to \1"),  # the fraction's refusal
    (r"(?<![\w`-])(?<!kvledger plan )(?<!kvledger simulate )(?:--engine|--policy)(?![\w-])", r"the engine field"),
    (r"--tensor-parallel-size|--tp\b", r"the tensor parallel (TP) field"),
))
_FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]+(?!\w)")  # not a part of another engine's --ep_size


def in_app_words(message: str) -> str:
    """``message`` with the command line's flags replaced by the app's fields where the app has one; a flag the app
    has no field for is kept and said to be the command line's."""
    for pattern, replacement in _WORDS:
        message = pattern.sub(replacement, message)
    outside = [m.group(0) for m in _FLAG.finditer(re.sub(r"`[^`]*`", "", message))]
    if outside:
        message += (f" ({', '.join(dict.fromkeys(outside))}: `kvledger` command-line option"
                    f"{'s' if len(set(outside)) > 1 else ''}; the app's fields are {_FIELDS})")
    return message


def request_errors(errors: list[dict]) -> str:
    """One sentence for pydantic's validation errors of a request: a body that is not JSON (or not a JSON object)
    said so, else each field with what it must be."""
    from kvledger.accounting.settings import reason_in_words

    if any(e.get("type") == "json_invalid" for e in errors):
        return ("the request body is not JSON: the app's API takes a JSON object such as "
                '{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}')
    if any(e.get("type") == "model_attributes_type" or tuple(e.get("loc", ())) == ("body",) for e in errors):
        return ('the request body is not a JSON object: the app\'s API takes one such as {"model": '
                '"meta-llama/Llama-3.1-8B", "gpu": "H100"}')
    return "invalid parameter: " + "; ".join(_field_error(e, reason_in_words) for e in errors)


def _field_error(e: dict, reason_in_words: Any) -> str:
    """One field's error: an unknown field named as such (refused, never dropped), a true/false field or a number in
    words (a boolean or a numeric string where a number belongs is refused: the request is strict)."""
    got = repr(e.get("input"))
    name, got = e["loc"][-1], got if len(got) <= 200 else got[:200] + "…"
    if e.get("type") == "extra_forbidden":
        return f"{name} is not a field of this request, got {got} (an unknown field is refused, not ignored)"
    if e.get("type") == "missing":
        return f"{name} is required and missing from the request"
    if e.get("type") == "string_too_long":
        return f"{name} is {len(e['input']):,} characters long; at most {e['ctx']['max_length']:,} are read"
    kind = str(e.get("type", ""))
    reason = ("must be true or false" if kind.startswith("bool_") else "must be text" if kind == "string_type" else
              reason_in_words(e))
    return f"{name} {reason}, got {got}"
