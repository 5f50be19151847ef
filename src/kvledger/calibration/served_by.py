"""The server a benchmark file names, where it is neither vLLM nor SGLang: ``validate`` and ``calibrate`` replay with
vLLM's rules (SGLang's where the file or a flag says SGLang), so a run another server measured is compared with
another engine's scheduler and memory plan, and the note says so.

Where each reader keeps the field (``RunMetadata.extra``):

* ``backend`` — vLLM's ``vllm bench serve`` and SGLang's ``bench_serving`` (``_TOOL_FIELDS``). vLLM's client names
  (``benchmarks/backend_request_func.py`` up to 0.10, ``benchmarks/lib/endpoint_request_func.py`` ASYNC_REQUEST_FUNCS
  in 0.19.0): ``vllm``, ``openai``/``openai-chat`` (a protocol, no server named), ``tgi``, ``lmdeploy``,
  ``deepspeed-mii``, ``tensorrt-llm``, ``scalellm``, ``llama.cpp``, ``infinity-*``; SGLang's adds ``trt``,
  ``lmdeploy-chat``, ``sglang-*``, ``vllm-chat``.
* ``service_kind`` — GenAI-Perf's raw ``profile_export.json``: ``triton`` (Triton Inference Server, whose backend the
  raw file does not name), ``tensorrtllm_engine`` (TensorRT-LLM in process), ``openai`` (a protocol).

Not kept by their readers, so not said: llmperf writes neither ``--llm-api`` nor a server into its results (the model
id only; a LiteLLM provider prefix names a hosted API, not a server), GuideLLM's backend type (``openai_http``) and
AIPerf's endpoint type name protocols.
"""

from __future__ import annotations

from typing import Any

__all__ = ["other_server_note"]

#: client names that name a server kvledger does not model, by that server's name
_SERVERS = {"tgi": "TGI (Text Generation Inference)", "lmdeploy": "LMDeploy", "lmdeploy-chat": "LMDeploy",
            "deepspeed-mii": "DeepSpeed-MII", "tensorrt-llm": "TensorRT-LLM", "trt": "TensorRT-LLM",
            "tensorrtllm_engine": "TensorRT-LLM", "scalellm": "ScaleLLM", "llama.cpp": "llama.cpp",
            "triton": "Triton Inference Server", "infinity-embeddings": "Infinity",
            "infinity-embeddings-clip": "Infinity"}
_FIELDS = ("backend", "service_kind")


def other_server_note(extra: dict[str, Any], replayed: str) -> str | None:
    """The note for a file whose ``backend`` / ``service_kind`` names a server that is neither vLLM nor SGLang; None
    where it names vLLM, SGLang, a protocol or nothing. ``replayed``: the engine whose rules the replay runs."""
    for field in _FIELDS:
        value = extra.get(field)
        server = _SERVERS.get(value.strip().lower()) if isinstance(value, str) else None
        if server is not None:
            return (f"the file names {server} as its server ({field} \"{value}\"): the replay uses {replayed}'s "
                    f"scheduler and memory rules, and {server}'s are not modelled, so the errors include the "
                    "difference between the two servers")
    return None
