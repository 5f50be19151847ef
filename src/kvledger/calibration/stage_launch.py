"""The launch record an inference-perf stage file's harness kept beside it: which model, at which TP, under which
scheduler limits the measured engine ran — so a stage is replayed on the engine that served it, not on defaults.

inference-sim/training (the BLIS simulator's fitting data) writes one ``exp-config.yaml`` per experiment, a folder
above its stage files (``<experiment>/exp-config.yaml``; the stages are ``<experiment>/results/stage_<k>_….json``)
with the keys its launch script passed to ``vllm serve``: ``model``, ``tensor_parallelism``, ``max_model_len``,
``max_num_batched_tokens``, ``max_num_seqs``. They become the run's ``engine_hints`` under vLLM's names, which
``kvledger.calibration.api.engine_for`` takes where the user gave no flag (``run_record``), and the model its metadata
names (``calibrate --scope gpu`` replays each run with its own model). A stage without such a file states nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence.inference_perf_client import CLIENT_FILE, fixed_output_tokens
from kvledger.evidence.inference_perf_client import client_config as _client_config

__all__ = ["LAUNCH_FILE", "CLIENT_FILE", "StageLaunch", "PromptPool", "stage_launch", "fixed_output_tokens",
           "client_prompt_pool"]

LAUNCH_FILE = "exp-config.yaml"
#: exp-config.yaml key → vLLM's engine argument (what ``run_record`` reads from ``engine_kwargs``)
_INT_KEYS = {"tensor_parallelism": "tensor_parallel_size", "max_model_len": "max_model_len",
             "max_num_batched_tokens": "max_num_batched_tokens", "max_num_seqs": "max_num_seqs"}


class StageLaunch:
    """What a stage's launch record states: ``model`` (HF id or None), ``engine_kwargs`` (vLLM names → ints) and the
    ``path`` read (None when there was none)."""

    __slots__ = ("model", "engine_kwargs", "path")

    def __init__(self, model: str | None = None, engine_kwargs: dict[str, int] | None = None,
                 path: str | None = None) -> None:
        self.model, self.engine_kwargs, self.path = model, dict(engine_kwargs or {}), path


def stage_launch(stage_path: str | Path) -> StageLaunch:
    """The launch record of the stage file at ``stage_path`` (module docstring); empty when none lies beside it.

    Raises:
        FormatError: the record exists but is not a YAML mapping, or a limit in it is not a positive integer.
    """
    p = Path(stage_path).resolve().parent
    rec = next((d / LAUNCH_FILE for d in (p, p.parent) if (d / LAUNCH_FILE).is_file()), None)
    if rec is None:
        return StageLaunch()
    import yaml

    try:
        raw: Any = yaml.safe_load(rec.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise FormatError(str(rec), f"cannot read the launch record as YAML ({e})") from None
    if not isinstance(raw, dict):
        raise FormatError(str(rec), "a launch record is a YAML mapping (model: …, tensor_parallelism: …)")
    kwargs = {}
    for key, name in _INT_KEYS.items():
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise FormatError(str(rec), f"{key} must be a positive integer, got {v!r}")
        kwargs[name] = v
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise FormatError(str(rec), f"model must be a model name, got {model!r}")
    return StageLaunch(model.strip() if model else None, kwargs, str(rec))


class PromptPool:
    """The fixed pool of whole prompts an inference-perf ``shared_prefix`` client re-sent: ``prompts`` (groups ×
    prompts per group), ``multi_turn`` (its sessions grow a context instead) and the config ``path`` read."""

    __slots__ = ("prompts", "multi_turn", "path")

    def __init__(self, prompts: int, multi_turn: bool, path: str) -> None:
        self.prompts, self.multi_turn, self.path = prompts, multi_turn, path


#: inference-perf's ``SharedPrefix`` config keys and their aliases (``config.py``: ``AliasChoices``)
_POOL_KEYS = (("num_groups", "num_unique_system_prompts"), ("num_prompts_per_group", "num_users_per_system_prompt"))


def client_prompt_pool(stage_path: str | Path) -> PromptPool | None:
    """The prompt pool the stage's client drew from (``PromptPool``), read from the nearest client config (as
    ``fixed_output_tokens``); None unless it states ``data.type: shared_prefix`` with positive integer group counts.

    The rule, from inference-perf's ``datagen/shared_prefix_datagen.py`` (the 2025 releases): the generator makes
    ``num_groups`` random system prompts of ``system_prompt_len`` tokens and, under each, ``num_prompts_per_group``
    random questions of ``question_len`` tokens; the whole prompts (system + question) are shuffled once and then sent
    in turn, ``i = (i + 1) % len(prompts)``, for the whole run. So every request re-sends one of a fixed pool of
    whole prompts (not only a shared system prompt), and an engine with prefix caching serves all of a repeated
    prompt but its last partial block. With ``enable_multi_turn_chat`` each prompt is a user session whose context
    grows by round instead (``multi_turn``)."""
    cfg = _client_config(stage_path)
    if cfg is None or not isinstance(cfg[1], dict):
        return None
    data = cfg[1].get("data")
    if not isinstance(data, dict) or str(data.get("type", "")).lower() != "shared_prefix":
        return None
    sp = data.get("shared_prefix")
    if not isinstance(sp, dict):
        return None
    counts = [next((sp[k] for k in keys if k in sp), 10) for keys in _POOL_KEYS]  # 10 × 10: inference-perf's defaults
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts):
        return None
    return PromptPool(counts[0] * counts[1], sp.get("enable_multi_turn_chat") is True, str(cfg[0]))
