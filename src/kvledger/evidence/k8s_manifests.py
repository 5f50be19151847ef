"""The engine a Kubernetes Deployment launched, read from the ``manifests.yaml`` an inference-perf run keeps beside its
results (kubecon's layout: ``<deployment>/manifests.yaml`` above ``<deployment>/results/stage_N_…json``).

From each ``Deployment``: the GKE accelerator label, the GPU count (``nvidia.com/gpu`` limit × replicas), the served
model (the ``MODEL_ID`` variable), the vLLM version of the container image (``vllm/vllm-openai:v0.11.0`` → 0.11.0) and
the engine flags of the container's ``args``, as vLLM's CLI reads them (``--flag=value`` or ``--flag value``, ``-`` or
``_`` alike, ``--no-enable-…`` for a boolean off), into the ``engine_kwargs`` keys that
``kvledger.calibration.run_record`` reads; every other flag under ``engine_kwargs["other_flags"]`` (vLLM's name with
``_`` → its value as written, True for a bare one), which ``run_record`` refuses, warns of or knows to be harmless;
``VLLM_USE_V1=0`` in the container's environment (vLLM 0.8–0.10's switch back to the V0 engine) as kvledger's
``batching`` "vllm_v0". An argument that is a shell reference (``$(MODEL_ID)``) is not a setting.

Kubernetes hands each ``args`` entry to the process as one argv element, unsplit (no shell runs). vLLM's
``FlexibleArgumentParser`` only rewrites ``_`` to ``-`` in a flag's name (0.11.0 ``utils/__init__.py :: parse_args``),
then Python's argparse reads an element that holds a space and is not ``--flag=value`` as a *positional*, never a
flag (``_parse_optional``: "if it contains a space, it was meant to be a positional"). Such elements go under
``engine_kwargs["positional_args"]`` as written, and the container's module entry point (``python3 -m
vllm.entrypoints.openai.api_server``) under ``engine_kwargs["entrypoint"]``, for ``run_record`` to say what vLLM did
with them: kubecon's ``vllm+quantization`` writes ``"--quantization bitsandbytes"`` as one element.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["MANIFESTS_UP", "manifests_path", "deployment_facts", "manifest_facts"]

MANIFESTS_UP = 1  # the manifests beside the results file, or this many folders above it
#: vLLM CLI flag (dashes) → (engine_kwargs key, type)
_FLAGS: dict[str, tuple[str, type]] = {
    "tensor-parallel-size": ("tensor_parallel_size", int), "tp": ("tensor_parallel_size", int),
    "pipeline-parallel-size": ("pipeline_parallel_size", int), "pp": ("pipeline_parallel_size", int),
    "data-parallel-size": ("data_parallel_size", int), "dp": ("data_parallel_size", int),
    "max-num-seqs": ("max_num_seqs", int), "max-num-batched-tokens": ("max_num_batched_tokens", int),
    "max-model-len": ("max_model_len", int), "gpu-memory-utilization": ("gpu_memory_utilization", float),
    "block-size": ("block_size", int), "kv-cache-dtype": ("kv_cache_dtype", str),
}
_BOOLS = {"enable-prefix-caching": "enable_prefix_caching", "enable-chunked-prefill": "enable_chunked_prefill",
          "async-scheduling": "async_scheduling", "enable-expert-parallel": "enable_expert_parallel",
          "enforce-eager": "enforce_eager"}
_IMAGE_VERSION = re.compile(r"vllm[-/\w.]*:v?(\d+\.\d+(?:\.\d+)?)")


def manifests_path(results_file: str | Path, name: str = "manifests.yaml") -> Path | None:
    """The manifests beside ``results_file`` or up to ``MANIFESTS_UP`` folders above it (the nearest), or None."""
    here = Path(results_file).resolve().parent
    return next((d / name for d in [here, *here.parents][:MANIFESTS_UP + 1] if (d / name).is_file()), None)


def manifest_facts(results_file: str | Path) -> tuple[Path | None, dict[str, Any]]:
    """(the manifests file found for ``results_file``, its ``deployment_facts``); (None, {}) without one. An
    unreadable or broken file gives {} (it only adds what the run's own file does not say)."""
    from kvledger.evidence._io import yaml_docs

    where = manifests_path(results_file)
    return (where, deployment_facts(yaml_docs(where))) if where is not None else (None, {})


def engine_kwargs(args: list[str]) -> dict[str, Any]:
    """The engine settings of a vLLM command line's ``args`` (module docstring); a value that does not read as its
    type is left out."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        raw = str(args[i])
        a = raw.strip()
        i += 1
        if not a.startswith("-"):
            continue
        key, eq, value = a.lstrip("-").replace("_", "-").partition("=")
        if " " in raw.partition("=")[0]:  # one argv element "--quantization bitsandbytes" (or "--flag " with a
            out.setdefault("positional_args", []).append(raw)  # trailing space): argparse's positional (docstring)
            continue
        if key in _BOOLS or (key.startswith("no-") and key[3:] in _BOOLS):
            out[_BOOLS[key.removeprefix("no-")]] = not key.startswith("no-")
            continue
        if not eq and i < len(args) and not str(args[i]).startswith("-"):
            value, i = str(args[i]).strip(), i + 1
        if key not in _FLAGS:  # kept under vLLM's name, so that the run record names what it does not apply
            if "$(" not in value:
                out.setdefault("other_flags", {})[key.replace("-", "_")] = value if value else True
            continue
        kw, kind = _FLAGS[key]
        try:
            out[kw] = kind(value) if "$(" not in value else None
        except ValueError:
            continue
        if out[kw] is None:
            del out[kw]
    return out


def deployment_facts(docs: list[Any]) -> dict[str, Any]:
    """From the YAML documents of a manifests file: ``accelerator``, ``num_gpus``, ``deployed_model``,
    ``vllm_version`` and ``engine_kwargs``, each only when a Deployment states it (the last one that does wins)."""
    out: dict[str, Any] = {}
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Deployment":
            continue
        spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
        pod = ((spec.get("template") or {}).get("spec") or {}) if isinstance(spec.get("template"), dict) else {}
        containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
        accel = (pod.get("nodeSelector") or {}).get("cloud.google.com/gke-accelerator") \
            if isinstance(pod.get("nodeSelector"), dict) else None
        if accel:
            out["accelerator"] = str(accel)
        gpus = sum(_whole(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")) for c in containers
                   if isinstance(c.get("resources"), dict) and isinstance(c["resources"].get("limits"), dict))
        if gpus:
            out["num_gpus"] = gpus * max(_whole(spec.get("replicas")) or 1, 1)
        for c in containers:
            served = next((e.get("value") for e in c.get("env") or [] if isinstance(e, dict)
                           and e.get("name") == "MODEL_ID"), None)
            if served:
                out["deployed_model"] = str(served)
            m = _IMAGE_VERSION.search(str(c.get("image") or ""))
            if m:
                out["vllm_version"] = m.group(1) + (".0" if m.group(1).count(".") == 1 else "")
            kwargs = engine_kwargs([str(a) for a in c.get("args") or []] if isinstance(c.get("args"), list) else [])
            if kwargs.get("positional_args"):
                entry = _entrypoint(c)
                if entry:
                    kwargs["entrypoint"] = entry
            if any(isinstance(e, dict) and e.get("name") == "VLLM_USE_V1" and str(e.get("value")) == "0"
                   for e in c.get("env") or []):
                kwargs["batching"] = "vllm_v0"
            if kwargs:
                out["engine_kwargs"] = kwargs
    return out


def _entrypoint(container: dict) -> str | None:
    """The vLLM entry point a container runs: the module of ``python -m MODULE``, or "vllm serve"; None otherwise."""
    line = [str(a) for key in ("command", "args") if isinstance(container.get(key), list) for a in container[key]]
    module = next((line[i + 1] for i in range(len(line) - 1) if line[i] == "-m"), None)
    if module:
        return module
    return "vllm serve" if len(line) > 1 and line[0].rsplit("/", 1)[-1] == "vllm" and line[1] == "serve" else None


def _whole(v: Any) -> int:
    """A non-negative whole number from a manifest field (an int or a numeric string), else 0."""
    try:
        n = float(v)
    except (TypeError, ValueError):
        return 0
    return int(n) if n == n and 0 <= n < 1 << 31 and n == int(n) else 0
