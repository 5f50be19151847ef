"""Engine settings echoed in a vLLM log: the ``non-default args`` dict, the engine-config echo, ``Namespace(...)`` and
``vllm serve`` command lines.

Each reader returns ``{startup field: value}`` in the units of ``types.STARTUP_FIELDS``; keys vLLM
spells differently across versions (``max_seq_len`` in the config echo, ``model_tag``) are mapped.
"""

from __future__ import annotations

import ast
import re
import shlex
from typing import Any

__all__ = ["from_arg_dict", "from_key_values", "from_command_line"]

_KEYS = {
    "model": "model", "served_model_name": "served_model_name", "dtype": "dtype", "quantization": "quantization",
    "max_model_len": "max_model_len", "max_seq_len": "max_model_len", "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size", "data_parallel_size": "data_parallel_size",
    "gpu_memory_utilization": "gpu_memory_utilization", "kv_cache_dtype": "kv_cache_dtype", "block_size": "block_size",
    "max_num_batched_tokens": "max_num_batched_tokens", "max_num_seqs": "max_num_seqs",
    "enable_prefix_caching": "enable_prefix_caching", "enable_chunked_prefill": "enable_chunked_prefill",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
}
_INT = {"max_model_len", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "block_size",
        "max_num_batched_tokens", "max_num_seqs", "num_gpu_blocks_override"}
_FLOAT = {"gpu_memory_utilization"}
_BOOL = {"enable_prefix_caching", "enable_chunked_prefill"}
_SHORT_FLAGS = {"-tp": "tensor_parallel_size", "-pp": "pipeline_parallel_size", "-dp": "data_parallel_size",
                "-q": "quantization"}


def _convert(field: str, value: Any) -> Any:
    """A raw echoed value in the field's type, or None for "None"/unparseable values."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if value is None or (isinstance(value, str) and value.strip().strip("'\"") in ("None", "")):
        return None
    text = str(value).strip().strip("'\"")
    try:
        if field in _INT:
            return int(float(text))
        if field in _FLOAT:
            return float(text)
        if field in _BOOL:
            return text.lower() in ("true", "1", "yes") if not isinstance(value, bool) else value
    except (ValueError, OverflowError):  # OverflowError: an echoed "inf" or "1e999" for a whole-number setting
        return None
    return text.removeprefix("torch.") if field == "dtype" else text


def _mapped(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        field = _KEYS.get(key)
        if field is None and key == "model_tag":
            field = "model" if "model" not in raw else None
        if field:
            v = _convert(field, value)
            if v is not None:
                out[field] = v
    return out


def from_arg_dict(text: str) -> dict[str, Any]:
    """``non-default args: {...}``: a Python dict literal; a truncated one falls back to key/value scanning."""
    try:
        raw = ast.literal_eval(text.strip())
        if isinstance(raw, dict):
            return _mapped(raw)
    except (ValueError, SyntaxError):
        pass
    pairs = re.findall(r"'(\w+)':\s*('[^']*'|\[[^\]]*\]|[^,}]+)", text)
    return _mapped({k: v.strip() for k, v in pairs})


def from_key_values(text: str) -> dict[str, Any]:
    """The engine-config echo (``model='x', max_seq_len=131072, ...``) or ``Namespace(...)``."""
    pairs = re.findall(r"(?<![\w.])(\w+)=('[^']*'|\"[^\"]*\"|[^,()\s]+)", text)
    return _mapped({k: v for k, v in pairs})


def from_command_line(text: str) -> dict[str, Any]:
    """``vllm serve MODEL --max-model-len 2048 ...`` or ``python -m vllm.entrypoints.openai.api_server --model M
    ...``."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    raw: dict[str, Any] = {}
    if "serve" in words:
        i = words.index("serve") + 1
        if i < len(words) and not words[i].startswith("-"):
            raw["model"] = words[i]
    for i, w in enumerate(words):
        if not w.startswith("-"):
            continue
        name, _, inline = w.partition("=")
        key = _SHORT_FLAGS.get(name) or name.lstrip("-").replace("-", "_")
        if key.startswith("no_enable_"):
            raw[key.removeprefix("no_")] = False
            continue
        value = inline or (words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else True)
        raw[key] = value
    return _mapped(raw)
