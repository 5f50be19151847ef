"""Recognising logs from other serving engines, so that ``kvledger doctor`` can say what it was given.

Signatures are literal strings each engine prints in normal operation (seen in the fixtures under
``tests/fixtures/vllm_logs``): SGLang's scheduler lines, TGI's launcher/router targets, TensorRT-LLM's
``[TensorRT-LLM]`` prefix, llama.cpp's loader and slot lines (also inside Ollama and LM Studio logs).
"""

from __future__ import annotations

__all__ = ["ENGINE_SIGNATURES", "ENGINE_NAMES", "other_engine_hits"]

ENGINE_SIGNATURES: dict[str, tuple[str, ...]] = {
    "sglang": ("Decode batch, #running-req", "Decode batch. #running-req", "Prefill batch, #new-seq", "Prefill batch. "
        "#new-seq",
               "KV Cache is allocated. #tokens", "sglang.launch_server", "sglang.srt"),
    "tgi": ("text_generation_launcher", "text_generation_router", "text-generation-launcher"),
    "trtllm": ("[TensorRT-LLM]", "tensorrt_llm", "trtllm-serve", "TRTGptModel"),
    "llama.cpp": ("llama_model_loader:", "llama_new_context_with_model", "llama_context:", "llama_load_model_from_file",
                  "slot update_slots", "ggml_cuda_init", "llm_load_tensors", "load_tensors:"),
}

ENGINE_NAMES = {"sglang": "SGLang", "tgi": "Hugging Face TGI", "trtllm": "TensorRT-LLM", "llama.cpp": "llama.cpp (or "
    "Ollama/LM Studio on it)"}


def other_engine_hits(line: str) -> str | None:
    """The other engine whose signature this line carries, or None."""
    for engine, needles in ENGINE_SIGNATURES.items():
        if any(n in line for n in needles):
            return engine
    return None
